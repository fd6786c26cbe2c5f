"""Shared pytest fixtures."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from support import real_vipune, scenarios
from support.fakes import fake_build
from support.tinymodel import build_tiny_model
from vipune_eval.vipune.contract import EMBED_MODEL_ID, EMBED_MODEL_REVISION
from vipune_eval.vipune.home import build_vipune_hf_home

# Tests never touch the network: hub look-ups fail at once instead of retrying for ~40 s.
os.environ["HF_HUB_OFFLINE"] = "1"

TESTS = Path(__file__).resolve().parent
WORKFLOW_TESTS = TESTS / "workflow"
# The files that take longest, long ones first (seconds of one worker, measured with --durations=0
# on 2 cores, 2026-12-07). pytest-xdist gives a file's tests to one worker (--dist loadfile) in
# collection order (--no-loadscope-reorder): started first, the long files leave the short ones to
# fill in at the end, instead of one long file started last (or a 20-s unit-test file collected
# last) setting the wall time alone. Files not named here follow: those holding a slow test, then
# the rest.
LONGEST_FIRST = (
    "workflow/test_slurm.py",  # 172: mostly waiting for SLURM's job states
    "workflow/test_reruns.py",  # 102
    "workflow/test_vipune_faults.py",  # 79
    "workflow/test_workflow.py",  # 74: the standard run every other file shares (finished_run)
    "project/test_build_script.py",  # 67
    "workflow/test_resilience.py",  # 66
    "workflow/test_compare_builds.py",  # 61
    "workflow/test_gate_real.py",  # 59
    "workflow/test_code_tracking.py",  # 56
    "project/test_kept_stores_builds.py",  # 45
    "workflow/test_edge_cases.py",  # 44
    "workflow/test_only_a_real_run_writes.py",  # 43
    "workflow/test_failure_policy.py",  # 41
    "workflow/test_real_vipune.py",  # 40
    "workflow/test_maintainers_loop.py",  # 32
    "workflow/test_stale_report.py",  # 31
    "workflow/test_large_persona.py",  # 27
    "project/test_plain_install.py",  # 26
    "workflow/test_whatif_lab.py",  # 25
    "workflow/test_cold_small_run.py",  # 23
    "unit/stages/test_download.py",  # 20
    "unit/vipune/test_vipune_lane.py",  # 17
    "unit/stages/search/test_preflight.py",  # 14
    "workflow/test_plugin_reruns.py",  # 14
    "project/test_fake_vipune.py",  # 13
    "unit/vipune/test_client.py",  # 12
)


def _cgroup_limit(name: str) -> float | None:
    """A cgroup v2 limit of this process (cpu.max as CPUs, memory.max in bytes); None when unset."""
    try:
        text = Path(f"/sys/fs/cgroup/{name}").read_text().split()
    except OSError:
        return None
    if not text or text[0] == "max":
        return None
    return int(text[0]) / int(text[1]) if name == "cpu.max" else int(text[0])


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/workflow/ runs Snakemake: slow by its folder, so the fast tier
    (`pytest -m "not slow"`) never runs one, marked or not. Then the files are ordered for
    pytest-xdist: LONGEST_FIRST, then the other files holding a slow test, then the rest (the
    order of the tests within a file is kept)."""
    for item in items:
        if WORKFLOW_TESTS in item.path.parents:
            item.add_marker(pytest.mark.slow)
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}

    def rank(item: pytest.Item) -> tuple[int, int]:
        name = item.path.relative_to(TESTS).as_posix() if TESTS in item.path.parents else ""
        if name in LONGEST_FIRST:
            return 0, LONGEST_FIRST.index(name)
        return (1 if item.path in slow_files else 2), 0

    items.sort(key=rank)  # stable: collection order within each rank


