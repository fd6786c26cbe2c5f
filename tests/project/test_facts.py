"""One source for every fact typed in more than one place (issue 42 item 3).

Each fact has one owner in the package; a copy elsewhere is either generated from it
(vipune-eval generated-docs: docs/registry.md, and the marked spans of other pages) or held
to it here: the schema's defaults, enums and bounds, config/config.yaml, docs/configuration.md's
table of keys, the hashes the docs type, the constants the fakes and the Rust lane keep of
vipune's contract. A copy the package cannot import without rerunning more than it should (the
chunker's and the embedder's token limit) is held here too.
"""

import re
import shutil
import subprocess

import pytest
import yaml

from support.config import DEFAULTS, SCHEMA
from support.scenarios import REPO
from vipune_eval.registry import datasets, granularities, models, retrievers
from vipune_eval.vipune import contract
from vipune_eval.vipune.release import RELEASE

DOCS = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]


def schema_node(key: str) -> dict:
    """The schema's entry of a dotted config key (``search.row_limit``)."""
    node = SCHEMA
    for part in key.split("."):
        node = node["properties"][part]
    return node


# ---------------------------------------------------------------- the schema and the config


def test_the_schemas_copies_are_their_owners():
    """The schema is the one source of defaults, but a default or a bound that is a fact of the
    package (a preset, vipune's pin, vipune's limit) is the package's: each is checked here."""
    from vipune_eval.cli import parser
    from vipune_eval.stages.embed.provider import AUTO_BUDGET

    assert schema_node("dataset.preset")["default"] == datasets.DEFAULT
    listed = schema_node("dataset.preset")["description"].split(": ", 1)[1]
    assert listed == ", ".join(datasets.PRESETS), "the presets the schema lists are registry/datasets.py's"
    assert (schema_node("model.repo_id")["default"], schema_node("model.revision")["default"]) == (
        contract.EMBED_MODEL_ID,
        contract.EMBED_MODEL_REVISION,
    ), "the model is the one vipune embeds with"
    assert (contract.EMBED_MODEL_ID, contract.EMBED_MODEL_REVISION) in models.PINS
    for key in ("ks", "search_limit", "search.row_limit"):
        node = schema_node(key)
        assert node.get("items", node)["maximum"] == contract.MAX_SEARCH_LIMIT, key
    assert f"MAX_SEARCH_LIMIT ({contract.MAX_SEARCH_LIMIT})" in schema_node("search_limit")["description"]
    assert schema_node("retrievers")["default"] == list(retrievers.DEFAULT)
    assert schema_node("granularities")["default"] == [granularities.PRIMARY]
    assert f"at most {contract.MAX_TOKENS} tokens" in schema_node("granularities")["description"]
    assert f"(CPU {AUTO_BUDGET['cpu']}, CUDA {AUTO_BUDGET['cuda']})" in schema_node("embed.batch_tokens")["description"]
    # the CLI's choices of a config value the rules pass through are the schema's enum
    choices = {
        a.dest: a.choices
        for sub in parser()._subparsers._group_actions[0].choices.values()
        for a in sub._actions
        if a.choices
    }
    assert choices["protocol"] == schema_node("protocol")["enum"]
    assert choices["on_error"] == schema_node("vipune.on_error")["enum"]
    assert choices["mode"] == schema_node("vipune.preflight")["enum"]


def _set_keys(config: dict, prefix: str = ""):
    for key, value in config.items():
        node = schema_node(prefix + key)
        if isinstance(value, dict) and "properties" in node:
            yield from _set_keys(value, f"{prefix}{key}.")
        else:
            yield prefix + key, value


def test_the_repository_config_is_the_schemas_defaults():
    """config/config.yaml shows the defaults (the full LongMemEval_M run); the schema holds them."""
    differ = {
        key: (value, schema_node(key).get("default"))
        for key, value in _set_keys(DEFAULTS)
        if value != schema_node(key).get("default")
    }
    assert not differ, f"config/config.yaml against the schema's defaults: {differ}"


def _configuration_rows() -> list[tuple[str, str, str]]:
    """docs/configuration.md's table of every key: (key, default, meaning)."""
    text = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    section = text[text.index("## Every key") :]
    section = section[: section.index("\n## ", 1)]
    return re.findall(r"^\| `([\w.]+)` \| (.*?) \| (.*) \|$", section, re.M)


def _schema_keys(properties: dict, prefix: str = "") -> set[str]:
    """The config's keys as docs/configuration.md's table lists them (whatif and
    dataset.expected as one row each)."""
    keys = set()
    for name, node in properties.items():
        if "properties" in node and name not in ("whatif", "expected"):
            keys |= _schema_keys(node["properties"], f"{prefix}{name}.")
        else:
            keys.add(prefix + name)
    return keys


