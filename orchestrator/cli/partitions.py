"""`gh-run partitions list|show|import`: what users may request, and drafting cluster files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from orchestrator.cli.state import out
from orchestrator.cli.table import Column, print_table
from orchestrator.core.errors import RuntimeFailure, UserError
from orchestrator.site.cluster import Cluster, Partition, load_cluster
from orchestrator.spec.yamlio import display_path

app = typer.Typer(
    name="partitions",
    help="Partitions of a cluster: what users may request; import a draft from live SLURM.",
    no_args_is_help=True,
)

ClusterOpt = Annotated[
    str | None,
    typer.Option(
        "--cluster",
        "-c",
        envvar="GH_RUN_CLUSTER",
        help="Cluster name or file (default: the default cluster, see `gh-run doctor`).",
    ),
]


def _load(cluster: str | None) -> Cluster:
    if cluster is None:
        from orchestrator.site.config import default_cluster

        cluster, _ = default_cluster()
    return load_cluster(cluster)


def _origin(cl: Cluster) -> str:
    """The cluster's file and where the search found it: `clusters/dev.yaml, the project's
    (.gh-run/config.yaml: cluster_dirs)`."""
    src = display_path(Path(cl.source)) if cl.source else cl.name
    if cl.origin is None:
        return src
    return f"{src}, {cl.origin.describe()}" if cl.source else cl.origin.describe()


def _gpus(p: Partition) -> str:
    if not p.gpus_per_node:
        return "0"
    extra = ", ".join(x for x in (p.gpu_type, p.gpu_mem) if x)
    return f"{p.gpus_per_node} ({extra})" if extra else str(p.gpus_per_node)


def _or_dash(items: list[str]) -> str:
    return ", ".join(items) if items else "-"


@app.command("list")
def list_cmd(
    cluster: ClusterOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Machine-readable output (every field).")
    ] = False,
) -> None:
    """One row per partition: the limits a job spec may ask for.

    The title names the cluster file and where it was found: a path, $GH_RUN_CLUSTERS, your
    own (~/.config/gh-run/clusters), the site's (/etc/gh-run/clusters) or the project's."""
    cl = _load(cluster)
    src = display_path(Path(cl.source)) if cl.source else cl.name
    if as_json:
        doc = {
            "cluster": cl.name,
            "source": src,
            "found": cl.origin.origin if cl.origin else None,
            "found_by": cl.origin.describe() if cl.origin else None,
            "default_partition": cl.default_partition,
            "partitions": {n: p.model_dump(mode="json") for n, p in cl.partitions.items()},
        }
        typer.echo(json.dumps(doc, indent=2))
        return
    columns = [
        Column("partition", keep=True),
        Column("arch", drop=4),
        Column("max nodes", right=True, drop=5),
        Column("GPUs/node", drop=6),
        Column("CPUs/node", right=True, drop=3),
        Column("mem/node", drop=7),
        Column("max time", drop=8),
        Column("default time", drop=2),
        Column("features", drop=1),
        Column("container", drop=9),
    ]
    rows = [
        [
            f"{name} (default)" if name == cl.default_partition else name,
            p.arch,
            str(p.max_nodes),
            _gpus(p),
            str(p.cpus_per_node),
            p.mem_per_node,
            p.max_time,
            p.default_time,
            _or_dash(p.features),
            p.container.runtime or "any",
        ]
        for name, p in cl.partitions.items()
    ]
    print_table(columns, rows, title=f"cluster {cl.name} ({_origin(cl)})")


@app.command("show", short_help="One partition: limits, defaults, what every job gets.")
def show_cmd(
    name: Annotated[str, typer.Argument(help="Partition name.")], cluster: ClusterOpt = None
) -> None:
    """Everything about one partition: limits, defaults, what every job gets."""
    cl = _load(cluster)
    if name not in cl.partitions:
        raise UserError(
            f"partition {name!r} does not exist on cluster {cl.name!r}; "
            f"choose one of: {', '.join(sorted(cl.partitions))}"
        )
    out.print(partition_table(cl, name))


def partition_table(cl: Cluster, name: str) -> Table:
    p = cl.partitions[name]
    t = Table(title=f"{cl.name}/{name}", show_header=False)
    t.add_column("field", style="bold")
    t.add_column("value")
    rows: list[tuple[str, str]] = [
        ("description", p.description or "-"),
        ("default partition", "yes" if name == cl.default_partition else "no"),
        ("architecture", p.arch),
        ("OS", p.os or "-"),
        ("nodes", _or_dash(p.nodes)),
        ("max nodes per job", str(p.max_nodes)),
        ("GPUs per node", _gpus(p)),
        ("GPU request as", f"--{p.gpu_directive}"),
        ("CPU cores per node", str(p.cpus_per_node)),
        ("memory per node", p.mem_per_node),
        ("CPU memory per node", p.cpu_mem or "-"),
        ("max time", p.max_time),
        ("default time", p.default_time),
        ("accounts", _or_dash(p.accounts) if p.accounts else "any"),
        ("QoS", _or_dash(p.qos) if p.qos else "any"),
        ("features (--constraint)", _or_dash(p.features)),
        ("sbatch options every job gets", _or_dash(p.sbatch_options)),
        ("container runtime", p.container.runtime or "not declared (any the job asks for)"),
        ("container binds", _or_dash(p.container.binds)),
        ("launcher", " ".join([p.launcher.kind, *p.launcher.options])),
        (
            "task binding (one task per GPU)",
            f"gpu {p.binding.gpu}, cpu {p.binding.cpu}, memory {p.binding.memory}"
            if p.binding
            else "-",
        ),
        ("setup lines", "\n".join(p.setup) or "-"),
        ("environment", "\n".join(f"{k}={v}" for k, v in p.env.items()) or "-"),
        ("template", f"partitions/{p.template or name}.sbatch.j2 (if present)"),
    ]
    for k, v in rows:
        t.add_row(k, v)
    return t


@app.command("import", short_help="Draft a cluster file from the live cluster (scontrol).")
def import_cmd(
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster",
            "-c",
            help="SLURM cluster to read (scontrol --clusters), for multi-cluster sites.",
        ),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the draft here (default: stdout).")
    ] = None,
    name: Annotated[
        str | None,
        typer.Option("--name", help="Cluster name in the draft (default: SLURM's ClusterName)."),
    ] = None,
    partition: Annotated[
        list[str] | None,
        typer.Option("--partition", "-p", help="Import only these partitions (repeatable)."),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite --output if it exists.")
    ] = False,
    install: Annotated[
        bool,
        typer.Option(
            "--install",
            help="Write it where the site's cluster files live ($GH_RUN_SITE_DIR or "
            "/etc/gh-run, clusters/NAME.yaml; as root), instead of --output.",
        ),
    ] = False,
) -> None:
    """Read the live cluster (scontrol) and write a draft cluster file for the admin to finish."""
    from orchestrator.executors import slurm_import

    if install and output is not None:
        raise UserError("--install and --output name two places; give one of them")
    if output is not None and output.exists() and not force:
        raise UserError(
            f"--output: {output} already exists; pass --force to overwrite it or pick another path"
        )
    draft = slurm_import.read_live(cluster, name, partition or [])
    if install:
        output = _site_file(draft.name, force)
    text = slurm_import.to_yaml(draft, output)
    if output is None:
        typer.echo(text, nl=False)
        return
    try:
        output.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        output.write_text(text)
    except OSError as exc:
        fix = "run it as the admin who owns the site's folder" if install else "pick another"
        raise RuntimeFailure(f"cannot write {output}: {exc.strerror}; {fix}") from None
    back = load_cluster(str(output))
    if back.model_dump() != draft.model_dump():
        raise RuntimeFailure(
            f"{output}: the written draft does not load back to what was read (a gh-run bug); "
            "please report it with the output of `scontrol show partition -o`"
        )
    parts = ", ".join(draft.partitions)
    out.print(
        f"wrote {output}: cluster {draft.name}, partitions {parts}; "
        "fill in what its header lists, then `gh-run partitions list --cluster "
        f"{output}`"
    )


def _site_file(name: str, force: bool) -> Path:
    """Where `--install` writes cluster NAME: the site's folder of cluster files."""
    from orchestrator.core.paths import site_dir

    path = site_dir() / "clusters" / f"{name}.yaml"
    if path.exists() and not force:
        raise UserError(
            f"--install: {path} already exists; pass --force to replace the site's file, or "
            "--name to install the draft under another name"
        )
    return path


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="partitions")
