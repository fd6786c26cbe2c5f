rule embed:
    input:
        texts=paths.fill(paths.FILTER, name="texts.parquet"),
        model=paths.MODEL_FINGERPRINT,
    output:
        paths.EMBED_SHARD,
    log:
        "results/logs/{view}embed/shard-{shard}-of-{shards}.log",
    benchmark:
        "results/benchmarks/{view}embed/shard-{shard}-of-{shards}.tsv"
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
        "vipune-eval embed --texts {input.texts} --model-dir {params.model_dir} --file {params.file}"
        " --pooling {params.pooling} --shard {wildcards.shard} --shards {wildcards.shards}"
        " --threads {threads} --batch-tokens {params.batch_tokens} {params.cuda}"
        " --model-fingerprint {input.model} --out {output} --store {params.store} 2> {log}"
