"""Package data (orchestrator/core/shipped.py): read through importlib.resources, here from the
editable install's mapping of the top-level folders (the installed wheel: test_installed_wheel).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from orchestrator.core import shipped

REPO = Path(__file__).resolve().parents[2]


def test_the_data_packages_are_the_checkouts_folders_in_an_editable_install() -> None:
    assert shipped.templates_dir() == REPO / "templates"
    assert (shipped.templates_dir() / "sbatch" / "base.sbatch.j2").is_file()
    assert shipped.schema_dir() == REPO / "docs" / "schema"
    assert (shipped.examples_dir() / "admin-templates" / "cluster.yaml").is_file()
    for name in shipped.EXAMPLE_TRACES:
        folder = shipped.example_trace(f"example:{name}")
        assert folder == REPO / "tests" / "data" / "traces" / name
        assert list(folder.glob("*.pt.trace.json.gz"))


def test_analyze_names_the_examples() -> None:
    def gh_run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "orchestrator", *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    bad = gh_run("analyze", "example:nope")
    assert bad.returncode == 2
    assert "example:nope: no such shipped example; choose one of example:baseline, " in bad.stderr
    good = gh_run("analyze", "example:offload")
    assert good.returncode == 0, good.stderr
    assert good.stdout.startswith("example:offload\n") and "NVIDIA H100" in good.stdout
    assert "example:baseline" in gh_run("analyze", "--help").stdout
