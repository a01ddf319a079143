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


def test_an_uninstalled_source_folder_says_so(tmp_path: Path) -> None:
    """gh-run run from a copy of its code alone on PYTHONPATH (never installed, so without the
    data packages the build maps in): one sentence, exit 1, instead of an import traceback."""
    import shutil

    shutil.copytree(REPO / "orchestrator", tmp_path / "orchestrator",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))  # fmt: skip
    res = subprocess.run(
        [sys.executable, "-S", "-c",
         "import sys; sys.path.insert(0, sys.argv[1]); "
         "from orchestrator.core.errors import GhRunError; from orchestrator.core import shipped\n"
         "try:\n    shipped.templates_dir()\n"
         "except GhRunError as e:\n    print(e.exit_code, e.message)",
         str(tmp_path)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("1 gh-run's package data orchestrator.templates is missing"), (
        res.stdout
    )
    assert "never installed; install it (pip install -e <checkout>, or the wheel)" in res.stdout
