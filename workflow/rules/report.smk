rule report:
    input:
        unpack(get_report_inputs),
    output:
        json=report(
            "results/report.json", caption="../report/report.rst", category="Report"
        ),
        md="results/report.md",
    log:
        "results/logs/report.log",
    conda:
        ENV
    params:
        names=" ".join(config["retrievers"]),
        ks=" ".join(map(str, config["ks"])),
        options=report_options,
        code=code_version("report", "score", "io"),
    shell:
        "vipune-eval report --summary {input.summary} --qrels {input.qrels} --names {params.names}"
        " --metrics {input.metrics} --dataset-fp {input.dataset_fp} --model-fp {input.model_fp}"
        " {params.options} --ks {params.ks}"
        " --out-json {output.json} --out-md {output.md} 2> {log}"
