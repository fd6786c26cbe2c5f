rule filter:
    input:
        dataset=DATASET_FP,
    output:
        pairs="results/filter/pairs.parquet",
        texts="results/filter/texts.parquet",
        qrels="results/filter/qrels.txt",
        summary="results/filter/summary.json",
    params:
        expected=expected_args,
    log:
        "results/logs/filter.log",
    benchmark:
        "results/benchmarks/filter.tsv"
    resources:
        mem_mb=2000,
        runtime=60,
    conda:
        ENV
    shell:
        "vipune-eval filter --dataset {DATASET_FILE} --pairs {output.pairs} --texts {output.texts}"
        " --qrels {output.qrels} --summary {output.summary} {params.expected} 2> {log}"
