"""The shipped package installs without extras and every module of it imports (issue 11): no
test support hides in it, and what it imports arrives with it (onnx: embed drops the softmax
NaN guards with it, issue 23)."""

import json
import shutil
import subprocess
import sys
import venv

import pytest

from support.scenarios import REPO


@pytest.mark.slow  # a fresh venv and a pip install
def test_a_plain_install_imports_every_module(tmp_path):
    source = tmp_path / "src"
    shutil.copytree(
        REPO,
        source,
        ignore=shutil.ignore_patterns(".venv", ".git", "results", "benchmarks", "__pycache__", "*.egg-info", "tests"),
    )
    env_dir = tmp_path / "venv"
    venv.create(env_dir)
    python = env_dir / "bin" / "python"
    # This environment's pip installs into the new one (no pip of its own to set up there), and
    # without byte-compiling every installed file: what the check imports compiles as it loads.
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-compile", str(source)],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-2000:]
    package = REPO / "vipune_eval"
    modules = sorted(
        ".".join(p.relative_to(package).with_suffix("").parts).removesuffix(".__init__")
        for p in package.rglob("*.py")
        if p.name != "__init__.py" or p.parent != package
    )
    check = f"""
import importlib, importlib.metadata, importlib.util, json, pathlib, vipune_eval
where = pathlib.Path(vipune_eval.__file__).parent
for name in {modules!r}:
    importlib.import_module("vipune_eval." + name)
print(json.dumps({{"where": str(where), "shipped": sorted(".".join(p.relative_to(where).with_suffix("").parts).removesuffix(".__init__")
                             for p in where.rglob("*.py") if p.name != "__init__.py" or p.parent != where),
                  "onnx": importlib.util.find_spec("onnx") is not None,
                  "license": importlib.metadata.metadata("vipune-eval")["License-Expression"],
                  "license_files": [f.read_text()[:11] for f in importlib.metadata.files("vipune-eval")
                                    if f.name == "LICENSE"]}}))
"""
    proc = subprocess.run([str(python), "-c", check], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout)
    assert str(env_dir) in found["where"]  # the installed copy, not the work tree
    assert found["shipped"] == modules and found["onnx"]  # a runtime dependency since issue 23
    assert found["license"] == "MIT"  # an SPDX expression (PEP 639), not the deprecated table
    assert found["license_files"] == ["MIT License"]  # the LICENSE file ships in the wheel (license-files)
    assert not {"synthetic", "tinymodel"} & set(found["shipped"])
    cli = subprocess.run([str(env_dir / "bin" / "vipune-eval"), "--help"], capture_output=True, text=True)
    assert cli.returncode == 0 and "filter-rows" in cli.stdout
    assert sys.executable != str(python)
