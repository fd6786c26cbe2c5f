"""Bad configuration values a user meets are refused before any job, each saying what to do;
a build named twice is dropped with a note (issue 24)."""

import copy
import hashlib
import math
import re
import tomllib

import jsonschema
import pytest
import yaml

from support.config import DEFAULTS, SCHEMA
from support.scenarios import REPO
from vipune_eval.errors import EvalError
from vipune_eval.plan import config_check, workspace
from vipune_eval.vipune.client import Vipune
from vipune_eval.vipune.vipune_lane import find_lane, lane_fingerprint


def check(config):
    """What ``prepare`` checks before it resolves the dataset and the model, raised."""
    config_check.check(config, SCHEMA).problems.raise_any()


def config(**changes):
    out = copy.deepcopy(DEFAULTS)
    for key, value in changes.items():
        section, _, name = key.partition("__")
        if name:
            out[section][name] = value
        else:
            out[section] = value
    return out


def test_the_repository_defaults_pass():
    jsonschema.validate(DEFAULTS, SCHEMA)
    check(config())


def test_granularities_without_session_say_that_session_is_required():
    bad = config(granularities=["turn"])
    jsonschema.validate(bad, SCHEMA)  # the shape is fine: the message comes from config_check
    with pytest.raises(EvalError, match=r"granularities \['turn'\] has no session: session is required") as info:
        check(bad)
    assert "['session', 'turn']" in str(info.value) and info.value.fix


def test_a_nan_dev_fraction_is_refused_with_the_other_bad_values():
    bad = config(split__dev_fraction=math.nan, search_limit=3)
    jsonschema.validate(bad, SCHEMA)  # NaN passes minimum/maximum
    with pytest.raises(EvalError) as info:
        check(bad)
    message = str(info.value)
    assert "split.dev_fraction must be a number from 0 to 1, got nan" in message
    assert "search_limit (3) must be at least the largest k (10)" in message


@pytest.mark.parametrize(
    "fraction, select_on, empty", [(1, "test", "test"), (1.0, "dev", "test"), (0, "dev", "dev"), (0.0, "test", "dev")]
)
def test_a_whatif_lab_on_a_split_the_dev_fraction_leaves_empty_is_refused(fraction, select_on, empty):
    """Issue 32 item 2: the lab selects on one split and confirms on the other: both need pairs."""
    bad = config(split__dev_fraction=fraction, whatif={"base": "hybrid", "grid": {"k": [10]}, "select_on": select_on})
    with pytest.raises(EvalError) as info:
        check(bad)
    assert (
        f"split.dev_fraction {fraction} leaves the {empty} split empty" in info.value.message
        and "whatif" in info.value.message
    )
    check(config(split__dev_fraction=fraction))  # without the lab: allowed


@pytest.mark.parametrize("fraction", [-0.1, 1.5, math.inf])
def test_an_out_of_range_dev_fraction_is_refused(fraction):
    with pytest.raises(EvalError, match="split.dev_fraction"):
        check(config(split__dev_fraction=fraction))


@pytest.mark.parametrize("timeout", [math.nan, math.inf])
@pytest.mark.parametrize("section, key", [("vipune", "timeout"), ("search", "plugin_timeout")])
def test_a_non_finite_timeout_is_refused(section, key, timeout):
    """Issue 32 items 6 and 8: the schema's exclusiveMinimum lets NaN (and infinity) through."""
    bad = config(**{section: {**DEFAULTS.get(section, {}), key: timeout}})
    with pytest.raises(EvalError) as info:
        check(bad)
    assert f"{section}.{key} must be a finite number of seconds > 0, got {timeout!r}" in info.value.message


def test_the_plugin_timeout_defaults_to_300_seconds():
    given = copy.deepcopy(DEFAULTS)
    del given["search"]["plugin_timeout"]
    check(given)
    assert given["search"]["plugin_timeout"] == 300


def test_a_misspelt_key_is_named_with_its_nearest_valid_name_and_the_defaults_are_set():
    bad = copy.deepcopy(DEFAULTS)
    bad["granularity"] = ["session", "turn"]
    bad["search"] = {"shard": 2}
    del bad["ks"]
    problems, unknown = config_check.schema_problems(bad, SCHEMA)
    assert problems == []
    assert unknown == [("granularity", "granularities"), ("search.shard", "search.shards")]
    assert bad["ks"] == [1, 5, 10] and bad["search"]["row_limit"] == 1000  # the schema's defaults


def test_every_problem_of_the_config_is_in_one_message_the_renames_last():
    bad = config(search_limit=3, split__dev_fraction=math.nan, embed={"shards": 0})
    bad["granularites"] = ["session"]
    bad["zzz"] = 1
    with pytest.raises(EvalError) as info:
        check(bad)
    message, fix = info.value.message, info.value.fix
    assert message.startswith("bad configuration, 5 problems:")
    for part in (
        "embed.shards: 0 is less than the minimum of 1",
        "search_limit (3) must be at least the largest k",
        "split.dev_fraction must be a number from 0 to 1, got nan",
        "granularites: not a config key; did you mean granularities?",
        "zzz: not a config key",
    ):
        assert part in message
    assert message.splitlines()[-1] == "  - zzz: not a config key"
    assert fix.startswith("remove zzz") and fix.endswith("rename granularites → granularities")


