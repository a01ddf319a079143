"""The job against its partition (`fit_partition`): every limit it breaks, at its line in the
job file (site/cluster.validate_job), what it needs of the partition's nodes (node_fit.py: one
node-wide collector per node, the container runtime, the image's architecture), and the
partition's own template, which must exist and load. What `prepare` (render,
check, submit) and every campaign variant pass through; the other checks of preflight.py need
a prepared job, so this one sits below `prepare` and preflight.py takes it from here."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.core.errors import GhRunError
    from orchestrator.site.cluster import Cluster, Partition
    from orchestrator.spec.job import JobSpec
    from orchestrator.spec.yamlio import Located


def fit_partition(
    spec: JobSpec,
    cluster: Cluster,
    where: str | Located,
    problems: list[GhRunError] | None = None,
) -> tuple[str, Partition]:
    """The partition the job goes to, checked: every limit it breaks (appended to `problems`
    when given, else raised together; `where`: the job file as read, for line numbers, or a
    name), and the partition's own template, which must exist and load."""
    from orchestrator.checks import node_fit
    from orchestrator.core.errors import combine
    from orchestrator.render.scripts import partition_template
    from orchestrator.site.cluster import validate_job

    found: list[GhRunError] = []
    part_name, part = validate_job(spec, cluster, where, found)
    found.extend(node_fit.problems(spec, part_name, part, where))
    if problems is not None:
        problems.extend(found)
    elif found:
        raise combine(found, where if isinstance(where, str) else where.source)
    partition_template(cluster, part_name, part)
    return part_name, part
