rule report:
    input:
        get_report_inputs,
    output:
        json=paths.REPORT_JSON,
        md=paths.REPORT_MD,
        summary=paths.SUMMARY,
    log:
        paths.log("report", per_view=False),
    benchmark:
        paths.benchmark("report", per_view=False)
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
        "vipune-eval report --manifest {params.manifest:q} --out-json {output.json:q}"
        " --out-md {output.md:q} --out-summary {output.summary:q} 2> {log:q}"


# Only the plots that have something to show in this run (plan.workspace.Workspace.plots): no placeholder.
rule plots:
    input:
        paths.REPORT_JSON,
    output:
        **{
            p: report(
                paths.fill(paths.PLOT, plot=p),
                caption=f"../report/{p}.rst",
                category="Plots",
            )
            for p in PLOTS
        },
    log:
        paths.log("plots", per_view=False),
    benchmark:
        paths.benchmark("plots", per_view=False)
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        code=code_version("plots"),
        plots=" ".join(PLOTS),
        out_dir=lambda wildcards, output: os.path.dirname(output[0]),  # paths.PLOT's folder
    shell:
        "vipune-eval plots --report {input:q} --out-dir {params.out_dir:q} --plots {params.plots} 2> {log:q}"


# The report as HTML with each plot beside its numbers, and the HTML report's first page
# (workflow/report/workflow.rst includes it): the HTML report opens on the numbers.
rule report_page:
    input:
        report=paths.REPORT_JSON,
        plots=[paths.fill(paths.PLOT, plot=p) for p in PLOTS],
    output:
        page=report(
            paths.REPORT_PAGE, caption="../report/report_page.rst", category="Report"
        ),
        front=paths.REPORT_FRONT,
    log:
        paths.log("report_page", per_view=False),
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        code=code_version("report-page"),
    shell:
        "vipune-eval report-page --report {input.report:q} --plots {input.plots:q}"
        " --out-page {output.page:q} --out-front {output.front:q} 2> {log:q}"
