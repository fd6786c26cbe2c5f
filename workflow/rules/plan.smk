# The files the plan writes: the fingerprints of a local dataset and model, of every vipune build
# and vipune-lane, and the report's manifest (vipune_eval.plan.planned_file). Parsing computes their
# text and writes nothing; the text's sha256 is a tracked param, so a changed text reruns its file
# and what reads it, in a dry run too. The job moves the text the run staged at its start into place.


rule planned_file:
    input:
        planned_unseen,
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
