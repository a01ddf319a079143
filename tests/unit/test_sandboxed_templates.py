"""Issue 42, class 1: a project's template folder is text, never Python. Templates render in
Jinja's sandbox (render.py), so a partition template that reaches Python's internals is a
template error (exit 2, one sentence), and nothing it names runs. Each payload is one of the
known ways out of a plain Jinja environment; a control renders each with a plain environment
and shows the program would have run."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "jobs" / "smoke.yaml"
DEV = (REPO / "clusters" / "dev.yaml").read_text()

# `{M}` is the marker file the payload touches when it gets out.
PAYLOADS = {
    "cycler globals": "{{ cycler.__init__.__globals__.os.system('touch {M}') }}",
    "joiner globals": "{{ joiner.__init__.__globals__['os'].popen('touch {M}').read() }}",
    "lipsum globals": "{{ lipsum.__globals__['os'].system('touch {M}') }}",
    "namespace globals": "{{ namespace.__init__.__globals__.os.system('touch {M}') }}",
    "subclasses walk": (
        "{% for c in ''.__class__.__mro__[1].__subclasses__() %}{% if c.__name__ == 'Popen' %}"
        "{{ c(['touch', '{M}']).wait() }}{% endif %}{% endfor %}"
    ),
    "self module": "{{ self._TemplateReference__context.cycler.__init__.__globals__.os"
    ".system('touch {M}') }}",
    "format string": "{{ '{0.__init__.__globals__[os].system}'.format(cycler) }}"
    "{{ cycler.__init__.__globals__.os.system('touch {M}') }}",
}


def _project(tmp_path: Path, payload: str, marker: Path) -> Path:
    project = tmp_path / "cloned"
    tpl = project / "templates" / "partitions"
    tpl.mkdir(parents=True)
    body = payload.replace("{M}", str(marker))
    (tpl / "gh.sbatch.j2").write_text(
        '{% extends "sbatch/base.sbatch.j2" %}{% block setup %}' + body + "{% endblock %}\n"
    )
    (project / "clusters").mkdir()
    (project / "clusters" / "dev.yaml").write_text(DEV)
    (project / ".gh-run").mkdir()
    (project / ".gh-run" / "config.yaml").write_text(
        "cluster_dirs: [clusters]\ntemplate_dirs: [templates]\n"
    )
    return project


@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_a_projects_template_cannot_run_python(tmp_path: Path, name: str) -> None:
    marker = tmp_path / "template-code-ran"
    project = _project(tmp_path, PAYLOADS[name], marker)
    env = {k: v for k, v in os.environ.items() if k != "GH_RUN_HOME"}
    env["GH_RUN_SITE_DIR"] = str(tmp_path / "no-site")
    res = subprocess.run(
        [sys.executable, "-m", "orchestrator", "render", str(SMOKE), "--cluster", "dev"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert not marker.exists(), f"{name}: the template ran a program"
    assert res.returncode == 2, res.stdout + res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and "template error" in errors[0], res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_control_a_plain_environment_would_have_run_it(tmp_path: Path, name: str) -> None:
    marker = tmp_path / "ran"
    env = jinja2.Environment()
    with contextlib.suppress(Exception):  # only whether the program ran matters
        env.from_string(PAYLOADS[name].replace("{M}", str(marker))).render()
    assert marker.exists()