def test_a_wrong_dataset_path_and_model_path_are_named_in_one_message(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = config(
        dataset={**DEFAULTS["dataset"], "path": str(tmp_path / "nothere.json")},
        model={**DEFAULTS["model"], "path": str(tmp_path / "nomodel")},
        search_limit=3,
    )
    with pytest.raises(EvalError) as info:
        workspace.prepare(cfg, SCHEMA)
    message = info.value.message
    assert f"dataset.path {tmp_path / 'nothere.json'} does not exist" in message
    assert f"model file {tmp_path / 'nomodel' / 'onnx' / 'model.onnx'} not found" in message
    assert "search_limit (3) must be at least the largest k (10)" in message


def test_the_license_is_an_spdx_expression_built_by_a_setuptools_that_reads_it():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert project["project"]["license"] == "MIT"
    requires = project["build-system"]["requires"]
    assert "setuptools>=77" in requires  # PEP 639 license expressions: setuptools 77 and later


def test_a_broken_plugin_is_a_problem_of_the_config(tmp_path, monkeypatch):
    """prepare's config check imports every plugin (the registry only parses the entry), so the
    plugin loader is in the code the hash of each search job sees, and a broken one stops the run
    before any job with the other problems."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.py").write_text("def f(:\n")
    bad = config(retrievers=["dense", {"name": "p", "use": "mine.py:f"}], search_limit=3)
    with pytest.raises(EvalError) as info:
        check(bad)
    assert "plugin 'mine.py:f' cannot be imported" in info.value.message
    assert "search_limit (3) must be at least the largest k" in info.value.message


# ---------------------------------------------------------------- every number bounded (issue 44 item 2)


def numeric_keys(schema, path=()):
    """(dotted key, its number schema) of every number the schema takes: in properties, list
    items, forms of an anyOf, nullable types."""
    if not isinstance(schema, dict):
        return []
    found = []
    types = schema.get("type", [])
    if {"integer", "number"} & set([types] if isinstance(types, str) else types):
        found.append((".".join(path), schema))
    for name, sub in schema.get("properties", {}).items():
        found += numeric_keys(sub, (*path, name))
    if isinstance(schema.get("items"), dict):
        found += numeric_keys(schema["items"], (*path, "0"))
    if isinstance(schema.get("additionalProperties"), dict):
        found += numeric_keys(schema["additionalProperties"], (*path, "x"))
    for form in schema.get("anyOf", []) + schema.get("oneOf", []):
        found += numeric_keys(form, path)
    return found


NUMERIC = numeric_keys(SCHEMA)


def test_the_walk_finds_the_numbers_of_the_schema():
    keys = {key for key, _ in NUMERIC}
    assert {
        "vipune.timeout",
        "ks.0",
        "embed.batch_tokens",
        "dataset.size",
        "dataset.expected.pairs",
        "split.seed",
        "search.plugin_timeout",
    } <= keys


@pytest.mark.parametrize("key, number", NUMERIC, ids=[key for key, _ in NUMERIC])
def test_every_number_of_the_schema_has_a_lower_and_an_upper_bound(key, number):
    """A number without an upper bound reaches a call that cannot take it (vipune.timeout 3000000:
    an OverflowError traceback from subprocess)."""
    assert {"minimum", "exclusiveMinimum"} & set(number), f"{key} has no lower bound"
    assert {"maximum", "exclusiveMaximum"} & set(number), f"{key} has no upper bound"


def with_value(key, value):
    """The repository's config with ``value`` at dotted ``key`` (``ks.0``: the list ``[value]``)."""
    cfg = copy.deepcopy(DEFAULTS)
    if key.endswith(".0"):  # an item of a list
        key, value = key[:-2], [value]
    *parents, last = key.split(".")
    node = cfg
    for name in parents:
        if not isinstance(node.get(name), dict):
            node[name] = {}
        node = node[name]
    node[last] = value
    return cfg


@pytest.mark.parametrize("key, number", NUMERIC, ids=[key for key, _ in NUMERIC])
def test_a_number_past_either_bound_is_a_named_problem(key, number):
    above = number.get("maximum", number.get("exclusiveMaximum"))
    below = number.get("minimum", number.get("exclusiveMinimum"))
    for value in (above + 1, below - 1):
        with pytest.raises(EvalError, match=re.escape(f"{key}: {value}")):
            check(with_value(key, value))


def test_the_longest_timeout_runs_the_lane_and_a_binary_without_an_overflow(fake_vipune_bin, tmp_path):
    """vipune.timeout at its maximum reaches subprocess and the vipune-lane's queue as given (3000000
    overflowed poll()'s milliseconds)."""
    longest = SCHEMA["properties"]["vipune"]["properties"]["timeout"]["maximum"]
    binary = fake_vipune_bin
    lane = find_lane(binary, "0.20.2")
    sha = hashlib.sha256(binary.read_bytes()).hexdigest()
    assert lane_fingerprint(lane, {"id": "x", "version": "0.20.2", "sha256": sha}, longest)["binary"] == "x"
    assert Vipune(binary, tmp_path / "home", longest).run(["--json", "version"], "here").returncode == 0


def test_a_timeout_of_3000000_seconds_is_refused_before_any_vipune_call():
    with pytest.raises(EvalError, match=r"vipune.timeout: 3000000 is greater than the maximum of 86400"):
        check(config(vipune={**DEFAULTS.get("vipune", {}), "timeout": 3000000}))


# ---------------------------------------------------------------- numbers YAML reads as text (item 8)


@pytest.mark.parametrize(
    "text, written",
    [
        ("vipune: {timeout: 1e-9}", "1.0e-9"),
        ("search: {plugin_timeout: 1.0e3}", "1000"),
        ("retrievers: [{name: h, use: hybrid, k: 6e1}]", "60"),
    ],
)
def test_a_number_yaml_reads_as_text_is_named_with_the_way_to_write_it(text, written):
    """YAML 1.1 (a config file, --config) reads 1e-9 as the text '1e-9': the problem says what to write."""
    bad = copy.deepcopy(DEFAULTS)
    bad.update(yaml.safe_load(text))
    with pytest.raises(EvalError) as info:
        check(bad)
    assert f"as text: write {written})" in info.value.message
    assert len(info.value.message.splitlines()) == 1  # one problem, not also "must be a finite number"
    good = copy.deepcopy(DEFAULTS)
    good.update(yaml.safe_load(re.sub(r"[0-9.]+e-?\d", written, text)))  # as the hint says
    check(good)


# ---------------------------------------------------------------- integers, an empty build, keys given twice (issue 51 item 5)


INTEGERS = [
    (key, number)
    for key, number in NUMERIC
    if "integer" in ([number["type"]] if isinstance(number["type"], str) else number["type"])
]


def test_the_walk_finds_the_integer_settings():
    assert {"search.shards", "embed.shards", "ks.0", "search_limit", "split.seed", "embed.batch_tokens"} <= {
        key for key, _ in INTEGERS
    }


@pytest.mark.parametrize("key, number", INTEGERS, ids=[key for key, _ in INTEGERS])
def test_an_integer_setting_refuses_a_float_saying_what_to_write(key, number):
    """JSON Schema counts 8.0 as an integer: search.shards 8.0 became a TypeError traceback at
    parse time, ks [1.0, 5] and search_limit 10.0 argparse messages in the jobs."""
    with pytest.raises(EvalError) as info:
        check(with_value(key, 10.0))
    assert f"{key}: " in info.value.message and (
        "10.0 is not a whole number: an integer setting takes no decimal point (write 10)" in info.value.message
    )
    check(with_value(key, 10))


@pytest.mark.parametrize("binary", [None, ""])
def test_an_empty_vipune_binary_asks_whether_the_build_failed(binary):
    """`--config vipune="{binary: $(build.sh …)}"` after a failed build: "None is not of type 'string'"."""
    with pytest.raises(EvalError) as info:
        check(config(vipune={"binary": binary}))
    assert info.value.message == f"bad configuration: {config_check.EMPTY_BINARY}"
    assert "the build printed nothing: did it fail?" in info.value.message


def test_a_key_given_twice_in_a_config_file_is_named_with_both_lines(tmp_path):
    """YAML keeps the last of two keys: a second `search:` block silently dropped the first."""
    path = tmp_path / "config.yaml"
    path.write_text(
        "search: {shards: 2}\nks: [1, 5]\nsearch: {threads: 1}\nvipune:\n  timeout: 5\n"
        "  timeout: 6\nretrievers: [{name: a, use: hybrid, k: 5, k: 6}]\n"
    )
    assert config_check.duplicated_keys(path) == [
        f"{path}:3: search is given twice (also at line 1): YAML keeps the last and silently drops the first; "
        "merge the two into one",
        f"{path}:6: vipune.timeout is given twice (also at line 5): YAML keeps the last and silently drops the "
        "first; merge the two into one",
        f"{path}:7: retrievers.0.k is given twice (also at line 7): YAML keeps the last and silently drops the "
        "first; merge the two into one",
    ]
    with pytest.raises(EvalError, match=r"3 problems:\n  - .*config.yaml:3: search is given twice"):
        config_check.check(config(), SCHEMA, [path, path]).problems.raise_any()  # a file named twice, named once
    (tmp_path / "good.yaml").write_text("search: {shards: 2}\nks: [1, 5]\n")
    assert config_check.duplicated_keys(tmp_path / "good.yaml") == []
    (tmp_path / "broken.yaml").write_text("search: {shards: 2\n")  # Snakemake names what YAML cannot read
    assert config_check.duplicated_keys(tmp_path / "broken.yaml") == []
