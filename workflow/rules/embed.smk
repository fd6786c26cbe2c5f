rule embed:
    input:
        texts="results/filter/texts.parquet",
        model=MODEL_FP,
    output:
        "results/embed/shard-{shard}-of-{shards}.parquet",
    params:
        file=config["model"]["file"],
        pooling=config["model"]["pooling"],
        batch_size=config["embed"]["batch_size"],
        cuda="--cuda" if config["embed"]["cuda"] else "",
    log:
        "results/logs/embed/shard-{shard}-of-{shards}.log",
    benchmark:
        "results/benchmarks/embed/shard-{shard}-of-{shards}.tsv"
    threads: config["embed"]["threads"]
    resources:
        mem_mb=4000,
        runtime=720,
    conda:
        ENV
    shell:
        "vipune-eval embed --texts {input.texts} --model-dir {MODEL_DIR} --file {params.file}"
        " --pooling {params.pooling} --shard {wildcards.shard} --shards {wildcards.shards}"
        " --threads {threads} --batch-size {params.batch_size} {params.cuda} --out {output} 2> {log}"
