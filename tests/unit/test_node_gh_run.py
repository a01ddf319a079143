"""Which gh-run runs on the nodes (orchestrator/render/node_gh_run.py): the cluster's
`analysis.gh_run` alone when set; else the job's image's own gh-run first, then the default.
The job script's choice among them runs for real in tests/integration/test_in_job_analysis.py."""

from __future__ import annotations

import sys

from orchestrator.render.node_gh_run import candidates
from orchestrator.site.cluster import Cluster, load_cluster


def test_the_images_gh_run_comes_first_unless_the_cluster_names_one() -> None:
    dev = load_cluster("dev")
    image = ["apptainer", "exec", "--bind", "/r:/r", "/images/x.sif"]
    assert candidates(dev, image) == [
        [*image, "gh-run"],
        [sys.executable, "-m", "orchestrator"],
    ]
    assert candidates(dev, []) == [[sys.executable, "-m", "orchestrator"]]
    named = Cluster.model_validate(
        {**dev.model_dump(exclude_none=True), "analysis": {"gh_run": ["/apps/gh-run"]}}
    )
    assert candidates(named, image) == [["/apps/gh-run"]]
