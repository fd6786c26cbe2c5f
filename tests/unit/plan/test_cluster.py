"""The cluster fit check (vipune_eval.cluster): no SLURM needed; fake sinfo/scontrol stand in."""

import logging
from types import SimpleNamespace

import pytest

from support.slurm import NODES, SCONTROL
from vipune_eval.plan import cluster
from vipune_eval.plan.cluster import ClusterFitError, ClusterQueryError, Partition, Request

SMALL = Partition("debug", cpus=2, mem_mb=4000, time_min=None)


def runner(outputs):
    """A fake command runner: the output for each command line, ClusterQueryError otherwise."""
    calls = []

    def run(cmd):
        calls.append(cmd)
        key = " ".join(cmd)
        if key not in outputs:
            raise ClusterQueryError(f"`{key}` exited 1: no such command here")
        return outputs[key]

    run.calls = calls
    return run


CLUSTER = {
    "sinfo -h -o %P": "debug*\nbig\n",
    "sinfo -h -N -p debug -o %N|%c|%m": NODES,
    "scontrol -o show partition debug": SCONTROL,
    "sinfo -h -N -p big -o %N|%c|%m": "n1|64|256000\nn2|128|512000\n",
    "scontrol -o show partition big": "PartitionName=big MaxTime=2-00:00:00 MaxCPUsPerNode=96 "
    "MaxMemPerNode=UNLIMITED\n",
}


@pytest.mark.parametrize(
    "text, minutes",
    [
        ("infinite", None),
        ("UNLIMITED", None),
        ("30", 30),
        ("30:59", 30),
        ("2:00:00", 120),
        ("1-00:00:00", 1440),
        ("2-12", 3600),
        ("1-01:30", 1530),
    ],
)
def test_slurm_time_limits_in_minutes(text, minutes):
    assert cluster.parse_minutes(text) == minutes


def test_partition_is_the_largest_node_within_the_partition_caps():
    assert cluster.parse_partition("debug", NODES, SCONTROL) == Partition("debug", 2, 24105, None)
    big = cluster.read_partition("big", runner(CLUSTER))
    assert big == Partition("big", cpus=96, mem_mb=512000, time_min=2880)
    with pytest.raises(ClusterQueryError, match="'nowhere' has no nodes or does not exist"):
        cluster.parse_partition("nowhere", "", "")


def test_default_partition_is_the_starred_one():
    assert cluster.default_partition(runner(CLUSTER)) == "debug"
    with pytest.raises(ClusterQueryError, match="slurm_partition"):
        cluster.default_partition(runner({"sinfo -h -o %P": "a\nb\n"}))


def rule(name, threads=1, mem_mb=1000, runtime=30, partition=None):
    return Request(rules=(name,), threads=threads, mem_mb=mem_mb, runtime=runtime, partition=partition)


def group(name, rule_name, members, threads, mem_mb, runtime=60):
    return Request(
        rules=(rule_name,),
        threads=members * threads,
        mem_mb=members * mem_mb,
        runtime=runtime,
        partition=None,
        group=name,
        members=members,
        member_threads=threads,
        member_mem_mb=mem_mb,
    )


def test_requests_that_fit_raise_nothing():
    requests = [rule("embed", 2, 3500), group("search-vipune", "search_vipune", 2, 1, 1500)]
    assert cluster.find_problems(requests, {None: SMALL}) == []


def test_an_oversized_rule_names_the_resource_and_the_option_that_lowers_it():
    problems = cluster.find_problems([rule("embed", 8, 8000), rule("embed", 8, 8000)], {None: SMALL})
    assert problems == [
        "rule embed (2 jobs) in partition 'debug': threads 8 > 2 CPUs; lower it with "
        "--set-threads embed=2 (or --cores 2, which caps every job's threads at 2)",
        "rule embed (2 jobs) in partition 'debug': mem_mb 8000 > 4000 MB; lower it with "
        "--set-resources embed:mem_mb=4000",
    ]
    timed = Partition("short", 2, 4000, time_min=60)
    [problem] = cluster.find_problems([rule("embed", runtime=720, partition="short")], {"short": timed})
    assert "runtime 720 > 60 min" in problem and "--set-resources embed:runtime=60" in problem


