"""The binary lane's resume key follows every flag of its searches (issue 36); a job runs the
bytes it was planned for on every persona (issue 51)."""

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from support.fakes import fake_build
from support.search import write_shard
from support.synthetic import VOCABULARY
from vipune_eval.core.io import sha256_file
from vipune_eval.core.persona import Persona
from vipune_eval.core.trec import read_run
from vipune_eval.errors import EvalError
from vipune_eval.stages.search import vipune as vipune_stage
from vipune_eval.stages.search.vipune import persona_key, run_vipune, searches
from vipune_eval.vipune.binary import binary_fingerprint, wrapped_record
from vipune_eval.vipune.client import Vipune
from vipune_eval.vipune.import_format import import_lines
from vipune_eval.vipune.settings import VipuneSettings

SETTINGS = VipuneSettings("vipune", Path("fp.json"), Path("hf"), Path("tmp"), 30.0)


def persona():
    vectors = np.eye(3, dtype=np.float32)
    return Persona(
        "q1",
        "where is my violin?",
        [f"q1::s{i}" for i in range(3)],
        [f"s{i}" for i in range(3)],
        ["2023-01-01T00:00:00Z"] * 3,
        ["user: a", "user: b", "user: c"],
        vectors,
        vectors[0],
    )


def test_a_new_search_flag_reaches_both_the_command_line_and_the_resume_key(monkeypatch, tmp_path):
    """A configurable vipune flag is one line of VipuneSettings.search_flags: a shard resumed
    after it changed cannot reuse hits searched with the old value."""
    p = persona()
    lines = import_lines(p)
    before = persona_key(p, searches(SETTINGS, 10), lines)
    assert persona_key(p, searches(SETTINGS, 11), lines) != before
    shipped = VipuneSettings.search_flags
    monkeypatch.setattr(
        VipuneSettings, "search_flags", lambda self, limit, hybrid: [*shipped(self, limit, hybrid), "--new-flag", "1"]
    )
    assert persona_key(p, searches(SETTINGS, 10), lines) != before
    args = Vipune(Path("vipune"), tmp_path, 5).search_args(
        tmp_path / "db", "q1", p.question, searches(SETTINGS, 10)["hybrid"]
    )
    assert args[args.index("search") + 1 :] == [
        "--hybrid",
        "--recency",
        "0",
        "--limit",
        "10",
        "--no-touch",
        "--new-flag",
        "1",
        "--",
        p.question,
    ]


# ------------------------------------------------------- a rebuild while the job runs (issue 51 item 1)


def haystack(seed: int) -> Persona:
    rng = np.random.default_rng(seed)
    words = np.array(VOCABULARY[:30])
    vectors = rng.normal(size=(12, 384)).astype(np.float32)
    qid = f"q{seed}"
    return Persona(
        qid,
        " ".join(rng.choice(words, 2)),
        [f"{qid}::s{i}" for i in range(12)],
        [f"s{i}" for i in range(12)],
        ["2023-01-01T00:00:00Z"] * 12,
        ["user: " + " ".join(rng.choice(words, 5)) for _ in range(12)],
        vectors,
        vectors[0],
    )


def rebuild(path: Path, text: str) -> None:
    """Replace ``path``'s bytes as a build does: a new file renamed over the old."""
    part = path.with_name(path.name + ".part")
    part.write_text(text)
    part.chmod(0o755)
    os.replace(part, path)


@pytest.fixture
def shard_search(tmp_path, vipune_hf_home):
    """``search(binary, files=(), name=...)`` runs search-vipune over three personas with the
    binary as planned (fingerprinted, with ``files`` as vipune.fingerprint_files) and returns
    its two runs and the cache folder."""
    shard = write_shard(tmp_path / "view", [haystack(seed) for seed in range(3)])

    def search(binary: Path, files: tuple[Path, ...] = (), name: str = "run") -> tuple[dict, Path]:
        folder = tmp_path / name
        fingerprint = folder / "vipune-x.json"
        if not folder.exists():  # planned once: a rerun of the same name searches as planned then
            folder.mkdir()
            planned = binary_fingerprint(binary, 30, list(files))
            fingerprint.write_text(json.dumps(planned))
            if files:  # as plan.builds writes it
                wrapped_record(fingerprint).write_text(json.dumps({"files": {str(f): sha256_file(f) for f in files}}))
        runs = {n: folder / f"{n}.run" for n in ("hybrid", "semantic")}
        run_vipune(
            shard,
            VipuneSettings(str(binary), fingerprint, vipune_hf_home, folder / "tmp", 30),
            1,
            "stop",
            folder / "cache",
            runs["hybrid"],
            runs["semantic"],
            folder / "status.json",
        )
        return {n: read_run([p]) for n, p in runs.items()}, folder / "cache"

    return search


