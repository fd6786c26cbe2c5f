# vipune-eval: how well does the vipune memory store retrieve? (LongMemEval, model-free recall@k)
from snakemake.utils import min_version, validate

import vipune_eval.cluster

min_version("9.0")


configfile: workflow.source_path("config/config.yaml")


validate(config, "workflow/schemas/config.schema.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/download.smk"
include: "workflow/rules/filter.smk"
include: "workflow/rules/embed.smk"
include: "workflow/rules/search.smk"
include: "workflow/rules/score.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        "results/report.json",
        "results/report.md",
        "results/plots/recall_at_k.png",
        "results/plots/recall_per_category.png",
        "results/plots/gold_ranks.png",


# With the slurm executor: a job no node of its partition can hold stops the run before submission.
onstart:
    vipune_eval.cluster.check_workflow(workflow)


onsuccess:
    print_report("results/report.json")