def test_a_group_job_adds_up_its_jobs_and_suggests_fewer_components():
    [threads, memory] = cluster.find_problems([group("search-vipune", "search_vipune", 4, 1, 1500)], {None: SMALL})
    assert threads.startswith("group search-vipune (4 search_vipune jobs side by side)")
    assert "threads 4 > 2 CPUs" in threads and "--group-components search-vipune=2" in threads
    assert "--cores 2" in threads and "--set-threads" not in threads  # 1 thread each already
    assert "mem_mb 6000 > 4000 MB" in memory and "--group-components search-vipune=2" in memory
    assert "--set-resources search_vipune:mem_mb=1000" in memory
    [alone] = cluster.find_problems([group("search-vipune", "search_vipune", 2, 4, 1000)], {None: SMALL})
    assert "one search_vipune job alone asks for more than 2" in alone
    assert "--set-threads search_vipune=1" in alone


def test_check_requests_reads_each_partition_once_and_says_what_it_has():
    run = runner(CLUSTER)
    with pytest.raises(ClusterFitError) as error:
        cluster.check_requests(
            [rule("filter", mem_mb=64000), rule("embed", 8), rule("embed", 100, partition="big")], run
        )
    message = str(error.value)
    assert "'debug': largest node 2 CPUs, 24105 MB; no time limit" in message
    assert "'big': largest node 96 CPUs, 512000 MB; time limit 2880 min" in message
    assert "rule filter in partition 'debug': mem_mb 64000 > 24105 MB" in message
    assert "--set-threads embed=2" in message and "--set-threads embed=96" in message
    assert "nothing was submitted" in message and "VIPUNE_EVAL_CLUSTER_CHECK=0" in message
    assert sum(c[:2] == ["scontrol", "-o"] for c in run.calls) == 2
    cluster.check_requests([rule("embed", 2)], run)  # fits: no error


def fake_job(name, threads=1, mem_mb=1000, runtime=30, local=False, norun=False, **extra):
    resources = {"_cores": threads, "mem_mb": mem_mb, "runtime": runtime, "tmpdir": "<TBD>", **extra}
    return SimpleNamespace(
        rule=SimpleNamespace(name=name), threads=threads, resources=resources, is_local=local, is_norun=norun
    )


def fake_dag(jobs, groups=()):
    membership = {}
    for members, groupid, threads, mem_mb in groups:
        unit = SimpleNamespace(
            jobs=members,
            groupid=groupid,
            threads=threads,
            is_local=False,
            resources={"_cores": threads, "mem_mb": mem_mb, "runtime": 120},
        )
        membership.update({id(job): unit for job in members})
    return SimpleNamespace(needrun_jobs=lambda: jobs, get_job_group=lambda job: membership.get(id(job)))


def test_requests_come_from_jobs_and_group_jobs_not_local_rules():
    embed = [fake_job("embed", 2, 3500), fake_job("embed", 2, 3500)]
    search = [fake_job("search_vipune", 1, 1500) for _ in range(3)]
    jobs = [
        fake_job("vipune_home", local=True),
        fake_job("all", norun=True),
        *embed,
        *search,
        fake_job("filter", mem_mb_per_cpu=700),
    ]
    dag = fake_dag(jobs, groups=[(search[:2], "search-vipune", 2, 3000), (search[2:], "search-vipune", 1, 1500)])
    requests = cluster.requests_from_dag(dag)
    assert [r.rules for r in requests] == [("embed",), ("embed",), ("search_vipune",), ("search_vipune",), ("filter",)]
    assert requests[0] == rule("embed", 2, 3500)
    assert requests[2] == Request(
        rules=("search_vipune",),
        threads=2,
        mem_mb=3000,
        runtime=120,
        partition=None,
        group="search-vipune",
        members=2,
        member_threads=1,
        member_mem_mb=1500,
    )
    assert requests[4].mem_mb == 700  # --mem-per-cpu × 1 CPU


def test_the_onstart_hook_acts_only_for_the_slurm_executor(monkeypatch, caplog):
    dag = fake_dag([fake_job("embed", 8)])
    run = runner(CLUSTER)
    for plugin in (None, SimpleNamespace(name="local")):
        cluster.check_workflow(SimpleNamespace(executor_plugin=plugin, dag=dag), run)
    assert run.calls == []
    slurm = SimpleNamespace(executor_plugin=SimpleNamespace(name="slurm"), dag=dag)
    with pytest.raises(SystemExit, match=r"^vipune-eval: cluster jobs ask for more"):
        cluster.check_workflow(slurm, run)
    monkeypatch.setenv("VIPUNE_EVAL_CLUSTER_CHECK", "0")
    cluster.check_workflow(slurm, runner({}))
    monkeypatch.delenv("VIPUNE_EVAL_CLUSTER_CHECK")
    with caplog.at_level(logging.WARNING, logger="vipune_eval"):
        cluster.check_workflow(slurm, runner({}))  # no sinfo: the executor is left to try
    assert "cluster limits not checked" in caplog.text
