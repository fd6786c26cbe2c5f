rule report:
    input:
        unpack(get_report_inputs),
    output:
        json=report(
            "results/report.json", caption="../report/report.rst", category="Report"
        ),
        md=report(
            "results/report.md", caption="../report/report_md.rst", category="Report"
        ),
    log:
        "results/logs/report.log",
    benchmark:
        "results/benchmarks/report.tsv"
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=15,
    params:
        names=" ".join(config["retrievers"]),
        ks=" ".join(map(str, config["ks"])),
        options=report_options,
        code=code_version("report", "diagnostics", "stats", "score", "io"),
    shell:
        "vipune-eval report --summary {input.summary} --qrels {input.qrels} --pairs {input.pairs}"
        " --embeddings {input.embeddings} --names {params.names}"
        " --metrics {input.metrics} --dataset-fp {input.dataset_fp} --model-fp {input.model_fp}"
        " {params.options} --ks {params.ks}"
        " --out-json {output.json} --out-md {output.md} 2> {log}"


rule plots:
    input:
        "results/report.json",
    output:
        recall=report(
            "results/plots/recall_at_k.png",
            caption="../report/recall_at_k.rst",
            category="Plots",
        ),
        categories=report(
            "results/plots/recall_per_category.png",
            caption="../report/recall_per_category.rst",
            category="Plots",
        ),
        ranks=report(
            "results/plots/gold_ranks.png",
            caption="../report/gold_ranks.rst",
            category="Plots",
        ),
    log:
        "results/logs/plots.log",
    benchmark:
        "results/benchmarks/plots.tsv"
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        ks=" ".join(map(str, config["ks"])),
        limit=config["search_limit"],
        code=code_version("plots", "io"),
    shell:
        "vipune-eval plots --report {input} --ks {params.ks} --limit {params.limit}"
        " --recall {output.recall} --categories {output.categories} --ranks {output.ranks} 2> {log}"
