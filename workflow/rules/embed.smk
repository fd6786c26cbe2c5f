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
        batch_size=config["embed"]["batch_size"],
        cuda="--cuda" if config["embed"]["cuda"] else "",
        reuse=other_embeddings,
    shell:
        "vipune-eval embed --texts {input.texts} --model-dir {params.model_dir} --file {params.file}"
        " --pooling {params.pooling} --shard {wildcards.shard} --shards {wildcards.shards}"
        " --threads {threads} --batch-size {params.batch_size} {params.cuda}"
        " --model-fingerprint {input.model} --out {output} --reuse {params.reuse} 2> {log}"
