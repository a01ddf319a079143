"""Read a live SLURM cluster into a draft cluster file (`gh-run partitions import`).

What SLURM knows, we take: partitions (`scontrol show partition -o`), their nodes, CPUs,
memory, architecture, GRES and features (`scontrol show node -o`), the cluster's name and the
default partition. What SLURM does not know (GPU memory, the Linux distribution, the
container runtime, module loads, srun options) stays out of the draft, and the header of the
written file lists it for the admin to fill in (docs/templates.md, "Importing a cluster").

The draft is a `Cluster` model: what is written is `Cluster.model_dump`, so it loads back
through `load_cluster` unchanged.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import yaml

from orchestrator.core.errors import RuntimeFailure, UserError
from orchestrator.core.units import format_mem, format_time, parse_time
from orchestrator.site.cluster import Arch, Cluster, Partition, SlurmCluster

# SLURM's "no limit" for MaxTime; the model needs a number, so a year stands in for it.
UNLIMITED_TIME = "365-00:00:00"

# What an import can never learn from SLURM, and where the admin writes it.
NOT_FROM_SLURM: tuple[tuple[str, str], ...] = (
    ("gpu_mem", "GPU memory per GPU (e.g. 96G for a GH200's HBM3); GRES has no memory size"),
    ("cpu_mem", "CPU memory if separate from GPU memory (e.g. 480G LPDDR5X)"),
    ("os", "the Linux distribution (scontrol reports only the kernel)"),
    ("container", "the container runtime (singularity/apptainer) and default binds"),
    ("nsys", "the Nsight Systems version and command, inside images or on the host"),
    ("setup", "shell lines every job needs first (module loads, site environment)"),
    ("env", "environment variables every job gets"),
    ("launcher.options", "srun options such as --mpi=pmix or --cpu-bind=cores"),
    ("sbatch_options", "directives every job must carry (e.g. --exclusive)"),
    ("accounts/qos", "only partition-level AllowAccounts/AllowQos are read, not sacctmgr"),
)

_ALWAYS_SHOWN = (
    "description",
    "arch",
    "nodes",
    "max_nodes",
    "gpus_per_node",
    "gpu_type",
    "cpus_per_node",
    "mem_per_node",
    "max_time",
    "default_time",
    "features",
)

_FIELD = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_/:]*)=")


def parse_records(text: str) -> list[dict[str, str]]:
    """`scontrol show ... -o` output → one dict per line. Values may hold spaces (OS=Linux 6.1
    #1 SMP ...): a value runs until the next ` Key=`."""
    records: list[dict[str, str]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        matches = list(_FIELD.finditer(line))
        rec: dict[str, str] = {}
        for i, m in enumerate(matches):
            end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
            rec[m.group(1)] = line[m.end() : end].strip()
        records.append(rec)
    return records


def _unset(value: str | None) -> bool:
    return value is None or value in ("", "(null)", "N/A", "NONE", "UNLIMITED", "ALL")


def parse_gres(text: str | None) -> list[tuple[str, str | None, int]]:
    """`gpu:gh200:4(S:0-1),nic:1` → [("gpu", "gh200", 4), ("nic", None, 1)]."""
    out: list[tuple[str, str | None, int]] = []
    if _unset(text):
        return out
    assert text is not None
    for item in re.split(r",(?![^()]*\))", text):
        item = re.sub(r"\(.*\)$", "", item.strip())
        if not item:
            continue
        parts = item.split(":")
        name = parts[0]
        count = 1
        kind: str | None = None
        if len(parts) >= 2 and parts[-1].isdigit():
            count = int(parts[-1])
            kind = parts[1] if len(parts) >= 3 else None
        elif len(parts) >= 2:
            kind = parts[1]
        out.append((name, kind, count))
    return out


def _features(node: dict[str, str]) -> set[str]:
    raw = node.get("AvailableFeatures")
    return set() if _unset(raw) or raw is None else {f for f in raw.split(",") if f}


def draft_partition(part: dict[str, str], nodes: list[dict[str, str]]) -> Partition:
    """One partition from its scontrol record and its nodes' records."""
    name = part.get("PartitionName", "?")
    if not nodes:
        raise RuntimeFailure(f"partition {name} has no nodes that scontrol reports; cannot import")
    arches = {n.get("Arch", "") for n in nodes}
    arch: Arch
    if arches <= {"aarch64", "arm64"}:
        arch = "aarch64"
    elif arches <= {"x86_64"}:
        arch = "x86_64"
    else:
        raise RuntimeFailure(
            f"partition {name} has nodes of architectures {', '.join(sorted(arches))}; gh-run "
            "models one architecture per partition, so split it or write it by hand"
        )
    gpus: list[int] = []
    gpu_types: set[str] = set()
    for n in nodes:
        per_node = [(k, c) for (g, k, c) in parse_gres(n.get("Gres")) if g == "gpu"]
        gpus.append(sum(c for _, c in per_node))
        gpu_types |= {k for k, _ in per_node if k}
    cpus = min(int(n.get("CPUEfctv") or n.get("CPUTot") or 1) for n in nodes)
    if not _unset(part.get("MaxCPUsPerNode")):
        cpus = min(cpus, int(part["MaxCPUsPerNode"]))
    mem = min(int(n.get("RealMemory") or 1) for n in nodes)
    max_mem = part.get("MaxMemPerNode")
    if not _unset(max_mem) and max_mem is not None and max_mem.isdigit():
        mem = min(mem, int(max_mem))
    max_nodes = len(nodes)
    if not _unset(part.get("MaxNodes")):
        max_nodes = min(max_nodes, int(part["MaxNodes"]))
    max_time = part.get("MaxTime")
    max_time = UNLIMITED_TIME if _unset(max_time) or max_time is None else max_time
    default_time = part.get("DefaultTime")
    # Without DefaultTime, SLURM gives a job the partition's MaxTime.
    default_time = max_time if _unset(default_time) or default_time is None else default_time
    features: set[str] = set()
    for n in nodes:
        features |= _features(n)
    accounts = part.get("AllowAccounts")
    qos = part.get("AllowQos")
    names = [n["NodeName"] for n in nodes]
    state = part.get("State", "UP")
    description = f"Imported from SLURM: {len(names)} nodes ({', '.join(names[:4])}"
    description += ", ...)" if len(names) > 4 else ")"
    if state != "UP":
        description += f"; state {state} at import"
    return Partition(
        description=description,
        arch=arch,
        nodes=names,
        max_nodes=max(1, max_nodes),
        gpus_per_node=min(gpus),
        gpu_type=gpu_types.pop() if len(gpu_types) == 1 else None,
        cpus_per_node=max(1, cpus),
        mem_per_node=format_mem(max(1, mem)),
        max_time=format_time(parse_time(max_time)),
        default_time=format_time(parse_time(default_time)),
        accounts=[] if _unset(accounts) or accounts is None else accounts.split(","),
        qos=[] if _unset(qos) or qos is None else qos.split(","),
        features=sorted(features),
    )


def draft_cluster(
    partition_text: str,
    node_text: str,
    cluster_name: str,
    only: Sequence[str] = (),
    slurm: SlurmCluster | None = None,
) -> Cluster:
    """Build the draft from `scontrol show partition -o` and `scontrol show node -o` output;
    `slurm`: the SLURM cluster it was read from (its ClusterName, and whether it was asked
    with --clusters)."""
    parts = parse_records(partition_text)
    node_recs = parse_records(node_text)
    if only:
        unknown = sorted(set(only) - {p.get("PartitionName", "") for p in parts})
        if unknown:
            raise UserError(
                f"--partition: {', '.join(unknown)} is not a partition of this cluster; "
                f"choose among {', '.join(p.get('PartitionName', '?') for p in parts)}"
            )
        parts = [p for p in parts if p.get("PartitionName") in only]
    if not parts:
        raise RuntimeFailure("scontrol reported no partitions; is this the right cluster?")
    partitions: dict[str, Partition] = {}
    default = None
    for p in parts:
        name = p["PartitionName"]
        members = [n for n in node_recs if name in (n.get("Partitions") or "").split(",")]
        members.sort(key=lambda n: _natural(n["NodeName"]))
        partitions[name] = draft_partition(p, members)
        if p.get("Default") == "YES":
            default = name
    return Cluster(
        name=cluster_name,
        description=f"Imported from SLURM cluster {cluster_name} by gh-run partitions import.",
        scheduler="slurm",
        slurm=slurm or SlurmCluster(),
        default_partition=default or next(iter(partitions)),
        partitions=partitions,
    )


def _natural(name: str) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def _scontrol(args: list[str], slurm_cluster: str | None) -> str:
    from orchestrator.executors.slurm_cli import UNREACHABLE, run_slurm

    argv = ["scontrol", *(["--clusters", slurm_cluster] if slurm_cluster else []), *args]
    res = run_slurm(argv)
    if res.returncode != 0:
        text = " ".join((res.stderr + res.stdout).split())
        if slurm_cluster and not UNREACHABLE.search(text):
            raise UserError(
                f"--cluster: SLURM does not know a cluster {slurm_cluster!r} ({text}); "
                "use a name from `sacctmgr list clusters`"
            )
        raise RuntimeFailure(f"`{' '.join(argv)}` failed: {text}")
    return res.stdout


def read_live(
    slurm_cluster: str | None = None, name: str | None = None, only: Sequence[str] = ()
) -> Cluster:
    """Ask the live controller and draft a cluster from its answers."""
    parts = _scontrol(["show", "partition", "-o"], slurm_cluster)
    nodes = _scontrol(["show", "node", "-o"], slurm_cluster)
    config = _scontrol(["show", "config"], slurm_cluster)
    m = re.search(r"^ClusterName\s*=\s*(\S+)", config, re.MULTILINE)
    cluster_name = m.group(1) if m else slurm_cluster
    if name is None:
        name = slurm_cluster or cluster_name or "imported"
    # Read with --clusters: the login node reaches several clusters, and so will every job.
    slurm = SlurmCluster(cluster_name=cluster_name, multi_cluster=bool(slurm_cluster))
    return draft_cluster(parts, nodes, name, only, slurm)


def to_yaml(cluster: Cluster, output: Path | None = None) -> str:
    """The draft as YAML: a schema comment, what the admin must add, then the model's data."""
    from orchestrator.core.shipped import schema_dir

    # The installed schema (orchestrator.schema): named relative to the file when both are in
    # one checkout (docs/schema beside clusters/), else by its absolute path (a site's install).
    schema_file = schema_dir() / "cluster.schema.json"
    root = schema_file.parents[2]
    # Printed (no --output): as if saved as clusters/NAME.yaml under the current folder.
    folder = (output or Path.cwd() / "clusters" / "x.yaml").absolute().parent
    inside = folder == root or root in folder.parents
    schema = os.path.relpath(schema_file, folder) if inside else str(schema_file)
    lines = [
        f"# yaml-language-server: $schema={schema}",
        f"# Drafted by `gh-run partitions import` on {datetime.now().strftime('%Y-%m-%d %H:%M')}"
        " from the live SLURM controller.",
        "# SLURM could not tell these; add them per partition where they apply:",
        *(f"#   {key}: {why}" for key, why in NOT_FROM_SLURM),
    ]
    data = cluster.model_dump(mode="json", exclude_defaults=True)
    data = {"name": data.pop("name"), "scheduler": cluster.scheduler, **data}
    for key, part in cluster.partitions.items():
        # The limits users ask about are written even where they equal the model's defaults.
        full = part.model_dump(mode="json")
        shown = {k: full[k] for k in _ALWAYS_SHOWN}
        data["partitions"][key] = {**shown, **data["partitions"][key]}
    body = yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=100)
    return "\n".join(lines) + "\n" + body
