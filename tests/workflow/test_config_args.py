"""``--config`` on Snakemake's command line takes YAML values (issue 39 item 3; vipune_eval.plan.config_args).

Snakemake reads a nested value as strings: ``ks=[1,5]`` and ``search={threads: 4}`` were refused
as "not of type integer", and ``model={path: null}`` became the folder ``<workdir>/null``.
"""

from __future__ import annotations

from support.scenarios import make_workdir, snakemake


def shell_commands(out: str, command: str) -> list[str]:
    """The shell lines of ``command`` a dry run with ``-p`` prints ("Shell command: vipune-eval …")."""
    return [line for line in out.splitlines() if f"vipune-eval {command} " in line]


def test_config_values_are_read_as_yaml(small, workflow_env, tmp_path):
    workdir = make_workdir(tmp_path / "w", *small)  # its config names a local model folder
    proc = snakemake(
        workdir,
        "-n",
        "-p",
        "--cores",
        "8",
        "--config",
        "ks=[1,5]",
        "search={threads: 4}",
        "model={path: null}",
        "download={timeout: 5, stall_timeout: 7}",
        env=workflow_env,
    )
    assert "not of type" not in proc.stdout + proc.stderr
    scores = shell_commands(proc.stdout, "score")
    assert scores and all(" --ks 1 5 " in line for line in scores)
    searches = shell_commands(proc.stdout, "search-vipune")
    assert searches and all(" --threads 4 " in line for line in searches)
    # model.path null: the model is downloaded (with the download block's limits), not read from ./null
    [download] = shell_commands(proc.stdout, "download-model")
    assert " --timeout 5 --stall-timeout 7 --dest results/model/download " in download
    assert not (workdir / "null").exists()


def test_a_config_value_that_is_not_yaml_is_refused_naming_the_form_that_works(small, workflow_env, tmp_path):
    workdir = make_workdir(tmp_path / "w", *small)
    proc = snakemake(workdir, "-n", "--config", "search={threads: 4", env=workflow_env, check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "vipune-eval: --config 'search={threads: 4': the value is not YAML" in proc.stderr
    assert "--config 'ks=[1, 5]' 'search={threads: 4}' 'model={path: null}'" in proc.stderr


def test_a_timeout_past_its_bound_and_a_number_yaml_reads_as_text_are_named_not_a_traceback(
    small, workflow_env, tmp_path
):
    """Issue 44 items 2 and 8: vipune.timeout 3000000 with the lib retrievers overflowed poll() in
    the vipune-lane's version check (an OverflowError traceback); 1e-9 is text to YAML 1.1."""
    workdir = make_workdir(tmp_path / "w", *small)
    proc = snakemake(
        workdir,
        "-n",
        "--config",
        "vipune={timeout: 3000000}",
        "search={plugin_timeout: 1e-9}",
        env=workflow_env,
        check=False,
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "vipune.timeout: 3000000 is greater than the maximum of 86400" in proc.stderr
    assert (
        "search.plugin_timeout: '1e-9' is not of type 'number' (YAML 1.1 reads 1e-9 as text: write 1.0e-9)"
        in proc.stderr
    )
