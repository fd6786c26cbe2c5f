rule embed:
    input:
        texts="results/filter/texts.parquet",
        model=MODEL_FP,
    output:
        "results/embed/shard-{shard}-of-{shards}.parquet",
    log:
        "results/logs/embed/shard-{shard}-of-{shards}.log",
    benchmark:
        "results/benchmarks/embed/shard-{shard}-of-{shards}.tsv"
    conda:
        ENV
    threads: config["embed"]["threads"]
    resources:
        mem_mb=4000,
        runtime=720,
    params:
        code=code_version("embed", "io"),
        model_dir=untracked(MODEL_DIR),
        file=config["model"]["file"],
        pooling=config["model"]["pooling"],
        batch_size=config["embed"]["batch_size"],
        cuda="--cuda" if config["embed"]["cuda"] else "",
    shell:
        "vipune-eval embed --texts {input.texts} --model-dir {params.model_dir} --file {params.file}"
        " --pooling {params.pooling} --shard {wildcards.shard} --shards {wildcards.shards}"
        " --threads {threads} --batch-size {params.batch_size} {params.cuda} --out {output} 2> {log}"
