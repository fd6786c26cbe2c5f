wildcard_constraints:
    shard=r"\d+",
    shards=r"\d+",
    binary=rf"(?!lib-)[^/]+-[0-9a-f]{{12}}|{MISSING}",
    lane_build=rf"[^/]+-[0-9a-f]{{12}}|{MISSING}",
    run=r"[^/]+",
    view="(" + "|".join(f for f in VIEW_FOLDERS if f) + ")?",


# The shared arms (dense, bm25 AND, bm25 OR) of a shard's personas, computed once.
rule search_arms:
    input:
        **SHARD_INPUTS,
    output:
        paths.ARMS_SHARD,
    log:
        paths.log("search_arms", paths.SHARD),
    benchmark:
        paths.benchmark("search_arms", paths.SHARD)
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=3000,
        runtime=60,
    params:
        code=code_version("search-arms"),
        shard=shard_options,
        options=search_options,
    shell:
        "vipune-eval search-arms {params.shard} {params.options} --arms-out {output:q} 2> {log:q}"


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
        paths.log("fuse_reference", "{run}"),
    benchmark:
        paths.benchmark("fuse_reference", "{run}")
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
        **SHARD_INPUTS,
    output:
        paths.SEARCH_SHARD,
    log:
        paths.log("search_family", "{run}", paths.SHARD),
    benchmark:
        paths.benchmark("search_family", "{run}", paths.SHARD)
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
        shard=shard_options,
        options=search_options,
        rank_all=lambda wildcards: ("--rank-all" if view_of(wildcards).rank_all else ""),
    shell:
        "vipune-eval search-family {params.shard} {params.options} {params.rank_all}"
        " --retriever {params.retriever:q} --out {output:q} 2> {log:q}"


# A plugin retriever (a user's function) over one shard of personas.
rule search_plugin:
    input:
        **SHARD_INPUTS,
    output:
        paths.SEARCH_SHARD,
    log:
        paths.log("search_plugin", "{run}", paths.SHARD),
    benchmark:
        paths.benchmark("search_plugin", "{run}", paths.SHARD)
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
        shard=shard_options,
        options=search_options,
        # not a rerun trigger: a limit, not a setting of the ranking
        timeout=untracked(config["search"]["plugin_timeout"]),
    shell:
        "vipune-eval search-plugin {params.shard} {params.options} --retriever {params.retriever:q}"
        " --timeout {params.timeout:q} --out {output:q} 2> {log:q}"


rule preflight:
    input:
        binary=paths.BINARY_FINGERPRINT,
        wrapped=binary_wrapped_record,
        hf_home=paths.VIPUNE_HF_HOME,
        model=paths.MODEL_FINGERPRINT,
    output:
        paths.PREFLIGHT,
    log:
        paths.log("preflight", "vipune-{binary}", per_view=False),
    benchmark:
        paths.benchmark("preflight", "vipune-{binary}", per_view=False)
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
        **SHARD_INPUTS,
        preflight=paths.PREFLIGHT,
        binary=paths.BINARY_FINGERPRINT,
        wrapped=binary_wrapped_record,
        hf_home=paths.VIPUNE_HF_HOME,
    output:
        run=paths.fill(paths.SEARCH_SHARD, run=paths.vipune_run("{binary}")),
        semantic=paths.fill(
            paths.SEARCH_SHARD, run=paths.vipune_run("{binary}", semantic=True)
        ),
        status=paths.fill(paths.STATUS_SHARD, run=paths.vipune_run("{binary}")),
    log:
        paths.log("search_vipune", "vipune-{binary}", paths.SHARD),
    benchmark:
        paths.benchmark("search_vipune", "vipune-{binary}", paths.SHARD)
    conda:
        ENV
    threads: config["search"]["threads"]
    resources:
        mem_mb=3000,
        runtime=120,
    params:
        code=code_version(W.SEARCHES[Kind.VIPUNE].command),
        binary=binary_path,
        shard=shard_options,
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
        "vipune-eval search-vipune {params.shard} {params.options}"
        " --binary={params.binary:q} --fingerprint {input.binary:q} --hf-home {input.hf_home:q}"
        " --threads {threads} --timeout {params.timeout:q}"
        " --on-error {params.on_error:q} --cache {params.cache:q} --tmp {params.tmp:q}"
        " --out {output.run:q} --semantic-out {output.semantic:q} --status-out {output.status:q} 2> {log:q}"


# vipune's own search code on the cached vectors (the vipune-lane beside vipune.binary): one lane
# process per shard, no model; a new lane (vipune's source or lane/ changed) reruns these only.
rule search_vipune_lib:
    input:
        **SHARD_INPUTS,
        lane=paths.LANE_FINGERPRINT,
        binary=lane_binary_fingerprint,
    output:
        run=paths.fill(paths.SEARCH_SHARD, run=paths.lib_run("{lane_build}")),
        semantic=paths.fill(
            paths.SEARCH_SHARD, run=paths.lib_run("{lane_build}", semantic=True)
        ),
        status=paths.fill(paths.STATUS_SHARD, run=paths.lib_run("{lane_build}")),
        arms=paths.fill(paths.LANE_ARMS_SHARD, run=paths.lib_run("{lane_build}")),
    log:
        paths.log("search_vipune_lib", "vipune-lib-{lane_build}", paths.SHARD),
    benchmark:
        paths.benchmark("search_vipune_lib", "vipune-lib-{lane_build}", paths.SHARD)
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        code=code_version(W.SEARCHES[Kind.LIB].command),
        # the vipune-lane and the binary of this build (vipune.binary's, or a compared build's): untracked, as paths
        lane=lambda wildcards, input: WS.builds.lane_paths.get(wildcards.lane_build, ""),
        binary=lane_binary_path,
        shard=shard_options,
        options=search_options,
        # tracked as search_vipune's are: a longer timeout or another policy may score a pair recorded as failed
        timeout=config["vipune"]["timeout"],
        on_error=config["vipune"]["on_error"],
        tmp=lambda wildcards: paths.job_tmp(
            f"{wildcards.view}search",
            paths.lib_run(wildcards.lane_build),
            f"shard-{wildcards.shard}-of-{wildcards.shards}",
        ),
        # a cache of the personas' seeded databases, not a rerun trigger (reused only as seeded)
        kept_stores=untracked(paths.KEPT_STORES),
        kept_stores_gb=untracked(config["vipune"]["kept_stores_gb"]),
    shell:
        "vipune-eval search-vipune-lib {params.shard} {params.options}"
        " --binary={params.binary:q} --fingerprint {input.binary:q} --timeout {params.timeout:q} --tmp {params.tmp:q}"
        " --lane={params.lane:q} --lane-fingerprint {input.lane:q} --on-error {params.on_error:q}"
        " --out {output.run:q} --semantic-out {output.semantic:q} --status-out {output.status:q}"
        " --arms-out {output.arms:q} --kept-stores {params.kept_stores:q}"
        " --kept-stores-gb {params.kept_stores_gb} 2> {log:q}"
