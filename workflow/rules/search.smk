# {view} is "" for the seed protocol (the primary results) and "official/" for LongMemEval's own.
wildcard_constraints:
    shard=r"\d+",
    shards=r"\d+",
    binary=r"[^/]+",
    run=r"[^/]+",
    view=r"(official/)?",


rule search_reference:
    input:
        pairs="results/{view}filter/pairs.parquet",
        texts="results/filter/texts.parquet",
        embeddings=get_embeddings(),
    output:
        expand(
            "results/{{view}}search/{retriever}/shard-{{shard}}-of-{{shards}}.run",
            retriever=REFERENCE,
        ),
    log:
        "results/logs/{view}search_reference/shard-{shard}-of-{shards}.log",
    benchmark:
        "results/benchmarks/{view}search_reference/shard-{shard}-of-{shards}.tsv"
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=3000,
        runtime=60,
    params:
        code=code_version("reference", "persona", "io"),
        retrievers=" ".join(REFERENCE),
        limit=config["search_limit"],
    shell:
        "vipune-eval search-reference --pairs {input.pairs} --texts {input.texts}"
        " --embeddings {input.embeddings} --shard {wildcards.shard} --shards {wildcards.shards}"
        " --limit {params.limit} --retrievers {params.retrievers} --outputs {output} 2> {log}"


rule preflight:
    input:
        binary=get_vipune_fingerprint,
        hf_home="results/model/vipune-home",
        model=MODEL_FP,
    output:
        "results/preflight/vipune-{binary}.json",
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
        model_dir=untracked(MODEL_DIR),
        file=config["model"]["file"],
        pooling=config["model"]["pooling"],
        timeout=config["vipune"]["timeout"],
        code=code_version("preflight", "vipune", "embed", "persona", "sources", "io"),
    shell:
        "vipune-eval preflight --binary '{params.binary}' --fingerprint {input.binary}"
        " --hf-home {input.hf_home} --model-dir {params.model_dir} --file {params.file}"
        " --pooling {params.pooling} --timeout {params.timeout} --out {output} 2> {log}"


rule search_vipune:
    input:
        preflight="results/preflight/vipune-{binary}.json",
        pairs="results/{view}filter/pairs.parquet",
        texts="results/filter/texts.parquet",
        embeddings=get_embeddings(),
        binary=get_vipune_fingerprint,
        hf_home="results/model/vipune-home",
    output:
        run="results/{view}search/vipune-{binary}/shard-{shard}-of-{shards}.run",
        status="results/{view}search/vipune-{binary}/shard-{shard}-of-{shards}.status.json",
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
        code=code_version("vipune", "persona", "sources", "io"),
        binary=binary_path,
        limit=config["search_limit"],
        timeout=config["vipune"]["timeout"],
        on_error=config["vipune"]["on_error"],
    shell:
        "vipune-eval search-vipune --pairs {input.pairs} --texts {input.texts}"
        " --embeddings {input.embeddings} --shard {wildcards.shard} --shards {wildcards.shards}"
        " --binary '{params.binary}' --fingerprint {input.binary} --hf-home {input.hf_home}"
        " --limit {params.limit} --threads {threads} --timeout {params.timeout}"
        " --on-error {params.on_error} --cache results/{wildcards.view}search/vipune-{wildcards.binary}/cache"
        " --out {output.run} --status-out {output.status} 2> {log}"
