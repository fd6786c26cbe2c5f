# vipune-eval: how well does the vipune memory store retrieve? (LongMemEval, model-free recall@k)
import os
import sys

import yaml
from snakemake.utils import min_version

min_version("9.0")
# Import, and hash for the rules' code versions, the package that sits beside this Snakefile.
sys.path.insert(0, workflow.basedir)


configfile: os.path.join(workflow.basedir, "config", "config.yaml")


# The config's shapes and defaults. workspace.prepare (workflow/rules/common.smk) checks the config
# against it and what it cannot say, and names every problem in one message (Snakemake's own
# validate stops at the first and prints the whole config).
with open(
    os.path.join(workflow.basedir, "workflow", "schemas", "config.schema.yaml")
) as f:
    SCHEMA = yaml.safe_load(f)


include: "workflow/rules/common.smk"
include: "workflow/rules/download.smk"
include: "workflow/rules/filter.smk"
include: "workflow/rules/embed.smk"
include: "workflow/rules/search.smk"
include: "workflow/rules/score.smk"
include: "workflow/rules/report.smk"


# The HTML report's first page: the headline table and the provenance (results/html/front.html).
report: "workflow/report/workflow.rst"


# The search shards are targets too: a shard a killed or failed --forcerun deleted is made again
# (Snakemake does not remake a missing intermediate whose readers are up to date).
rule all:
    input:
        paths.REPORT_JSON,
        paths.REPORT_MD,
        paths.SUMMARY,
        paths.REPORT_PAGE,
        paths.REPORT_FRONT,
        [paths.fill(paths.PLOT, plot=p) for p in PLOTS],
        WS.search_files(),


# With the slurm executor: a job no node of its partition can hold stops the run before submission.
# A SIGTERM or Ctrl-C is noted, so that a stopped run is summarised as a stop (plan.failures).
onstart:
    cluster.check_workflow(workflow)
    failures.watch_stops()


onsuccess:
    print_report(paths.REPORT_JSON)


onerror:
    print_report(paths.REPORT_JSON, failed=True)
