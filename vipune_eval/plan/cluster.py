"""Does every cluster job fit the SLURM partition it is sent to? Checked once, before submitting.

A job asking for more CPUs, memory or time than any node of its partition offers is rejected
by ``sbatch`` when the cluster sets ``EnforcePartLimits=ALL`` (with a terse "More processors
requested than permitted"), and otherwise accepted and left PENDING for ever
(``Reason=PartitionConfig``): a hung run. This module compares what each submission will ask
for — a rule's threads and ``mem_mb`` after ``set-threads``/``set-resources``, or a group job's
sum over the jobs it runs side by side — with what ``sinfo``/``scontrol`` report, and names the
resource and the option that lowers it.

The Snakefile calls :func:`check_workflow` from ``onstart``: after the DAG (and the group jobs)
exist, before the first submission, on the submitting host only (cluster jobs run with
``--no-hooks``), and only with the ``slurm`` executor. ``VIPUNE_EVAL_CLUSTER_CHECK=0`` skips it.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from vipune_eval.core.io import log
from vipune_eval.errors import EvalError

SKIP_ENV = "VIPUNE_EVAL_CLUSTER_CHECK"

Runner = Callable[[list[str]], str]


class ClusterFitError(EvalError):
    """Some cluster jobs ask for more than their partition can give."""


class ClusterQueryError(EvalError):
    """The partition's limits could not be read (no sinfo, controller down, no such partition)."""


@dataclass(frozen=True)
class Partition:
    """What one job can get in a partition: the largest node, within the partition's caps."""

    name: str
    cpus: int | None  # CPUs of the largest node, or MaxCPUsPerNode if lower
    mem_mb: int | None  # memory of the largest node, or MaxMemPerNode if lower
    time_min: int | None  # MaxTime in minutes; None = unlimited


@dataclass(frozen=True)
class Request:
    """What one cluster submission asks for (a rule's job, or a group job)."""

    rules: tuple[str, ...]  # the rule, or the rules of a group's jobs (sorted, unique)
    threads: int
    mem_mb: int | None
    runtime: int | None  # minutes
    partition: str | None  # None: the cluster's default partition
    group: str | None = None
    members: int = 1  # jobs in a group job
    member_threads: int = 1  # the most threads one of its jobs asks for
    member_mem_mb: int | None = None  # the most memory one of its jobs asks for


