"""Plugin retrievers (issue 21): a user's function called per persona with a frozen Haystack,
its answer checked, unimportable plugins refused before any job runs (an edit of the plugin file
through the workflow: tests/workflow/test_plugin_reruns.py)."""

import dataclasses
import re
import textwrap

import numpy as np
import pytest

import vipune_eval
from support.plugins import PLUGIN
from support.scenarios import REPO
from vipune_eval.core.persona import Persona
from vipune_eval.errors import EvalError
from vipune_eval.registry import retrievers as registry
from vipune_eval.stages.search import plugin as plugins


def make_persona():
    rng = np.random.default_rng(0)
    return Persona(
        question_id="q7",
        question="where is my cat",
        row_ids=[f"q7::s{i}" for i in range(5)],
        session_ids=[f"s{i}" for i in range(5)],
        created_at=[f"2023-01-0{i + 1}T00:00:00Z" for i in range(5)],
        texts=[f"user: text {i}" for i in range(5)],
        vectors=rng.normal(size=(5, 4)).astype(np.float32),
        query_vector=rng.normal(size=4).astype(np.float32),
    )


@pytest.fixture
def plugin_dir(tmp_path, monkeypatch):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "plug.py").write_text(PLUGIN)
    monkeypatch.chdir(tmp_path)
    plugins.load.cache_clear()
    yield tmp_path
    plugins.load.cache_clear()


def test_a_file_plugin_is_called_with_a_frozen_haystack(plugin_dir):
    spec = registry.spec({"name": "newest", "use": "mine/plug.py:newest_first"})
    assert spec.kind is registry.Kind.PLUGIN and spec.reference
    persona = make_persona()
    ranking = plugins.search(plugins.load(spec.use), persona, 3, spec.use)
    assert [r for r, _ in ranking] == ["q7::s4", "q7::s3", "q7::s2"]
    haystack = vipune_eval.Haystack.of(persona)
    assert isinstance(haystack, plugins.Haystack)
    with pytest.raises(dataclasses.FrozenInstanceError):
        haystack.question = "x"
    with pytest.raises(ValueError):
        haystack.vectors[0, 0] = 1.0
    assert haystack.vectors.dtype == np.float32 and haystack.question_vector.shape == (4,)
    assert haystack.row_sessions == tuple(persona.session_ids)


def test_scored_pairs_keep_their_order(plugin_dir):
    ranking = plugins.search(plugins.load("mine/plug.py:scored"), make_persona(), 5, "mine/plug.py:scored")
    sims = make_persona().vectors @ make_persona().query_vector
    assert [r for r, _ in ranking] == [f"q7::s{i}" for i in np.argsort(-sims, kind="stable")]


