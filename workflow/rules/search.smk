wildcard_constraints:
    shard=r"\d+",
    shards=r"\d+",
    binary=rf"(?!lib-)[^/]+-[0-9a-f]{{12}}|{MISSING}",
    lane=rf"[^/]+-[0-9a-f]{{12}}|{MISSING}",
    run=r"[^/]+",
    view="(" + "|".join(f for f in VIEW_FOLDERS if f) + ")?",


# The shared arms (dense, bm25 AND, bm25 OR) of a shard's personas, computed once.
rule search_arms:
    input:
        rows=paths.fill(paths.FILTER, name="rows.parquet"),
        texts=paths.fill(paths.FILTER, name="texts.parquet"),
        embeddings=get_embeddings,
    output:
        paths.ARMS_SHARD,
    log:
        "results/logs/{view}search_arms/shard-{shard}-of-{shards}.log",
    benchmark:
        "results/benchmarks/{view}search_arms/shard-{shard}-of-{shards}.tsv"
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=3000,
        runtime=60,
    params:
        code=code_version("search-arms"),
        options=search_options,
    shell:
        "vipune-eval search-arms --rows {input.rows:q} --texts {input.texts:q}"
        " --embeddings {input.embeddings:q} --shard {wildcards.shard} --shards {wildcards.shards}"
        " {params.options} --arms-out {output:q} 2> {log:q}"


# One family setting (a preset or a configured variant): every shard's run, fused from the arms.
rule fuse_reference:
    input:
        arms=get_arms,
    output:
        [
            paths.fill(paths.SEARCH_SHARD, shard=i, shards=config["search"]["shards"])
            for i in range(config["search"]["shards"])
        ],
    log:
        "results/logs/{view}fuse_reference/{run}.log",
    benchmark:
        "results/benchmarks/{view}fuse_reference/{run}.tsv"
    wildcard_constraints:
        run=runs_pattern(RUNS_OF[Kind.ARMS]),
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        code=code_version(W.SEARCHES[Kind.ARMS].command),
        retriever=retriever_spec,
        options=search_options,
        rank_all=lambda wildcards: ("--rank-all" if view_of(wildcards).rank_all else ""),
    shell:
        "vipune-eval fuse-reference --arms {input.arms:q} --retriever {params.retriever:q}"
        " {params.options} {params.rank_all} --outputs {output:q} 2> {log:q}"


# A family that ranks from the persona's own texts (bm25-lme), over one shard of personas.
rule search_family:
    input:
        rows=paths.fill(paths.FILTER, name="rows.parquet"),
        texts=paths.fill(paths.FILTER, name="texts.parquet"),
        embeddings=get_embeddings,
    output:
        paths.SEARCH_SHARD,
    log:
        "results/logs/{view}search_family/{run}/shard-{shard}-of-{shards}.log",
    benchmark:
        "results/benchmarks/{view}search_family/{run}/shard-{shard}-of-{shards}.tsv"
    wildcard_constraints:
        run=runs_pattern(RUNS_OF[Kind.PERSONA]),
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=3000,
        runtime=60,
    params:
        code=code_version(W.SEARCHES[Kind.PERSONA].command),
        retriever=retriever_spec,
        options=search_options,
        rank_all=lambda wildcards: ("--rank-all" if view_of(wildcards).rank_all else ""),
    shell:
        "vipune-eval search-family --rows {input.rows:q} --texts {input.texts:q}"
        " --embeddings {input.embeddings:q} --shard {wildcards.shard} --shards {wildcards.shards}"
        " {params.options} {params.rank_all} --retriever {params.retriever:q} --out {output:q} 2> {log:q}"


# A plugin retriever (a user's function) over one shard of personas.
rule search_plugin:
    input:
        rows=paths.fill(paths.FILTER, name="rows.parquet"),
        texts=paths.fill(paths.FILTER, name="texts.parquet"),
        embeddings=get_embeddings,
    output:
        paths.SEARCH_SHARD,
    log:
        "results/logs/{view}search_plugin/{run}/shard-{shard}-of-{shards}.log",
    benchmark:
        "results/benchmarks/{view}search_plugin/{run}/shard-{shard}-of-{shards}.tsv"
    wildcard_constraints:
        run=runs_pattern(RUNS_OF[Kind.PLUGIN]),
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=3000,
        runtime=60,
    params:
        code=code_version(W.SEARCHES[Kind.PLUGIN].command),
        plugin=lambda wildcards: PLUGIN_SOURCES[wildcards.run],
        retriever=retriever_spec,
        options=search_options,
        # not a rerun trigger: a limit, not a setting of the ranking
        timeout=untracked(config["search"]["plugin_timeout"]),
    shell:
        "vipune-eval search-plugin --rows {input.rows:q} --texts {input.texts:q}"
        " --embeddings {input.embeddings:q} --shard {wildcards.shard} --shards {wildcards.shards}"
        " {params.options} --retriever {params.retriever:q} --timeout {params.timeout:q}"
        " --out {output:q} 2> {log:q}"


