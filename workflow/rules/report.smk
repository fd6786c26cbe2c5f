rule report:
    input:
        get_report_inputs,
    output:
        json=report(
            paths.REPORT_JSON, caption="../report/report.rst", category="Report"
        ),
        md=report(paths.REPORT_MD, caption="../report/report_md.rst", category="Report"),
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
        paths.REPORT_JSON,
    output:
        recall=report(
            paths.fill(paths.PLOT, plot="recall_at_k"),
            caption="../report/recall_at_k.rst",
            category="Plots",
        ),
        categories=report(
            paths.fill(paths.PLOT, plot="recall_per_category"),
            caption="../report/recall_per_category.rst",
            category="Plots",
        ),
        ranks=report(
            paths.fill(paths.PLOT, plot="gold_ranks"),
            caption="../report/gold_ranks.rst",
            category="Plots",
        ),
        granularities=report(
            paths.fill(paths.PLOT, plot="granularities"),
            caption="../report/granularities.rst",
            category="Plots",
        ),
        latency=report(
            paths.fill(paths.PLOT, plot="latency"),
            caption="../report/latency.rst",
            category="Plots",
        ),
        whatif=report(
            paths.fill(paths.PLOT, plot="whatif"),
            caption="../report/whatif.rst",
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
        primary_k=measures.primary_k(config["ks"]),  # the captions' k (registry.measures owns it)
    shell:
        "vipune-eval plots --report {input} --out-dir results/plots 2> {log}"