def test_a_module_plugin(plugin_dir, monkeypatch):
    (plugin_dir / "mypkg").mkdir()
    (plugin_dir / "mypkg" / "__init__.py").write_text("")
    (plugin_dir / "mypkg" / "rank.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(plugin_dir))
    spec = registry.spec({"name": "m", "use": "mypkg.rank:newest_first"})
    assert plugins.source_file(spec.use).resolve() == (plugin_dir / "mypkg" / "rank.py").resolve()
    assert len(plugins.search(plugins.load(spec.use), make_persona(), 2, spec.use)) == 2


@pytest.mark.parametrize(
    "use,words",
    [
        ("missing.py:f", ["missing.py:f", "not found"]),
        ("mine/plug.py:nothing", ["mine/plug.py:nothing", "no function 'nothing'"]),
        ("mine/broken.py:f", ["mine/broken.py:f", "cannot be imported", "SyntaxError"]),
        ("mine/imports.py:f", ["mine/imports.py:f", "ModuleNotFoundError", "no_such_module_xyz"]),
        ("no_such_package_xyz.mod:f", ["no_such_package_xyz.mod:f", "cannot be"]),
        ("mine/plug.py:", ["write 'path/to/file.py:function'"]),
        # no importer takes a .txt file (a NoneType AttributeError before; found by mypy, issue 53)
        ("mine/rank.txt:f", ["mine/rank.txt:f", "cannot be imported as a Python module", "ending in .py"]),
    ],
)
def test_an_unimportable_plugin_is_refused_naming_it(plugin_dir, use, words):
    (plugin_dir / "mine" / "broken.py").write_text("def f(:\n")
    (plugin_dir / "mine" / "rank.txt").write_text("def f(persona, k):\n    return []\n")
    (plugin_dir / "mine" / "imports.py").write_text("import no_such_module_xyz\n")
    with pytest.raises(EvalError) as info:
        plugins.load(registry.resolve([{"name": "p", "use": use}])[0].use)  # as the config check does
    for word in words:
        assert word in str(info.value)


def answer_error(plugin_dir, answer, k=3):
    fn = plugins.load("mine/plug.py:answer")
    import sys

    module = next(
        m for n, m in sys.modules.items() if n.startswith("vipune_eval_plugin_") and getattr(m, "answer", None) is fn
    )
    module.ANSWER = answer
    with pytest.raises(EvalError) as info:
        plugins.search(fn, make_persona(), k, "mine/plug.py:answer")
    message = str(info.value)
    assert "mine/plug.py:answer" in message and "question q7" in message
    return message


@pytest.mark.parametrize(
    "answer,words",
    [
        (lambda h, k: ["q7::nope"], ["not a row id", "q7::nope"]),
        (lambda h, k: ["q7::s1", "q7::s1"], ["repeats a row id", "q7::s1"]),
        (lambda h, k: list(h.row_ids), ["more than k = 3"]),
        (lambda h, k: {"q7::s1": 1}, ["must return a list"]),
        (lambda h, k: [1, 2], ["neither a row id nor", "1"]),
        (lambda h, k: [("q7::s1", "high")], ["neither a row id nor", "high"]),
        (lambda h, k: 1 / 0, ["raised ZeroDivisionError"]),
    ],
)
def test_a_bad_answer_is_a_named_error(plugin_dir, answer, words):
    message = answer_error(plugin_dir, answer)
    for word in words:
        assert word in message


def test_a_plugin_that_unfreezes_the_haystack_cannot_slip_an_unknown_id_past_the_check(plugin_dir):
    """Issue 32 item 5: object.__setattr__ got round the frozen Haystack, the check read the
    plugin's row_ids and the job died later with a KeyError."""

    def forge(h, k):
        object.__setattr__(h, "row_ids", h.row_ids + ("q7::forged",))
        object.__setattr__(h, "question_id", "q-other")
        return ["q7::forged"]

    message = answer_error(plugin_dir, forge)
    assert "item 1 is not a row id of this haystack: 'q7::forged'" in message


def test_a_plugin_calling_sys_exit_is_a_named_error(plugin_dir):
    """Issue 32 item 6: SystemExit(0) ended the job "successfully" without its output, and
    Snakemake blamed filesystem latency."""
    import sys

    message = answer_error(plugin_dir, lambda h, k: sys.exit(0))
    assert "plugin 'mine/plug.py:answer' called sys.exit(0)" in message
    assert "called sys.exit(3)" in answer_error(plugin_dir, lambda h, k: sys.exit(3))
    (plugin_dir / "mine" / "exits.py").write_text("import sys\nsys.exit(0)\n")
    with pytest.raises(EvalError, match=r"plugin 'mine/exits.py:f' called sys.exit\(0\) while it was imported"):
        plugins.load(registry.resolve([{"name": "p", "use": "mine/exits.py:f"}])[0].use)


EXITS = textwrap.dedent("""\
    import multiprocessing
    import os
    from os import _exit

    def now(haystack, k):
        os._exit(0)

    def later(haystack, k):
        _exit(5)  # the name taken while the module was imported

    def forks(haystack, k):
        child = multiprocessing.get_context("fork").Process(target=print)
        child.start()
        child.join()
        return [haystack.row_ids[child.exitcode]]  # the child ends with os._exit(0)
    """)

IN_A_PROCESS = textwrap.dedent("""\
    import sys
    import numpy as np
    from vipune_eval.core.persona import Persona
    from vipune_eval.errors import EvalError
    from vipune_eval.registry import retrievers
    from vipune_eval.stages.search import plugin

    use = sys.argv[1]
    try:
        retrievers.resolve([{"name": "p", "use": use}])
        persona = Persona("q7", "where is my cat", ["q7::s0", "q7::s1"], ["s0", "s1"],
                          ["2023-01-01T00:00:00Z"] * 2, ["user: a", "user: b"],
                          np.eye(2, dtype=np.float32), np.ones(2, dtype=np.float32))
        print("ranking", plugin.search(plugin.load(use), persona, 1, use))
    except EvalError as exc:
        print(exc.message)
        sys.exit(3)
    """)


@pytest.mark.parametrize(
    "use, printed",
    [
        ("mine/exits.py:now", "plugin 'mine/exits.py:now' called os._exit(0) on question q7"),
        ("mine/exits.py:later", "plugin 'mine/exits.py:later' called os._exit(5) on question q7"),
        ("mine/exits_on_import.py:f", "plugin 'mine/exits_on_import.py:f' called os._exit(0) while it was imported"),
        ("mine/exits.py:forks", "ranking [('q7::s0', 1.0)]"),  # a child process the plugin forks exits as it asks
    ],
)
def test_a_plugin_calling_os_exit_is_a_named_error(plugin_dir, use, printed):
    """Issue 39 item 4: os._exit(0) ended the job at once with status 0; Snakemake took it for
    done, then blamed filesystem latency for the missing output. Run in a process of its own,
    as a search job (or Snakemake's parse-time check) runs it."""
    import subprocess
    import sys

    (plugin_dir / "mine" / "exits.py").write_text(EXITS)
    (plugin_dir / "mine" / "exits_on_import.py").write_text("import os\nos._exit(0)\n")
    proc = subprocess.run(
        [sys.executable, "-c", IN_A_PROCESS, use], capture_output=True, text=True, cwd=plugin_dir, timeout=60
    )
    assert printed in proc.stdout, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.returncode == (0 if printed.startswith("ranking") else 3)


def test_the_haystacks_arrays_cannot_be_made_writeable(plugin_dir):
    """Issue 39 item 5: a read-only flag on a copy can be set back (setflags(write=True)); the
    Haystack's arrays are views of immutable bytes, so numpy refuses."""
    persona = make_persona()
    before = persona.vectors.copy()
    haystack = plugins.Haystack.of(persona)
    for array in (haystack.vectors, haystack.question_vector, haystack.vectors.base):
        with pytest.raises(ValueError, match="cannot set WRITEABLE flag"):
            array.setflags(write=True)

    def overwrite(h, k):
        h.vectors.setflags(write=True)
        h.vectors[:] = 0
        return [h.row_ids[0]]

    assert "raised ValueError: cannot set WRITEABLE flag to True of this array" in answer_error(plugin_dir, overwrite)
    assert np.array_equal(persona.vectors, before)


def test_a_helper_module_next_to_a_plugin_file_is_importable(plugin_dir):
    """Issue 32 item 6: docs/extending.md speaks of helper modules the plugin imports."""
    import sys

    (plugin_dir / "mine" / "plughelp_xyz.py").write_text("def first(h, k):\n    return list(h.row_ids[:k])\n")
    (plugin_dir / "mine" / "uses.py").write_text(
        "from plughelp_xyz import first\n\n\ndef rank(h, k):\n    import plughelp_xyz\n"
        "    return plughelp_xyz.first(h, k)\n"
    )
    before = list(sys.path)
    try:
        spec = registry.resolve([{"name": "p", "use": "mine/uses.py:rank"}])[0]
        plugins.load(spec.use)  # the config check imports it
        sys.modules.pop("plughelp_xyz")  # the call imports it again, as a fresh search job would
        ranking = plugins.search(plugins.load(spec.use), make_persona(), 2, spec.use)
        assert [r for r, _ in ranking] == ["q7::s0", "q7::s1"]
        assert sys.path == before  # the plugin's folder only while the plugin runs
    finally:
        sys.modules.pop("plughelp_xyz", None)


def test_a_plugin_past_its_time_limit_is_a_named_error(plugin_dir):
    import time

    fn = plugins.load("mine/plug.py:answer")
    sys_module = next(
        m
        for n, m in __import__("sys").modules.items()
        if n.startswith("vipune_eval_plugin_") and getattr(m, "answer", None) is fn
    )
    sys_module.ANSWER = lambda h, k: time.sleep(5)
    began = time.monotonic()
    with pytest.raises(EvalError) as info:
        plugins.search(fn, make_persona(), 3, "mine/plug.py:answer", timeout=0.3)
    assert time.monotonic() - began < 3
    assert (
        "plugin 'mine/plug.py:answer', question q7: no answer within 0.3 s (search.plugin_timeout)"
        in info.value.message
    ) and "search.plugin_timeout" in info.value.fix
    sys_module.ANSWER = lambda h, k: ["q7::s1"]  # in time: no timer is left behind
    assert plugins.search(fn, make_persona(), 3, "mine/plug.py:answer", timeout=0.3) == [("q7::s1", 1.0)]
    time.sleep(0.5)


def test_the_source_digest_follows_the_file_bytes(plugin_dir):
    before = plugins.source_digest("mine/plug.py:newest_first")
    (plugin_dir / "mine" / "plug.py").write_text(PLUGIN + "\n# edited\n")
    assert plugins.source_digest("mine/plug.py:newest_first") != before


def test_the_plugin_in_docs_extending_runs(tmp_path, monkeypatch):
    """docs/extending.md's complete plugin, as written there, ranks a persona and passes the checks."""

    doc = (REPO / "docs" / "extending.md").read_text()
    source = next(block for block in re.findall(r"```python\n(.*?)```", doc, re.S) if "def rank(" in block)
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "recent_dense.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    plugins.load.cache_clear()
    spec = registry.resolve([{"name": "recent-dense", "use": "plugins/recent_dense.py:rank"}])[0]
    persona = make_persona()
    ranking = plugins.search(plugins.load(spec.use), persona, 3, spec.use)
    assert len(ranking) == 3 and all(persona.knows(r) for r, _ in ranking)
    assert [s for _, s in ranking] == sorted((s for _, s in ranking), reverse=True)