rule preflight:
    input:
        binary=paths.FINGERPRINT,
        hf_home=paths.VIPUNE_HF_HOME,
        model=paths.MODEL_FINGERPRINT,
    output:
        paths.PREFLIGHT,
    log:
        "results/logs/preflight/vipune-{binary}.log",
    benchmark:
        "results/benchmarks/preflight/vipune-{binary}.tsv"
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=15,
    params:
        binary=binary_path,
        model_dir=untracked(WS.model_dir),
        file=config["model"]["file"],
        pooling=config["model"]["pooling"],
        timeout=config["vipune"]["timeout"],
        # not a rerun trigger: record and enforce run the same checks (see plan.builds.refuse_recorded_failures)
        mode=untracked(config["vipune"]["preflight"]),
        tmp=lambda wildcards: paths.job_tmp(
            "preflight", paths.vipune_run(wildcards.binary)
        ),
        code=code_version("preflight"),
    shell:
        "vipune-eval preflight --binary={params.binary:q} --fingerprint {input.binary:q}"
        " --hf-home {input.hf_home:q} --model-dir {params.model_dir:q} --file {params.file:q}"
        " --pooling {params.pooling:q} --timeout {params.timeout:q} --mode {params.mode:q}"
        " --tmp {params.tmp:q} --out {output:q} 2> {log:q}"


rule search_vipune:
    input:
        preflight=paths.PREFLIGHT,
        rows=paths.fill(paths.FILTER, name="rows.parquet"),
        texts=paths.fill(paths.FILTER, name="texts.parquet"),
        embeddings=get_embeddings,
        binary=paths.FINGERPRINT,
        hf_home=paths.VIPUNE_HF_HOME,
    output:
        run=paths.fill(paths.SEARCH_SHARD, run=paths.vipune_run("{binary}")),
        semantic=paths.fill(
            paths.SEARCH_SHARD, run=paths.vipune_run("{binary}", semantic=True)
        ),
        status=paths.fill(paths.STATUS_SHARD, run=paths.vipune_run("{binary}")),
    log:
        "results/logs/{view}search_vipune/vipune-{binary}/shard-{shard}-of-{shards}.log",
    benchmark:
        "results/benchmarks/{view}search_vipune/vipune-{binary}/shard-{shard}-of-{shards}.tsv"
    conda:
        ENV
    threads: config["search"]["threads"]
    resources:
        mem_mb=3000,
        runtime=120,
    params:
        code=code_version(W.SEARCHES[Kind.VIPUNE].command),
        binary=binary_path,
        options=search_options,
        timeout=config["vipune"]["timeout"],
        on_error=config["vipune"]["on_error"],
        cache=lambda wildcards: paths.fill(paths.VIPUNE_CACHE, **wildcards),
        tmp=lambda wildcards: paths.job_tmp(
            f"{wildcards.view}search",
            paths.vipune_run(wildcards.binary),
            f"shard-{wildcards.shard}-of-{wildcards.shards}",
        ),
    shell:
        "vipune-eval search-vipune --rows {input.rows:q} --texts {input.texts:q}"
        " --embeddings {input.embeddings:q} --shard {wildcards.shard} --shards {wildcards.shards}"
        " --binary={params.binary:q} --fingerprint {input.binary:q} --hf-home {input.hf_home:q}"
        " {params.options} --threads {threads} --timeout {params.timeout:q}"
        " --on-error {params.on_error:q} --cache {params.cache:q} --tmp {params.tmp:q}"
        " --out {output.run:q} --semantic-out {output.semantic:q} --status-out {output.status:q} 2> {log:q}"


# vipune's own search code on the cached vectors (the vipune-lane beside vipune.binary): one lane
# process per shard, no model; a new lane (vipune's source or lane/ changed) reruns these only.
rule search_vipune_lib:
    input:
        rows=paths.fill(paths.FILTER, name="rows.parquet"),
        texts=paths.fill(paths.FILTER, name="texts.parquet"),
        embeddings=get_embeddings,
        lane=paths.LANE_FINGERPRINT,
    output:
        run=paths.fill(paths.SEARCH_SHARD, run=paths.lib_run("{lane}")),
        semantic=paths.fill(
            paths.SEARCH_SHARD, run=paths.lib_run("{lane}", semantic=True)
        ),
        status=paths.fill(paths.STATUS_SHARD, run=paths.lib_run("{lane}")),
    log:
        "results/logs/{view}search_vipune_lib/vipune-lib-{lane}/shard-{shard}-of-{shards}.log",
    benchmark:
        "results/benchmarks/{view}search_vipune_lib/vipune-lib-{lane}/shard-{shard}-of-{shards}.tsv"
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        code=code_version(W.SEARCHES[Kind.LIB].command),
        lane=untracked(WS.builds.lane_path),
        options=search_options,
        # not rerun triggers: a limit and what to do on a refusal, not settings of the ranking
        timeout=untracked(config["vipune"]["timeout"]),
        on_error=untracked(config["vipune"]["on_error"]),
        tmp=lambda wildcards: paths.job_tmp(
            f"{wildcards.view}search",
            paths.lib_run(wildcards.lane),
            f"shard-{wildcards.shard}-of-{wildcards.shards}",
        ),
    shell:
        "vipune-eval search-vipune-lib --rows {input.rows:q} --texts {input.texts:q}"
        " --embeddings {input.embeddings:q} --shard {wildcards.shard} --shards {wildcards.shards}"
        " --lane {params.lane:q} --fingerprint {input.lane:q} {params.options} --timeout {params.timeout:q}"
        " --on-error {params.on_error:q} --tmp {params.tmp:q}"
        " --out {output.run:q} --semantic-out {output.semantic:q} --status-out {output.status:q} 2> {log:q}"
