# Fetching the dataset and the model (login nodes have internet, compute nodes often not).


if not config["dataset"]["path"]:

    rule download_dataset:
        output:
            fingerprint=paths.DATASET_FINGERPRINT,
        log:
            paths.log("download_dataset", per_view=False),
        benchmark:
            paths.benchmark("download_dataset", per_view=False)
        localrule: True
        conda:
            ENV
        threads: 1
        resources:
            mem_mb=1000,
            runtime=120,
        params:
            code=code_version("download-dataset"),
            repo_id=config["dataset"]["repo_id"],
            filename=config["dataset"]["filename"],
            revision=config["dataset"]["revision"],
            dest=paths.DATA_DOWNLOAD,
            pins=lambda wildcards: " ".join(
                f"--{key} {shlex.quote(str(config['dataset'][key]))}"
                for key in ("sha256", "size")
                if config["dataset"][key]
            ),
            limits=untracked(hub_limits()),
        shell:
            "vipune-eval download-dataset --repo-id {params.repo_id:q} --filename {params.filename:q}"
            " --revision {params.revision:q} {params.pins} {params.limits} --dest {params.dest:q}"
            " --fingerprint-out {output.fingerprint:q} 2> {log:q}"


if not config["model"]["path"]:

    rule download_model:
        output:
            fingerprint=paths.MODEL_FINGERPRINT,
        log:
            paths.log("download_model", per_view=False),
        benchmark:
            paths.benchmark("download_model", per_view=False)
        localrule: True
        conda:
            ENV
        threads: 1
        resources:
            mem_mb=1000,
            runtime=30,
        params:
            code=code_version("download-model"),
            repo_id=config["model"]["repo_id"],
            revision=config["model"]["revision"],
            file=config["model"]["file"],
            pooling=config["model"]["pooling"],
            dest=paths.MODEL_DOWNLOAD,
            pins=" ".join(
                f"--sha256 {shlex.quote(f'{name}={sha}')}"
                for name, sha in model_pins(
                    config["model"]["repo_id"], config["model"]["revision"]
                ).items()
            ),
            limits=untracked(hub_limits()),
        shell:
            "vipune-eval download-model --repo-id {params.repo_id:q} --revision {params.revision:q}"
            " --file {params.file:q} --pooling {params.pooling:q} {params.pins} {params.limits}"
            " --dest {params.dest:q}"
            " --fingerprint-out {output.fingerprint:q} 2> {log:q}"


rule vipune_home:
    input:
        model=paths.MODEL_FINGERPRINT,
    output:
        directory(paths.VIPUNE_HF_HOME),
    log:
        paths.log("vipune_home", per_view=False),
    benchmark:
        paths.benchmark("vipune_home", per_view=False)
    localrule: True
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=500,
        runtime=10,
    params:
        code=code_version("vipune-home"),
        model_dir=untracked(WS.model_dir),
        repo_id=config["model"]["repo_id"],
        revision=config["model"]["revision"],
        file=config["model"]["file"],
    shell:
        "vipune-eval vipune-home --model-dir {params.model_dir:q} --file {params.file:q}"
        " --repo-id {params.repo_id:q} --revision {params.revision:q} --out {output:q} 2> {log:q}"


rule vipune_binary:
    output:
        paths.binary_fingerprint_file(MISSING),
        paths.lane_fingerprint_file(MISSING),
    log:
        paths.log("vipune_binary", per_view=False),
    benchmark:
        paths.benchmark("vipune_binary", per_view=False)
    localrule: True
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=200,
        runtime=5,
    params:
        binary=config["vipune"]["binary"],
    shell:
        "vipune-eval vipune-binary --binary={params.binary:q} 2> {log:q} || (cat {log:q} >&2; exit 1)"