def _run(cmd: list[str]) -> str:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ClusterQueryError(f"`{' '.join(cmd)}` failed: {exc}") from exc
    if proc.returncode != 0:
        raise ClusterQueryError(f"`{' '.join(cmd)}` exited {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


def parse_minutes(text: str) -> int | None:
    """A SLURM time limit (``infinite``, ``UNLIMITED``, ``MM``, ``MM:SS``, ``HH:MM:SS``,
    ``D-HH[:MM[:SS]]``) in whole minutes, rounded down; None when unlimited."""
    text = text.strip()
    if text.lower() in ("infinite", "unlimited", "none", ""):
        return None
    days = 0
    if "-" in text:
        day_text, text = text.split("-", 1)
        days = int(day_text)
        parts = [int(p) for p in text.split(":")]
        parts += [0] * (3 - len(parts))  # D-HH, D-HH:MM, D-HH:MM:SS
        hours, minutes, seconds = parts
    else:
        parts = [int(p) for p in text.split(":")]
        if len(parts) == 1:
            hours, minutes, seconds = 0, parts[0], 0
        elif len(parts) == 2:
            hours, (minutes, seconds) = 0, parts
        else:
            hours, minutes, seconds = parts
    return days * 1440 + hours * 60 + minutes + seconds // 60


def _number(value: str | None) -> int | None:
    match = re.fullmatch(r"(\d+)M?", value or "")
    return int(match.group(1)) if match else None


def parse_partition(name: str, nodes_text: str, scontrol_text: str) -> Partition:
    """Combine ``sinfo -h -N -p NAME -o %N|%c|%m`` and ``scontrol -o show partition NAME``."""
    cpus, mems = [], []
    for line in nodes_text.splitlines():
        fields = line.strip().split("|")
        if len(fields) != 3:
            continue
        cpu, mem = _number(fields[1].rstrip("+")), _number(fields[2].rstrip("+"))
        if cpu is not None:
            cpus.append(cpu)
        if mem is not None:
            mems.append(mem)
    settings = dict(re.findall(r"(\w+)=(\S*)", scontrol_text))
    if not cpus and "PartitionName" not in settings:
        raise ClusterQueryError(f"SLURM partition {name!r} has no nodes or does not exist")
    return Partition(
        name=name,
        cpus=_smallest(max(cpus, default=None), _number(settings.get("MaxCPUsPerNode"))),
        mem_mb=_smallest(max(mems, default=None), _number(settings.get("MaxMemPerNode"))),
        time_min=parse_minutes(settings.get("MaxTime", "UNLIMITED")),
    )


def _smallest(*values: int | None) -> int | None:
    known = [v for v in values if v is not None]
    return min(known) if known else None


def default_partition(run: Runner = _run) -> str:
    """The partition ``sbatch`` uses without ``-p`` (``sinfo`` marks it with ``*``)."""
    names = [line.strip() for line in run(["sinfo", "-h", "-o", "%P"]).splitlines() if line.strip()]
    for name in names:
        if name.endswith("*"):
            return name[:-1]
    raise ClusterQueryError(
        "the cluster has no default partition: set slurm_partition under default-resources in the profile"
    )


def read_partition(name: str, run: Runner = _run) -> Partition:
    nodes = run(["sinfo", "-h", "-N", "-p", name, "-o", "%N|%c|%m"])
    settings = run(["scontrol", "-o", "show", "partition", name])
    return parse_partition(name, nodes, settings)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _memory(resources: Any, threads: int) -> int | None:
    mem = _int(resources.get("mem_mb"))
    per_cpu = _int(resources.get("mem_mb_per_cpu"))
    if per_cpu:  # the executor then asks for --mem-per-cpu, i.e. this times the CPUs
        return per_cpu * threads
    return mem


def _partition(resources: Any) -> str | None:
    value = resources.get("slurm_partition")
    return str(value) if value else None


def requests_from_dag(dag: Any) -> list[Request]:
    """One request per submission the executor will make: each non-local job, each group job.

    ``dag`` is Snakemake's DAG after grouping (``needrun_jobs``, ``get_job_group``); jobs and
    group jobs expose ``threads``, ``resources``, ``is_local``; jobs also ``rule.name`` and
    ``is_norun`` (the target rule ``all`` runs nowhere).
    """
    requests, seen = [], set()
    for job in dag.needrun_jobs():
        group = dag.get_job_group(job)
        unit = group if group is not None else job
        if id(unit) in seen:
            continue
        seen.add(id(unit))
        if unit.is_local or (group is None and job.is_norun):
            continue
        threads = int(unit.threads)
        if group is None:
            requests.append(
                Request(
                    rules=(job.rule.name,),
                    threads=threads,
                    mem_mb=_memory(job.resources, threads),
                    runtime=_int(job.resources.get("runtime")),
                    partition=_partition(job.resources),
                )
            )
            continue
        members = list(group.jobs)
        member_mems = [m for m in (_memory(j.resources, int(j.threads)) for j in members) if m]
        requests.append(
            Request(
                rules=tuple(sorted({j.rule.name for j in members})),
                threads=threads,
                mem_mb=_memory(group.resources, threads),
                runtime=_int(group.resources.get("runtime")),
                partition=_partition(group.resources)
                or next((p for p in (_partition(j.resources) for j in members) if p), None),
                group=group.groupid,
                members=len(members),
                member_threads=max(int(j.threads) for j in members),
                member_mem_mb=max(member_mems) if member_mems else None,
            )
        )
    return requests


def _describe(partition: Partition) -> str:
    cpus = f"{partition.cpus} CPUs" if partition.cpus else "? CPUs"
    mem = f"{partition.mem_mb} MB" if partition.mem_mb else "? MB"
    time = f"time limit {partition.time_min} min" if partition.time_min is not None else "no time limit"
    return f"largest node {cpus}, {mem}; {time}"


def _what(request: Request, count: int) -> str:
    jobs = f" ({count} jobs)" if count > 1 else ""
    if request.group is None:
        return f"rule {request.rules[0]}{jobs}"
    return (
        f"group {request.group} ({request.members} {'/'.join(request.rules)} jobs side by side)"
        f"{' × ' + str(count) if count > 1 else ''}"
    )


def _advice(request: Request, resource: str, limit: int) -> str:
    rules = request.rules
    if request.group is None:
        rule = rules[0]
        if resource == "threads":
            return (
                f"lower it with --set-threads {rule}={limit} (or --cores {limit}, which caps "
                f"every job's threads at {limit})"
            )
        if resource == "mem_mb":
            return f"lower it with --set-resources {rule}:mem_mb={limit}"
        return f"lower it with --set-resources {rule}:runtime={limit}"
    if resource == "runtime":
        return (
            f"a group job's runtime is the sum over the jobs it runs one after another: lower "
            f"--group-components {request.group}=N, or --set-resources "
            f"{rules[0]}:runtime=..."
        )
    if resource == "threads":
        fits = limit // max(request.member_threads, 1)
        each = max(limit // request.members, 1)
        lower = f"--set-threads {' '.join(f'{rule}={each}' for rule in rules)}" if each < request.member_threads else ""
    else:
        fits = limit // max(request.member_mem_mb or 1, 1)
        each = max(limit // request.members, 1)
        lower = (
            f"--set-resources {' '.join(f'{rule}:mem_mb={each}' for rule in rules)}"
            if each < (request.member_mem_mb or 0)
            else ""
        )
    if fits < 1:
        return f"one {'/'.join(rules)} job alone asks for more than {limit}: lower it with {lower}"
    others = [o for o in (lower, f"--cores {limit}" if resource == "threads" else "") if o]
    return (
        f"the jobs of a group job run side by side and add up: lower it with "
        f"--group-components {request.group}={fits}" + (f" (or {', or '.join(others)})" if others else "")
    )


def find_problems(requests: Iterable[Request], partitions: dict[str | None, Partition]) -> list[str]:
    """One line per distinct oversized request: what, which resource, how to lower it."""
    counts: dict[Request, int] = {}
    for request in requests:
        counts[request] = counts.get(request, 0) + 1
    lines = []
    for request, count in counts.items():
        partition = partitions[request.partition]
        checks = (
            ("threads", request.threads, partition.cpus, "CPUs"),
            ("mem_mb", request.mem_mb, partition.mem_mb, "MB"),
            ("runtime", request.runtime, partition.time_min, "min"),
        )
        for resource, asked, limit, unit in checks:
            if asked is None or limit is None or asked <= limit:
                continue
            lines.append(
                f"{_what(request, count)} in partition {partition.name!r}: {resource} "
                f"{asked} > {limit} {unit}; {_advice(request, resource, limit)}"
            )
    return lines


def check_requests(requests: list[Request], run: Runner = _run) -> None:
    """Raise :class:`ClusterFitError` naming every request no node of its partition can hold."""
    if not requests:
        return
    partitions: dict[str | None, Partition] = {}
    for name in {r.partition for r in requests}:
        partitions[name] = read_partition(name or default_partition(run), run)
    problems = find_problems(requests, partitions)
    if not problems:
        return
    described = "; ".join(f"{p.name!r}: {_describe(p)}" for p in sorted(set(partitions.values()), key=lambda p: p.name))
    raise ClusterFitError(
        f"cluster jobs ask for more than their SLURM partition has ({described}); sbatch would "
        "reject them (EnforcePartLimits) or leave them PENDING for ever, so nothing was "
        "submitted:\n"
        + "".join(f"  - {line}\n" for line in problems)
        + "Make the change permanent in the profile (set-threads, set-resources, "
        "group-components; docs/cluster.md), or choose a larger partition with "
        f"--default-resources slurm_partition=NAME. {SKIP_ENV}=0 skips this check."
    )


def check_workflow(workflow: Any, run: Runner = _run) -> None:
    """The ``onstart`` hook: with the slurm executor, check every submission before the first.

    Stops the run (``SystemExit`` with the message) when a job cannot fit; when the limits
    cannot be read it logs a warning and lets the executor try.
    """
    plugin = getattr(workflow, "executor_plugin", None)
    if plugin is None or plugin.name != "slurm" or os.environ.get(SKIP_ENV) == "0":
        return
    try:
        check_requests(requests_from_dag(workflow.dag), run)
    except ClusterQueryError as exc:
        log.warning("vipune-eval: cluster limits not checked: %s", exc)
    except ClusterFitError as exc:
        raise SystemExit(exc.shown()) from None