def test_the_configuration_page_lists_every_key_with_the_schemas_default_and_bound():
    rows = _configuration_rows()
    assert {key for key, _, _ in rows} == _schema_keys(SCHEMA["properties"])
    wrong = []
    for key, default, meaning in rows:
        node = schema_node(key)
        if literal := re.fullmatch(r"`([^`]*)`", default):
            shown = literal.group(1)
            if "…" in shown:  # an abbreviated value: its start and its end
                head, tail = shown.split("…")
                same = str(node["default"]).startswith(head) and str(node["default"]).endswith(tail)
            else:
                same = yaml.safe_load(shown) == node["default"]
            if not same:
                wrong.append(f"{key}: the page says {shown}, the schema {node['default']!r}")
        bound = node.get("items", node).get("maximum")
        for said in re.findall(r"at most (\d+)\b", meaning):
            if bound is not None and int(said) != bound:
                wrong.append(f"{key}: the page says at most {said}, the schema {bound}")
    assert not wrong, wrong


def test_the_what_if_labs_fallbacks_are_the_schemas_defaults():
    """plan/whatif_grid.py falls back to a default where a block (a test's, a benchmark's) leaves a
    key out; a run's block has the schema's defaults set by the config check."""
    from vipune_eval.plan import whatif_grid
    from vipune_eval.registry import measures

    lab = whatif_grid.resolve(
        {"base": "hybrid", "grid": {"k": [10]}}, retrievers.resolve(["hybrid"]), measures.keys([1, 5, 10])
    )
    assert (lab.measure, lab.select_on) == (
        schema_node("whatif.measure")["default"],
        schema_node("whatif.select_on")["default"],
    )


def test_the_configuration_pages_pinned_releases_are_the_registrys():
    """The table of pins in docs/configuration.md (with who recorded each) against the presets."""
    text = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    table = text[text.index("## The pinned releases") :]
    rows = {m[0]: m[1:] for m in re.findall(r"^\| `([\w-]+)` \| .*? \| `([^`]+)` \| (.*?) \| ([\d,]*) \|", table, re.M)}
    assert set(rows) == set(datasets.PRESETS)
    preset_row = next(meaning for key, _, meaning in _configuration_rows() if key == "dataset.preset")
    assert set(re.findall(r"`([\w.-]+)`", preset_row)) >= set(datasets.PRESETS) | {
        p.filename for p in datasets.PRESETS.values()
    }
    for name, (filename, sha, size) in rows.items():
        preset = datasets.PRESETS[name]
        assert filename == preset.filename, name
        assert size.replace(",", "") == str(preset.size or ""), name
        for shown in re.findall(r"`([0-9a-f]+(?:…[0-9a-f]+)?)`", sha):
            head, _, tail = shown.partition("…")
            assert preset.sha256.startswith(head) and preset.sha256.endswith(tail), name


# ---------------------------------------------------------------- hashes, releases, the contract's numbers


def _pins() -> set[str]:
    """Every hash an owner holds: the presets' commits and files, vipune's model pin, the model's files."""
    found = {contract.EMBED_MODEL_REVISION}
    for preset in datasets.PRESETS.values():
        found |= {preset.revision, preset.sha256}
    for (_, revision), files in models.PINS.items():
        found |= {revision, *files.values()}
    return found


def test_every_hash_the_docs_and_the_config_type_is_a_pin_an_owner_holds():
    """A commit or a sha256 (12 or more hex digits, abbreviated `head…tail` or cut short) in the
    docs, the schema or config.yaml abbreviates a pin of registry/datasets.py, registry/models.py
    or vipune/contract.py: a pin moved in its owner and not in a page fails here. A build id's
    hash (`0.20.2-3333d98ccaa8`) is a fingerprint, not a pin."""
    pins = _pins()
    pages = [*DOCS, REPO / "workflow" / "schemas" / "config.schema.yaml", REPO / "config" / "config.yaml"]
    stale = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for m in re.finditer(r"(?<![\w-])([0-9a-f]{12,})(?:…([0-9a-f]+))?(?![\w])", text):
            head, tail = m.group(1), m.group(2) or ""
            if not re.search(r"[a-f]", head):
                continue  # a number (bytes), not a hash
            if not any(p.startswith(head) and p.endswith(tail) for p in pins):
                stale.append(f"{page.relative_to(REPO)}: {m.group(0)}")
    assert not stale, stale


def test_the_pinned_vipune_release_is_one_number_everywhere(tmp_path):
    """vipune_eval/vipune/release.py is the pin; the CI build script reads it (a copy of the
    script beside another pin builds that one), the config docs, the README and the contract name
    it, and the report's provenance carries it (test_real_vipune checks a report of a real build)."""
    script = tmp_path / ".ci" / "vipune" / "build.sh"
    script.parent.mkdir(parents=True)
    shutil.copy(REPO / ".ci" / "vipune" / "build.sh", script)
    (tmp_path / "vipune_eval" / "vipune").mkdir(parents=True)
    shutil.copy(REPO / "vipune_eval" / "vipune" / "lane_source.py", tmp_path / "vipune_eval" / "vipune")
    shutil.copytree(REPO / "lane", tmp_path / "lane")  # build.sh names the vipune-lane after its sources
    for pin in (RELEASE, "0.20.9"):
        (tmp_path / "vipune_eval" / "vipune" / "release.py").write_text(f'RELEASE = "{pin}"\n')
        proc = subprocess.run(
            ["bash", str(script), "--cached"],
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "VIPUNE_EVAL_CACHE": str(tmp_path)},
        )
        assert proc.returncode == 3 and f"vipune {pin} is not built" in proc.stderr
    assert f"vipune **{RELEASE}**" in (REPO / "docs" / "configuration.md").read_text()
    assert f"**vipune {RELEASE}**" in (REPO / "docs" / "vipune-contract.md").read_text()
    assert f"`{RELEASE}`" in (REPO / "README.md").read_text() or f"vipune {RELEASE}" in (REPO / "README.md").read_text()


