rule report:
    input:
        get_report_inputs,
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
        code=code_version("report"),
        manifest=paths.REPORT_MANIFEST,
    shell:
        "vipune-eval report --manifest {params.manifest} --out-json {output.json}"
        " --out-md {output.md} 2> {log}"


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
        granularities=report(
            "results/plots/granularities.png",
            caption="../report/granularities.rst",
            category="Plots",
        ),
        latency=report(
            "results/plots/latency.png",
            caption="../report/latency.rst",
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
        code=code_version("plots"),
    shell:
        "vipune-eval plots --report {input} --out-dir results/plots 2> {log}"
