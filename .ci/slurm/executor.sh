#!/usr/bin/env bash
# .ci/slurm/executor.sh FOLDER: the SLURM executor plugin (pyproject.toml's `slurm` extra) for the
# cluster tests, installed into FOLDER instead of the test venv, and FOLDER printed.
#
# Why a folder of its own: the plugin needs pandas, and Snakemake imports pandas at every start
# wherever it can find it (the plugin's efficiency report; its own persistence, to hash params):
# 0.27 s of CPU for each of the ~230 Snakemake starts of the suite, which need no cluster. The
# tests that do (tests/workflow/test_slurm.py,
# test_cluster_check.py) put VIPUNE_EVAL_SLURM_EXECUTOR=FOLDER first on their runs' PYTHONPATH,
# which sbatch passes on to the jobs. FOLDER gets, with --no-deps, exactly the packages that
# installing the extra into the active venv would add (pip's own resolution, --dry-run --report).
set -euo pipefail
folder=$1
pyproject="$(dirname "$0")/../../pyproject.toml"
report=$(mktemp)
trap 'rm -f "$report"' EXIT
mapfile -t extra < <(python -c "import sys, tomllib; print(*tomllib.load(open(sys.argv[1], 'rb'))['project']['optional-dependencies']['slurm'], sep='\n')" "$pyproject")
pip install -q --dry-run --report "$report" "${extra[@]}"
mapfile -t pins < <(python -c "import json, sys; print(*(f\"{p['metadata']['name']}=={p['metadata']['version']}\" for p in json.load(open(sys.argv[1]))['install']), sep='\n')" "$report")
[ "${#pins[@]}" -gt 0 ] || { echo "executor.sh: the slurm extra is installed in this venv already: Snakemake imports it at every start" >&2; exit 1; }
rm -rf "$folder"
pip install -q --no-deps --target "$folder" "${pins[@]}"
PYTHONPATH=$folder python -c "import snakemake_executor_plugin_slurm, snakemake_executor_plugin_slurm_jobstep" ||
    { echo "executor.sh: the plugin in $folder does not import (${pins[*]})" >&2; exit 1; }
echo "$folder"
