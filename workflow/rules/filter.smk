rule filter:
    input:
        dataset=DATASET_FP,
    output:
        pairs="results/filter/pairs.parquet",
        texts="results/filter/texts.parquet",
        qrels="results/filter/qrels.txt",
        summary="results/filter/summary.json",
        official=get_official_filter_outputs(),
    log:
        "results/logs/filter.log",
    benchmark:
        "results/benchmarks/filter.tsv"
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=60,
    params:
        code=code_version("filter", "io"),
        dataset=untracked(DATASET_FILE),
        expected=expected_args,
        official=official_filter_args,
    shell:
        "vipune-eval filter --dataset {params.dataset} --pairs {output.pairs} --texts {output.texts}"
        " --qrels {output.qrels} --summary {output.summary} {params.expected} {params.official}"
        " 2> {log}"
