"""The standard layout Snakemake's tooling looks for (issue 53): workflow/Snakefile, every profile
under workflow/profiles/, the Workflow Catalog's .snakemake-workflow-catalog.yml and configuration
page (config/README.md), and the .test scenario, whose shipped inputs are what the tests'
generators make (regenerate them: `PYTHONPATH=tests python tests/project/test_catalog.py`). The .test run itself:
tests/workflow/test_standard_layout.py."""

import re
from pathlib import Path

import yaml

from support.scenarios import REPO, SNAKEFILE
from support.synthetic import write_dataset
from support.tinymodel import build_tiny_model

DOT_TEST = REPO / ".test"
# The .test scenario's inputs: 6 instances (one an abstention), a 16-dimensional tiny model (80 KB).
DATASET = {"instances": 6, "abstention": 1, "sessions_per_haystack": 5, "filler_pool": 8, "seed": 2}
MODEL = {"dim": 16, "seed": 0}


def write_dot_test_inputs(folder: Path) -> list[Path]:
    """The .test scenario's dataset and model, written into ``folder``: the files written."""
    write_dataset(folder / "data.json", **DATASET)
    build_tiny_model(folder / "model", **MODEL)
    return [folder / "data.json", *sorted((folder / "model").iterdir())]


def test_the_shipped_dot_test_inputs_are_what_the_generators_make(tmp_path):
    made = write_dot_test_inputs(tmp_path)
    shipped = [DOT_TEST / "data.json", *sorted((DOT_TEST / "model").iterdir())]
    assert [p.relative_to(DOT_TEST) for p in shipped] == [p.relative_to(tmp_path) for p in made]
    changed = [str(s.relative_to(REPO)) for s, m in zip(shipped, made) if s.read_bytes() != m.read_bytes()]
    assert not changed, f"regenerate them: PYTHONPATH=tests python tests/project/test_catalog.py ({changed})"
    config = yaml.safe_load((DOT_TEST / "config" / "config.yaml").read_text())
    assert config["dataset"]["path"] == "data.json" and config["model"]["path"] == "model"
    assert not any(name.startswith("vipune") for name in config["retrievers"])  # no vipune needed


def test_the_workflow_and_every_profile_are_where_snakemake_looks():
    assert SNAKEFILE == REPO / "workflow" / "Snakefile" and not (REPO / "Snakefile").exists()
    assert not (REPO / "profiles").exists()
    assert {p.name for p in (REPO / "workflow" / "profiles").iterdir()} == {"default", "local", "slurm"}


def test_min_version_is_the_lowest_snakemake_pyproject_allows():
    pyproject = (REPO / "pyproject.toml").read_text()
    lowest = re.search(r'"snakemake\[reports\]>=([\d.]+)', pyproject).group(1)
    assert f'min_version("{lowest}")' in SNAKEFILE.read_text()


def test_the_catalog_file_says_how_to_run_it():
    usage = yaml.safe_load((REPO / ".snakemake-workflow-catalog.yml").read_text())["usage"]
    assert "pip install -e ." in usage["mandatory-flags"]["desc"]
    assert "snakemake --directory .test --cores 2" in usage["mandatory-flags"]["desc"]
    assert usage["report"] is True and set(usage["software-stack-deployment"]) == {
        "conda",
        "apptainer",
        "apptainer+conda",
    }


def _keys(schema: dict, prefix: str = "") -> list[str]:
    """Every key of the config: the schema's properties, nested ones dotted (not inside lists)."""
    keys = []
    for name, spec in schema.get("properties", {}).items():
        nested = [k for k in _keys(spec, f"{prefix}{name}.") if "expected." not in k]
        keys += nested or [f"{prefix}{name}"]
    return keys


def test_the_configuration_page_stands_on_its_own():
    """The catalog shows config/README.md on its own page: every key, and no link that is relative
    to this repository (it would break there)."""
    page = (REPO / "config" / "README.md").read_text()
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    missing = [key for key in _keys(schema) if f"| `{key}` |" not in page]
    assert not missing, f"config/README.md: every key in its table, missing {missing}"
    assert "dataset.expected" in page
    links = re.findall(r"\]\(([^)]+)\)", page)
    assert all(link.startswith("https://") for link in links), links


if __name__ == "__main__":
    for written in write_dot_test_inputs(DOT_TEST):
        print(written.relative_to(REPO))
