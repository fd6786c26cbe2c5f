# The files the plan writes: the fingerprints of a local dataset and model, of every vipune build
# and vipune-lane, and the report's manifest (vipune_eval.plan.planned_file). Parsing computes their
# text and writes nothing. Each depends on an empty mark named by its text's sha256, which is also a
# tracked param: a new text is a missing mark, so its file and what reads it rerun, in a dry run too,
# whatever the rerun triggers and even where Snakemake keeps no record of the file (a results
# folder copied without .snakemake/); a file made before marks were, holding its text, reruns
# nothing. The job moves the text the run staged at its start into place.


rule planned_file:
    input:
        planned_mark,
    output:
        paths.PLANNED,
    log:
        paths.log("planned_file", "{planned}", per_view=False),
    wildcard_constraints:
        planned=planned_pattern(),
    localrule: True
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=200,
        runtime=5,
    params:
        sha256=planned_sha256,
    shell:
        "vipune-eval planned-file --sha256 {params.sha256} --out {output:q} 2> {log:q}"


# The mark is empty: the rule touches it (no command of the package to call).
rule planned_text:
    output:
        paths.PLAN_MARK,
    log:
        paths.log("planned_text", "{sha256}", per_view=False),
    wildcard_constraints:
        sha256="[0-9a-f]{64}",
    localrule: True
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=100,
        runtime=1,
    shell:
        "touch {output:q} 2> {log:q}"
