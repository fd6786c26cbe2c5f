"""Regenerate docs/img/recall_at_k.png and the sample report table of the README.

A real run of the workflow, offline, on what the tests use: a generated LongMemEval-format file
(tests/support/synthetic.py), the tiny ONNX model (tests/support/tinymodel.py), the fake vipune
(tests/support/fake_vipune.py) and its fake lane (tests/support/fake_lane.py). The numbers show the shape of a report, not vipune's quality.

    python docs/img/make_sample.py [WORKDIR]    # then read WORKDIR/results/report.md
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from support.fakes import fake_build  # noqa: E402
from support.synthetic import write_dataset  # noqa: E402
from support.tinymodel import build_tiny_model  # noqa: E402


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="vipune-eval-sample-"))
    data = root / "inputs" / "longmemeval_sample.json"
    summary = write_dataset(data, instances=60, abstention=4, sessions_per_haystack=30, filler_pool=150, seed=7)
    model = build_tiny_model(root / "inputs" / "model", onnx_name="onnx/model.onnx")
    bin_dir = fake_build(root)[0].parent  # the fake vipune and its fake lane, as build.sh lays them out
    workdir = root / "run"
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "dataset": {"path": str(data), "expected": None},
                "model": {"path": str(model), "file": "onnx/model.onnx"},
                "embed": {"shards": 1, "threads": 1},
                "search": {"shards": 2, "threads": 1},
            }
        )
    )
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "PATH": os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), os.environ["PATH"]]),
    }
    subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(REPO / "workflow" / "Snakefile"),
            "--directory",
            str(workdir),
            "--configfile",
            str(workdir / "config.yaml"),
            "--cores",
            "2",
        ],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    shutil.copyfile(workdir / "results" / "plots" / "recall_at_k.png", REPO / "docs" / "img" / "recall_at_k.png")
    print(f"{summary}\n{workdir / 'results' / 'report.md'}")


if __name__ == "__main__":
    main()
