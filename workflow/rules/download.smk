# Fetching the dataset and the model (login nodes have internet, compute nodes often not).


localrules:
    download_dataset,
    download_model,
    vipune_home,
    vipune_missing,


if not config["dataset"]["path"]:

    rule download_dataset:
        output:
            fingerprint=DATASET_FP,
        params:
            repo_id=config["dataset"]["repo_id"],
            filename=config["dataset"]["filename"],
            revision=config["dataset"]["revision"],
            sha256=lambda wildcards: (
                f"--sha256 {config['dataset']['sha256']}" if config["dataset"]["sha256"] else ""
            ),
        log:
            "results/logs/download_dataset.log",
        conda:
            ENV
        shell:
            "vipune-eval download-dataset --repo-id {params.repo_id} --filename {params.filename}"
            " --revision {params.revision} {params.sha256} --dest results/data/download"
            " --fingerprint-out {output.fingerprint} 2> {log}"


if not config["model"]["path"]:

    rule download_model:
        output:
            fingerprint=MODEL_FP,
        params:
            repo_id=config["model"]["repo_id"],
            revision=config["model"]["revision"],
            file=config["model"]["file"],
            pooling=config["model"]["pooling"],
        log:
            "results/logs/download_model.log",
        conda:
            ENV
        shell:
            "vipune-eval download-model --repo-id {params.repo_id} --revision {params.revision}"
            " --file {params.file} --pooling {params.pooling} --dest {MODEL_DIR}"
            " --fingerprint-out {output.fingerprint} 2> {log}"


rule vipune_home:
    input:
        model=MODEL_FP,
    output:
        directory("results/model/vipune-home"),
    params:
        repo_id=config["model"]["repo_id"],
        revision=config["model"]["revision"],
        file=config["model"]["file"],
    log:
        "results/logs/vipune_home.log",
    conda:
        ENV
    shell:
        "vipune-eval vipune-home --model-dir {MODEL_DIR} --file {params.file}"
        " --repo-id {params.repo_id} --revision {params.revision} --out {output} 2> {log}"


rule vipune_missing:
    output:
        "results/fingerprints/vipune-missing.json",
    log:
        "results/logs/vipune_missing.log",
    conda:
        ENV
    shell:
        "vipune-eval check-binary --binary {config[vipune][binary]} 2> {log} || (cat {log} >&2; exit 1)"
