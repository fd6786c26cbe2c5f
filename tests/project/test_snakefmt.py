"""The Snakefile and the rule files are formatted as snakefmt formats them (run `snakefmt` on any
.smk file you edit); `snakemake --lint` runs in tests/workflow/test_workflow.py."""

import subprocess
import sys

from support.scenarios import REPO, SNAKEFILE


def test_snakefmt_is_clean():
    files = [str(SNAKEFILE), *map(str, sorted((REPO / "workflow/rules").glob("*.smk")))]
    proc = subprocess.run([sys.executable, "-m", "snakefmt", "--check", *files], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
