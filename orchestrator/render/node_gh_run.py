"""Which gh-run runs on the compute nodes: for the analysis step at the end of a profiled job
(templates/sbatch/analysis_post.sh.j2) and the map and reduce jobs of `analyze --on-cluster`.

The cluster file's `analysis.gh_run`, when set, is the admin's word and the only candidate.
Otherwise, in order:
1. the job's own image's gh-run (`apptainer exec ... IMAGE gh-run`), when the job runs in one:
   the image was built for the nodes (their architecture, their libraries), and a site that puts
   gh-run in its training images needs nothing else on the nodes;
2. the default: with transport local the Python that submitted (`python -m orchestrator`: the
   nodes see the submit host's files, as on most sites and the dev cluster), with transport ssh
   the login node's gh-run (`ssh.gh_run`).
The job script tries them in order and takes the first that answers `--version` with this
gh-run's own version (a record is used only where the same gh-run reads it: another version's
work would be thrown away), saying why each one before it was passed over.
"""

from __future__ import annotations

from orchestrator.site.cluster import Cluster

# How the image's gh-run is called, after the container's exec prefix.
IN_IMAGE = "gh-run"


def candidates(cluster: Cluster, container_prefix: list[str]) -> list[list[str]]:
    """The commands that may run gh-run on the nodes, first choice first (never empty)."""
    if cluster.analysis.gh_run is not None:
        return [list(cluster.analysis.gh_run)]
    out = [[*container_prefix, IN_IMAGE]] if container_prefix else []
    out.append(cluster.gh_run_on_nodes())
    return out
