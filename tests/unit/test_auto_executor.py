"""Issue 15, class 3: `--executor auto` falls back to the local executor only where the cluster
file allows it (`local_fallback`: the dev cluster yes, gh200 no). With no controller answering
(a real SLURM client pointed at a port nobody listens on), a cluster that does not allow it is
refused in one sentence naming the file, the field and the fix; nothing is written."""

from __future__ import annotations

from pathlib import Path

from orchestrator.site.cluster import Cluster
from orchestrator.spec import yamlio
from tests.conftest import run_cli

REPO = Path(__file__).resolve().parents[2]


def _site(tmp: Path, allow: bool | None) -> Path:
    """The dev cluster's file, with local_fallback as given (None: the key left out)."""
    text = (REPO / "clusters" / "dev.yaml").read_text().replace("local_fallback: true\n", "")
    if allow is not None:
        text += f"local_fallback: {'true' if allow else 'false'}\n"
    path = tmp / "site.yaml"
    path.write_text(text)
    return path


def test_shipped_cluster_files() -> None:
    def load(name: str) -> Cluster:
        return yamlio.to_model(yamlio.read_file(REPO / "clusters" / name), Cluster)

    assert load("dev.yaml").local_fallback is True
    assert load("gh200.yaml").local_fallback is False
    assert Cluster.model_fields["local_fallback"].default is False


def test_auto_refuses_where_the_cluster_does_not_allow_local(
    tmp_path: Path, gh_home: Path, dead_controller: Path
) -> None:
    env = {"SLURM_CONF": str(dead_controller)}
    for allow in (None, False):
        site = _site(tmp_path, allow)
        res = run_cli(["submit", "jobs/smoke.yaml", "--cluster", str(site)], gh_home, env=env)
        assert res.rc == 2, res.text
        # One error sentence, after the note that a cluster file given as a path is not a
        # site file (site_config.origin_note).
        note, line = res.err.strip().splitlines()
        assert "site.yaml is given as a path, not a site file" in note
        assert "site.yaml: local_fallback: no SLURM controller answers" in line
        assert "--executor local" in line and "login node" in line
        assert not gh_home.exists(), "a refused submission wrote into the home"
    # The same for a campaign whose job names such a cluster.
    job = tmp_path / "job.yaml"
    job.write_text(
        (REPO / "jobs" / "smoke.yaml").read_text().replace("cluster: dev", f"cluster: {site}")
    )
    camp = tmp_path / "camp.yaml"
    camp.write_text(f"name: c\njob: {job}\ninclude: [{{name: a}}]\n")
    res = run_cli(["campaign", "run", str(camp)], gh_home, env=env)
    assert res.rc == 2 and "local_fallback" in res.err, res.text
    assert not gh_home.exists()
    # render prints what submit would send to SLURM: the srun launcher, no refusal.
    res = run_cli(["render", "jobs/smoke.yaml", "--cluster", str(site)], gh_home, env=env)
    assert res.rc == 0 and "srun " in res.out, res.text
    # An explicit --executor local is the user's choice.
    res = run_cli(
        ["submit", "jobs/smoke.yaml", "--cluster", str(site), "-x", "local", "--wait"],
        gh_home,
        env=env,
    )
    assert res.rc == 0, res.text


def test_auto_falls_back_where_the_cluster_allows_it(
    tmp_path: Path, gh_home: Path, dead_controller: Path
) -> None:
    site = _site(tmp_path, True)
    env = {"SLURM_CONF": str(dead_controller)}
    res = run_cli(["submit", "jobs/smoke.yaml", "--cluster", str(site), "--wait"], gh_home, env=env)
    assert res.rc == 0 and "as local job" in res.out, res.text


def test_each_executor_answers_for_itself(tmp_path: Path, dead_controller: Path) -> None:
    """submitit's AutoExecutor shape (executors/choose.py): each executor says whether it takes
    the jobs here; `auto` asks them in order and, when none does, joins their reasons into the
    one refusal the CLI test above reads. With a real SLURM client and no controller."""
    from orchestrator.core.errors import UserError
    from orchestrator.executors import cluster_identity
    from orchestrator.executors.choose import AUTO_ORDER, auto_executor
    from orchestrator.executors.local import LocalExecutor
    from orchestrator.executors.slurm import SlurmExecutor

    def load(path: Path) -> Cluster:
        c = yamlio.to_model(yamlio.read_file(path), Cluster)
        c.source = str(path)
        return c

    allowed, barred = load(_site(tmp_path, True)), load(_site(_mkdir(tmp_path / "barred"), False))
    assert (SlurmExecutor, LocalExecutor) == AUTO_ORDER  # the scheduler first
    cluster_identity.forget()  # the dead controller is asked, not an earlier answer
    try:
        assert LocalExecutor.not_here([allowed]) is None
        no = LocalExecutor.not_here([allowed, barred])
        assert no is not None and no.where.endswith("site.yaml: local_fallback")
        assert "submit from a" in no.fix
        slurm_no = SlurmExecutor.not_here([allowed])
        assert slurm_no is not None and "no SLURM controller answers" in slurm_no.why
        # A script only printed for a cluster that bars local: srun, nothing asked.
        assert SlurmExecutor.not_here([barred], render_only=True) is None
        assert auto_executor([allowed]) == "local"
        assert auto_executor([barred], render_only=True) == "slurm"
        try:
            auto_executor([barred])
            raise AssertionError("auto took a cluster that bars local with no controller")
        except UserError as exc:
            assert exc.message == (
                f"{no.where}: {slurm_no.why}, and {LocalExecutor.not_here([barred]).why}; "  # type: ignore[union-attr]
                f"{no.fix}"
            )
    finally:
        cluster_identity.forget()


def _mkdir(path: Path) -> Path:
    path.mkdir()
    return path
