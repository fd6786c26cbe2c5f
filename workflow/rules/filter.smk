# {view} is "" for the seed protocol at session granularity (the primary results), else the
# view's folder: turn/, chunk/, official/, official-turn/ (registry.views.View.folder).


rule filter_pairs:
    input:
        dataset=paths.DATASET_FINGERPRINT,
    output:
        pairs=paths.fill(paths.FILTER, name="pairs.parquet"),
        qrels=paths.fill(paths.FILTER, name="qrels.txt"),
        summary=paths.fill(paths.FILTER, name="summary.json"),
    log:
        paths.log("filter_pairs"),
    benchmark:
        paths.benchmark("filter_pairs")
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=60,
    params:
        code=code_version("filter-pairs"),
        dataset=untracked(WS.dataset_file),
        protocol=lambda wildcards: view_of(wildcards).protocol,
        granularity=lambda wildcards: view_of(wildcards).granularity,
        expected=expected_option,
        seed=config["split"]["seed"],
        dev_fraction=config["split"]["dev_fraction"],
    shell:
        "vipune-eval filter-pairs --dataset {params.dataset:q} --protocol {params.protocol:q}"
        " --granularity {params.granularity:q} --pairs-out {output.pairs:q} --qrels-out {output.qrels:q}"
        " --summary-out {output.summary:q} {params.expected} --split-seed {params.seed:q}"
        " --dev-fraction {params.dev_fraction:q} 2> {log:q}"


rule filter_rows:
    input:
        unpack(get_filter_rows_inputs),
    output:
        rows=paths.fill(paths.FILTER, name="rows.parquet"),
        texts=paths.fill(paths.FILTER, name="texts.parquet"),
    log:
        paths.log("filter_rows"),
    benchmark:
        paths.benchmark("filter_rows")
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=120,
    params:
        code=code_version("filter-rows"),
        dataset=untracked(WS.dataset_file),
        protocol=lambda wildcards: view_of(wildcards).protocol,
        granularity=lambda wildcards: view_of(wildcards).granularity,
        tokenizer=tokenizer_option,
    shell:
        "vipune-eval filter-rows --dataset {params.dataset:q} --protocol {params.protocol:q}"
        " --granularity {params.granularity:q} --rows-out {output.rows:q} --texts-out {output.texts:q}"
        " {params.tokenizer} 2> {log:q}"