def pytest_xdist_auto_num_workers(config) -> int:
    """`-n auto` as the CPUs this run may really use, plus one: xdist asks psutil for the host's
    cores, which in a container on a large host is far more than its CPU quota (every worker then
    runs Snakemake workflows side by side on the same two cores). One worker per usable CPU, and
    one more for the time the workers wait (SLURM's job states, a run in the background, a
    timeout): on 2 CPUs the full tier took 665 s with two workers and 610 s with three, the CPUs
    then idle only in the last minute (one run each, one after the other on a quiet machine,
    2026-12-07). At most one worker per 3 GiB."""
    cpus = len(os.sched_getaffinity(0))
    quota = _cgroup_limit("cpu.max")
    if quota:
        cpus = min(cpus, max(1, int(quota)))
    memory = _cgroup_limit("memory.max") or os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(1, min(cpus + 1, int(memory // 3 * 2**-30)))


@pytest.fixture(scope="session", autouse=True)
def fake_query_vectors(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder for the query vectors every fake vipune of the session computes (keyed by model,
    pooling and text: tests/support/fake_vipune.py): a job runs a private copy of its binary, in its
    scratch folder, where the wrapper's default folder (beside its own path) would not outlive it."""
    folder = tmp_path_factory.mktemp("query-vectors")
    os.environ.setdefault("FAKE_VIPUNE_QUERY_CACHE", str(folder))
    return folder


@pytest.fixture(scope="session")
def fake_vipune_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``vipune`` executable (shell wrapper around tests/support/fake_vipune.py), with the fake
    vipune-lane beside it as build.sh lays a build out.

    Put ``fake_vipune_bin.parent`` first on PATH to stand it in for the real binary.
    """
    return fake_build(tmp_path_factory.mktemp("fake-vipune"))[0]


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.real_vipune)])
def any_vipune(request) -> Path:
    """The fake vipune, and the real one at the pinned release (skipped where it is not built):
    what the harness does to a binary must work on both."""
    return request.getfixturevalue("fake_vipune_bin" if request.param == "fake" else "real_vipune_bin")


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.real_vipune)])
def any_lane(request) -> tuple[Path, Path]:
    """(binary, its vipune-lane) of the fake build, and of the real one at the pinned release
    (skipped, saying why, where that release or its vipune-lane of this checkout's lane/ is not built)."""
    from vipune_eval.vipune.vipune_lane import LaneError, find_lane

    binary = request.getfixturevalue("fake_vipune_bin" if request.param == "fake" else "real_vipune_bin")
    try:
        return binary, find_lane(binary, real_vipune.RELEASE)
    except LaneError as exc:
        if real_vipune.required():
            pytest.fail(f"{real_vipune.REQUIRED}=required, but {exc.message}")
        pytest.skip(exc.message)


def _real_build(version: str) -> Path:
    binary, why = real_vipune.find(version)
    if binary is None:
        if real_vipune.required():
            pytest.fail(f"{real_vipune.REQUIRED}=required, but {why}")
        pytest.skip(why)
    return binary


@pytest.fixture(scope="session")
def real_vipune_bin() -> Path:
    """The real vipune at the release the contract pins (skipped where it is not built)."""
    return _real_build(real_vipune.RELEASE)


@pytest.fixture(scope="session")
def older_vipune_bin() -> Path:
    """An earlier real release, for comparing two builds (skipped where it is not built)."""
    return _real_build(real_vipune.OLDER)


@pytest.fixture(scope="session")
def vipune_tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny test model (default vocabulary, seed 0) the fake vipune embeds with."""
    return build_tiny_model(tmp_path_factory.mktemp("vipune-tiny-model"))


@pytest.fixture
def vipune_hf_home(tmp_path: Path, vipune_tiny_model_dir: Path) -> Path:
    """An ``HF_HOME`` holding the tiny model where vipune looks for bge-small-en-v1.5."""
    return build_vipune_hf_home(
        vipune_tiny_model_dir, "model.onnx", EMBED_MODEL_ID, EMBED_MODEL_REVISION, tmp_path / "hf_home"
    )


@pytest.fixture(scope="session")
def workflow_env(fake_vipune_bin: Path) -> dict[str, str]:
    """Environment of a workflow run: the fake vipune and this venv's scripts on PATH, offline."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(fake_vipune_bin.parent), str(Path(sys.executable).parent), env.get("PATH", "")])
    env["HF_HUB_OFFLINE"] = "1"
    return env


@contextmanager
def _exclusive(lock: Path):
    with open(lock, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="session")
def shared_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder every pytest-xdist worker of this test run shares (the base temp otherwise)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def scenario_inputs(shared_tmp: Path):
    """``get(name)`` → the (dataset, model) of scenario ``name``, generated once per test run."""

    def get(name: str) -> tuple[Path, Path]:
        folder = shared_tmp / f"inputs-{name}"
        with _exclusive(shared_tmp / f"inputs-{name}.lock"):
            if not (folder / "done").exists():
                shutil.rmtree(folder, ignore_errors=True)
                scenarios.write_inputs(name, folder)
                (folder / "done").touch()
        return folder / "data.json", folder / "model"

    return get


@pytest.fixture(scope="session")
def small(scenario_inputs) -> tuple[Path, Path]:
    """The (dataset, model) of the ``small`` scenario: six instances, for runs that vary one thing."""
    return scenario_inputs("small")


@pytest.fixture(scope="session")
def standard(scenario_inputs) -> tuple[Path, Path]:
    """The (dataset, model) of the ``standard`` scenario: the cold run others compare against."""
    return scenario_inputs("standard")


@pytest.fixture(scope="session")
def finished_run(shared_tmp: Path, scenario_inputs, workflow_env):
    """``get(name)`` → (workdir, the Snakemake process) of a completed run of scenario ``name``:
    run once per test run (xdist workers included) and shared by every test that reads it. A
    test that changes a run works on ``scenarios.clone`` of it."""

    def get(name: str) -> tuple[Path, subprocess.CompletedProcess]:
        root = shared_tmp / f"run-{name}"
        done = root / "done.json"
        with _exclusive(shared_tmp / f"run-{name}.lock"):
            if not done.exists():
                shutil.rmtree(root, ignore_errors=True)
                workdir = scenarios.make_workdir(root / "run", *scenario_inputs(name), scenario=name)
                proc = scenarios.snakemake(workdir, "--cores", "2", env=workflow_env)
                done.write_text(json.dumps({"args": proc.args, "stdout": proc.stdout, "stderr": proc.stderr}))
        saved = json.loads(done.read_text())
        return root / "run", subprocess.CompletedProcess(saved["args"], 0, saved["stdout"], saved["stderr"])

    return get


@pytest.fixture(scope="session")
def small_run(finished_run) -> Path:
    """The workdir of a finished run of ``small``: tests that vary one thing start from a clone."""
    return finished_run("small")[0]


@pytest.fixture(scope="session")
def standard_run(finished_run) -> Path:
    """The workdir of a finished run of ``standard``, the run the resilience tests compare against."""
    return finished_run("standard")[0]