def test_a_binary_rebuilt_while_its_job_runs_changes_nothing_of_the_shard(tmp_path, shard_search, monkeypatch):
    """The job runs its private copy of the planned bytes: the personas after the rebuild are not
    searched with the new binary (issue 51: 7 of 15 calls ran the new bytes, filed under the old
    fingerprint), and the shard equals one searched without a rebuild."""
    binary, _ = fake_build(tmp_path / "build")
    planned_text = binary.read_text()
    other_build = fake_build(tmp_path / "other-build", preamble="export FAKE_VIPUNE_FAULT=bm25-or\n")[0].read_text()
    clean, _ = shard_search(binary, name="clean")
    rebuild(binary, other_build)
    other, _ = shard_search(binary, name="other")
    assert other["hybrid"] != clean["hybrid"]  # the rebuilt binary ranks otherwise: the test can fail
    rebuild(binary, planned_text)
    original_evaluate = vipune_stage.evaluate
    seen = []

    def evaluate(*args, **kwargs):
        result = original_evaluate(*args, **kwargs)
        seen.append(args[1].question_id)
        if len(seen) == 1:
            rebuild(binary, other_build)  # `build.sh --checkout` in another terminal
        return result

    monkeypatch.setattr(vipune_stage, "evaluate", evaluate)
    runs, _ = shard_search(binary, name="rebuilt")
    assert len(seen) == 3 and runs == clean


def test_a_file_a_wrapper_runs_rebuilt_mid_job_stops_it_and_keeps_nothing_it_searched(
    tmp_path, shard_search, monkeypatch
):
    """vipune.binary a wrapper script, what it runs in vipune.fingerprint_files: that file cannot
    be copied with the wrapper, so it is checked after each persona; changed, the job stops naming
    it, before the persona searched with it is kept; restored, a rerun completes the shard as a
    run without the change, from the personas kept."""
    inner, _ = fake_build(tmp_path / "build")
    planned_text = inner.read_text()
    other_build = fake_build(tmp_path / "other-build", preamble="export FAKE_VIPUNE_FAULT=bm25-or\n")[0].read_text()
    wrapper = tmp_path / "wrapper" / "vipune"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec /bin/sh "{inner}" "$@"\n')
    wrapper.chmod(0o755)
    clean, clean_cache = shard_search(wrapper, (inner,), name="clean")
    original_evaluate = vipune_stage.evaluate
    seen = []

    def evaluate(*args, **kwargs):
        result = original_evaluate(*args, **kwargs)
        seen.append(args[1].question_id)
        if len(seen) == 2:
            rebuild(inner, other_build)  # while the second persona was searched
        return result

    monkeypatch.setattr(vipune_stage, "evaluate", evaluate)
    with pytest.raises(
        EvalError,
        match=rf"{re.escape(str(inner))} \(in vipune.fingerprint_files: the wrapper "
        rf"script .* runs it\) changed while this job ran",
    ) as info:
        shard_search(wrapper, (inner,), name="rebuilt")
    assert "rerun snakemake" in info.value.fix
    folder = tmp_path / "rebuilt"
    assert not (folder / "hybrid.run").exists() and not (folder / "tmp").exists()
    kept = sorted((folder / "cache").glob("*.json"))
    assert len(kept) == 1  # the first persona only: the second was searched after the change
    assert (
        json.loads(kept[0].read_text())["hybrid"]["ranking"]
        == json.loads((clean_cache / kept[0].name).read_text())["hybrid"]["ranking"]
    )
    rebuild(inner, planned_text)
    monkeypatch.setattr(vipune_stage, "evaluate", original_evaluate)
    runs, _ = shard_search(wrapper, (inner,), name="rebuilt")  # the same job again, as planned
    assert runs == clean