def test_the_family_defaults_are_named_after_the_pinned_release():
    """ "Defaults are vipune 0.20's search": the minor release the contract was checked against."""
    minor = ".".join(RELEASE.split(".")[:2])
    said = {
        m
        for page in (*DOCS, REPO / "vipune_eval" / "registry" / "retrievers.py")
        for m in re.findall(r"vipune (\d+\.\d+)'s search", page.read_text(encoding="utf-8"))
    }
    said |= set(re.findall(r"defaults = vipune (\d+\.\d+)\b", (REPO / "docs" / "configuration.md").read_text()))
    assert said == {minor}


def test_the_fakes_and_the_lane_keep_the_contracts_numbers():
    """tests/support/fake_vipune.py and fake_lane.py stand in for vipune and vipune-lane without the
    harness's code: each keeps its own copy of vipune's numbers, held here to vipune/contract.py
    (the real binary checks the contract itself: tests/project/test_fake_vipune.py, the preflight).
    vipune-lane keeps none: its fusion and pool are compiled from vipune's source (lane/build.rs)."""
    from support import fake_lane, fake_vipune

    assert (fake_vipune.MODEL_ID, fake_vipune.MODEL_REVISION) == (
        contract.EMBED_MODEL_ID,
        contract.EMBED_MODEL_REVISION,
    )
    assert fake_vipune.MAX_SEARCH_LIMIT == contract.MAX_SEARCH_LIMIT == fake_lane.MAX_CANDIDATE_POOL
    assert fake_vipune.RRF_K == contract.RRF_K and fake_vipune.MAX_EMBEDDING_TOKENS == contract.MAX_TOKENS
    assert fake_vipune.DEFAULT_VERSION == RELEASE
    for rust in (REPO / "lane" / "src").glob("*.rs"):
        assert not re.findall(r"^\s*(?:pub )?const \w+: \w+ = [\d_.]+;", rust.read_text(), re.M), rust


@pytest.mark.parametrize("copy", ["stages.filter.chunking:MAX_ROW_TOKENS", "stages.embed.embed:DEFAULT_MAX_TOKENS"])
def test_the_token_limit_copies_are_the_contracts(copy):
    """The chunker and the embedder keep vipune's token limit without importing the contract: an
    edit of vipune/contract.py would otherwise rerun the filter and the embedding."""
    import importlib

    module, name = copy.split(":")
    assert getattr(importlib.import_module(f"vipune_eval.{module}"), name) == contract.MAX_TOKENS


def test_the_numbers_prose_repeats_are_their_owners():
    """Pages, docstrings and comments say vipune's numbers and LongMemEval's cut-offs in words
    ("RRF k = 25", "clamp(10 x limit, 50, 10000)", "over 512 tokens", "cut-offs 1, 3, 5, ..."):
    each said number is its owner's."""
    from vipune_eval.registry.measures import OFFICIAL_KS
    from vipune_eval.stages.embed.provider import AUTO_BUDGET

    said = {  # what prose says → the owner's value
        r"RRF,? k = (\d+)|RRF \(k = (\d+)\)|fusion(?:'s| with) k = (\d+)": str(contract.RRF_K),
        r"clamp\(10 [x×] \w+, 50, (\d+)\)": str(contract.MAX_SEARCH_LIMIT),
        r"(?:over|at most|≤|exceeds) (\d+)[- ]tokens?": str(contract.MAX_TOKENS),
        r"cut-offs (\d+(?:, \d+)+)": ", ".join(map(str, OFFICIAL_KS)),
        r"(\d+) on the CPU and (\d+) on CUDA": f"{AUTO_BUDGET['cpu']} {AUTO_BUDGET['cuda']}",
        r"\b(\d{3}) ?/ ?(\d{2}) ?/ ?(\d{3})\b": " ".join(
            map(str, datasets.PAPER_COUNTS.values())
        ),  # instances/abstention/pairs
    }
    sources = [
        *DOCS,
        *sorted((REPO / "vipune_eval").rglob("*.py")),
        *sorted((REPO / "workflow").rglob("*.smk")),
        REPO / "workflow" / "schemas" / "config.schema.yaml",
        REPO / "config" / "config.yaml",
        REPO / "lane" / "src" / "main.rs",
    ]
    wrong = []
    for path in sources:
        text = path.read_text(encoding="utf-8")
        for pattern, owner in said.items():
            for match in re.finditer(pattern, text):
                value = " ".join(g for g in match.groups() if g)
                if value != owner:
                    wrong.append(f"{path.relative_to(REPO)}: {match.group(0)!r} (owner: {owner})")
    assert not wrong, wrong
