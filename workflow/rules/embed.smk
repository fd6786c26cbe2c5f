rule embed:
    input:
        texts=paths.fill(paths.FILTER, name="texts.parquet"),
        model=paths.MODEL_FINGERPRINT,
    output:
        paths.EMBED_SHARD,
    log:
        paths.log("embed", paths.SHARD),
    benchmark:
        paths.benchmark("embed", paths.SHARD)
    conda:
        ENV
    threads: config["embed"]["threads"]
    resources:
        mem_mb=4000,
        runtime=720,
    params:
        code=code_version("embed"),
        model_dir=untracked(WS.model_dir),
        file=config["model"]["file"],
        pooling=config["model"]["pooling"],
        batch_tokens=config["embed"]["batch_tokens"],
        cuda="--cuda" if config["embed"]["cuda"] else "",
        store=paths.VECTORS,
    shell:
        "vipune-eval embed --texts {input.texts:q} --model-dir {params.model_dir:q} --file {params.file:q}"
        " --pooling {params.pooling:q} --shard {wildcards.shard} --shards {wildcards.shards}"
        " --threads {threads} --batch-tokens {params.batch_tokens:q} {params.cuda}"
        " --model-fingerprint {input.model:q} --out {output:q} --store {params.store:q} 2> {log:q}"
