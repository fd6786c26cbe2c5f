rule score:
    input:
        qrels=paths.fill(paths.FILTER, name="qrels.txt"),
        pairs=paths.fill(paths.FILTER, name="pairs.parquet"),
        runs=get_run_shards,
        status=get_status_shards,
    output:
        run=paths.RUN,
        metrics=paths.METRICS,
    log:
        paths.log("score", "{run}"),
    benchmark:
        paths.benchmark("score", "{run}")
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=1000,
        runtime=15,
    params:
        code=code_version("score"),
        options=score_options,
    shell:
        "vipune-eval score --qrels {input.qrels:q} --pairs {input.pairs:q} --runs {input.runs:q}"
        " {params.options} --name {wildcards.run:q} --run-out {output.run:q}"
        " --metrics-out {output.metrics:q} --status {input.status:q} 2> {log:q}"
