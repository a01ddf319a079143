"""Template inheritance: an admin's template folder comes first, a partition template extends
the base script, and overriding one block changes that block and nothing else."""

from __future__ import annotations

import difflib
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator.core.errors import UserError
from orchestrator.render.scripts import RenderContext, render_job
from orchestrator.site.cluster import Cluster, load_cluster, validate_job
from orchestrator.spec.job import load_spec

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "admin-templates" / "cluster.yaml"
RUN_DIR = "/scratch/gh-run/runs/smoke-1"


def render(cluster: Cluster, spec_file: str = "jobs/smoke.yaml") -> tuple[str, str]:
    spec = load_spec(REPO / spec_file)
    name, part = validate_job(spec, cluster)
    job = render_job(spec, cluster, name, part, "smoke-1", RUN_DIR)
    return job.template, job.script


def test_admin_override_changes_the_setup_block_and_nothing_else() -> None:
    site = load_cluster(str(EXAMPLE))
    plain = site.model_copy(update={"template_dirs": []})
    plain.source = site.source
    base_template, base = render(plain)
    over_template, over = render(site)
    assert (base_template, over_template) == ("sbatch/base.sbatch.j2", "partitions/gh.sbatch.j2")

    a, b = base.splitlines(), over.splitlines()
    ops = [op for op in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()]
    changed = [op for op in ops if op[0] != "equal"]
    # One insertion, nothing replaced or deleted: the rest of the script is byte for byte gh-run's.
    assert [op[0] for op in changed] == ["insert"], "\n".join(difflib.unified_diff(a, b))
    _, i1, _, j1, j2 = changed[0]
    inserted = b[j1:j2]
    # The site's lines land right before the partition's own setup line (super()), in the
    # setup block: after the environment exports, before the run-folder lines.
    assert inserted[0].startswith("# Site modules (examples/admin-templates)")
    assert "  module load cuda/12.4 nvhpc/24.3" in inserted
    # ... before the partition's lines, which run between set +u and set -u (module scripts)
    assert a[i1].startswith("# The site's setup lines")
    mine = a.index('echo "gh-run: partition setup line on $(hostname)"')
    assert a[mine - 1] == "set +u" and a[mine + 1] == "set -u"
    assert [line for line in a[:i1] if line][-1].startswith("export ")
    assert a.index('mkdir -p "$GH_RUN_ARTIFACTS"') > i1


def test_rendered_override_is_valid_shell(tmp_path: Path) -> None:
    _, script = render(load_cluster(str(EXAMPLE)))
    path = tmp_path / "job.sbatch"
    path.write_text(script)
    subprocess.run(["bash", "-n", str(path)], check=True)
    if shutil.which("shellcheck"):
        res = subprocess.run(["shellcheck", str(path)], capture_output=True, text=True)
        assert res.returncode == 0, res.stdout


def test_cluster_template_dirs_come_first(tmp_path: Path) -> None:
    (tmp_path / "tpl" / "sbatch").mkdir(parents=True)
    # The site replaces the per-task template by one of its own; gh-run's is not used.
    (tmp_path / "tpl" / "sbatch" / "task.sh.j2").write_text(
        "#!/bin/bash\n# site task\nexec {{ argv | q }}\n"
    )
    text = EXAMPLE.read_text().replace("template_dirs: [templates]", "template_dirs: [tpl]")
    (tmp_path / "c.yaml").write_text(text)
    _, script = render(load_cluster(str(tmp_path / "c.yaml")))
    assert "# site task\nexec bash -c" in script
    assert "export LOCAL_RANK" not in script


def test_gh200_partition_template_extends_the_base(tmp_path: Path) -> None:
    cluster = load_cluster("gh200")
    cluster.paths.runs = str(tmp_path)
    template, script = render(cluster)
    assert template == "partitions/gh200.sbatch.j2"
    setup = script[script.index("# GH200: record") : script.index('mkdir -p "$GH_RUN_ARTIFACTS"')]
    assert "nvidia-smi --query-gpu=name,memory.total,driver_version" in setup
    # Everything of the base script is still there.
    for line in ("#SBATCH --partition=gh", "srun --unbuffered", 'echo "$status" >'):
        assert line in script


def test_missing_partition_template_names_the_cluster_file(tmp_path: Path) -> None:
    text = EXAMPLE.read_text().replace("    launcher:\n", "    template: nope\n    launcher:\n")
    (tmp_path / "c.yaml").write_text(text)
    (tmp_path / "templates").mkdir()
    with pytest.raises(UserError, match=r"c\.yaml: partitions\.gh\.template: .*nope\.sbatch\.j2"):
        render(load_cluster(str(tmp_path / "c.yaml")))


def test_docs_table_lists_every_render_context_field() -> None:
    doc = (REPO / "docs" / "templates.md").read_text()
    documented = set(re.findall(r"^\| `([a-z_0-9]+)` \|", doc, re.M))
    assert set(RenderContext.model_fields) <= documented, (
        set(RenderContext.model_fields) - documented
    )
    blocks = set(
        re.findall(r"{% block (\w+) %}", (REPO / "templates/sbatch/base.sbatch.j2").read_text())
    )
    assert blocks <= documented, blocks - documented
