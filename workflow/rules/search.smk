wildcard_constraints:
    shard=r"\d+",
    shards=r"\d+",
    binary=r"[^/]+",


rule search_reference:
    input:
        pairs="results/filter/pairs.parquet",
        texts="results/filter/texts.parquet",
        embeddings=get_embeddings(),
    output:
        expand(
            "results/search/{retriever}/shard-{{shard}}-of-{{shards}}.run",
            retriever=REFERENCE,
        ),
    log:
        "results/logs/search_reference/shard-{shard}-of-{shards}.log",
    benchmark:
        "results/benchmarks/search_reference/shard-{shard}-of-{shards}.tsv"
    conda:
        ENV
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


rule search_vipune:
    input:
        pairs="results/filter/pairs.parquet",
        texts="results/filter/texts.parquet",
        embeddings=get_embeddings(),
        binary=get_vipune_fingerprint,
        hf_home="results/model/vipune-home",
    output:
        "results/search/vipune-{binary}/shard-{shard}-of-{shards}.run",
    log:
        "results/logs/search_vipune/vipune-{binary}/shard-{shard}-of-{shards}.log",
    benchmark:
        "results/benchmarks/search_vipune/vipune-{binary}/shard-{shard}-of-{shards}.tsv"
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
    shell:
        "vipune-eval search-vipune --pairs {input.pairs} --texts {input.texts}"
        " --embeddings {input.embeddings} --shard {wildcards.shard} --shards {wildcards.shards}"
        " --binary '{params.binary}' --fingerprint {input.binary} --hf-home {input.hf_home}"
        " --limit {params.limit} --threads {threads} --timeout {params.timeout} --out {output} 2> {log}"
