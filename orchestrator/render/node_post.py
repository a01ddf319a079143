"""Post-processing as a loop over ranks, spread over the nodes (templates/sbatch/nsys_post.sh.j2).

A job's reports are BASE.RANK.nsys-rep for each profiled rank (BASE.nsys-rep for a one-rank
job). Each is exported, summarised and checked by the same commands with only its own paths in
them, so the script holds those commands once (`NodePost`) and walks the ranks, given as ranges
("0-511,600"): its size does not depend on the job's. One task per node takes the reports of its
own ranks (rank // tasks_per_node = the node's index), up to `jobs_per_node` at a time, inside a
budget the batch script announces.

The commands are profile.post_reports' own for one report, with the per-report tail (the output
and input paths) cut off and checked to be exactly that: the loop runs what the reference says,
or rendering stops (`PostLayoutError`) instead of running something else.
"""

from __future__ import annotations

from pydantic import Field

from orchestrator.core.base import Strict
from orchestrator.nsys.profile import PostReport

# At most this many exports at a time on one node: each nsys export holds a report in memory,
# and a node's cores are the workload's ranks' (one export per rank's share, never more than 8).
MAX_JOBS_PER_NODE = 8
# The budget: a quarter of the job's time limit, at least 10 minutes, at most 2 hours (an
# export of a GB-sized report takes minutes; the job's limit still ends everything).
BUDGET_FRACTION = 4
BUDGET_MIN_S = 600
BUDGET_MAX_S = 7200


class PostLayoutError(ValueError):
    """profile.post_reports changed the shape the loop relies on."""


class StatsCsvSuffix(Strict):
    suffix: str = Field(description="The CSV is the report's base path + this.")
    report: str = Field(description="The nsys stats report (as the version spells it).")


class NodePost(Strict):
    """What nsys_post.sh runs, once for every report (docs/templates.md)."""

    base: str = Field(description="Report path without rank and extension.")
    ranks: str = Field(description="The profiled ranks, as ranges: 0-7,9.")
    per_rank: bool = Field(description="Report names carry .RANK (jobs of several ranks).")
    nodes: int
    tasks_per_node: int
    jobs_per_node: int = Field(description="Reports processed at a time on one node.")
    budget_s: int = Field(description="Seconds the whole post-processing may take.")
    export: list[str] = Field(description="nsys export argv before --output (empty: none).")
    stats: list[str] = Field(description="nsys stats argv before --output (empty: none).")
    csvs: list[StatsCsvSuffix] = Field(default_factory=list)
    sampler_local_rank: int | None = Field(
        None, description="Reports of this local rank must hold GPU metrics (None: none must)."
    )
    missing_why: str
    analysis: bool = Field(description="Each node analyses its exports (analysis_post.sh).")


def rank_ranges(ranks: list[int]) -> str:
    """Sorted ranks as ranges: [0, 1, 2, 5, 7, 8] -> "0-2,5,7-8"."""
    parts: list[list[int]] = []
    for r in sorted(set(ranks)):
        if parts and parts[-1][1] == r - 1:
            parts[-1][1] = r
        else:
            parts.append([r, r])
    return ",".join(f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi in parts)


def budget_seconds(time_limit_s: int) -> int:
    return max(BUDGET_MIN_S, min(BUDGET_MAX_S, time_limit_s // BUDGET_FRACTION))


def _head(argv: list[str], tail: list[str], what: str) -> list[str]:
    if not argv:
        return []
    if argv[-len(tail) :] != tail:
        raise PostLayoutError(f"{what} does not end with {tail}: {argv}")
    return argv[: -len(tail)]


def node_post(
    one: PostReport,
    base: str,
    stem: str,
    ranks: list[int],
    per_rank: bool,
    nodes: int,
    tasks_per_node: int,
    time_limit_s: int,
    sampler_local_rank: int | None,
    analysis: bool,
) -> NodePost:
    """The loop's form of `one` (post_reports' entry for the report at path `base`, which is
    `stem.RANK` when `per_rank`, else `stem`)."""
    rep = f"{base}.nsys-rep"
    source = one.sqlite or rep
    export = _head(
        one.export,
        [f"--output={one.sqlite}", "--force-overwrite=true", rep],
        "nsys export",
    )
    stats = _head(one.stats, [f"--output={base}", "--force-overwrite=true", source], "nsys stats")
    csvs = []
    for c in one.csvs:
        if not c.path.startswith(base):
            raise PostLayoutError(f"the CSV {c.path} is not named after {base}")
        csvs.append(StatsCsvSuffix(suffix=c.path[len(base) :], report=c.report))
    return NodePost(
        base=stem,
        ranks=rank_ranges(ranks),
        per_rank=per_rank,
        nodes=nodes,
        tasks_per_node=tasks_per_node,
        jobs_per_node=max(1, min(tasks_per_node, MAX_JOBS_PER_NODE)),
        budget_s=budget_seconds(time_limit_s),
        export=export,
        stats=stats,
        csvs=csvs,
        sampler_local_rank=sampler_local_rank,
        missing_why=one.missing_why,
        analysis=analysis,
    )
