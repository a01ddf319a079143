"""`make dist`: gh-run's sdist and wheel built with the build backend alone.

What pyproject.toml's [build-system] names (`requires`, `build-backend`) is installed into a venv
of its own (.venvs/build, made once: a few MB), and nothing else: no torch, no test or lint
tools, no gh-run runtime dependencies. The backend's PEP 517 hooks then build the sdist from
this checkout and the wheel from the unpacked sdist (so the sdist is proven to hold everything
the wheel needs), into the output folder. The C parts are compiled where a C compiler is (the
wheel then fits this Python and machine) and left out where none is.

    python3 scripts/build_dist.py [--venv .venvs/build] [--out dist]

Standard library only: it runs under the machine's python3 before any venv exists.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Run inside the build venv: one PEP 517 hook of the backend, its answer on the last line.
HOOK = """
import importlib, json, sys
backend = importlib.import_module(sys.argv[1])
print(json.dumps(getattr(backend, sys.argv[2])(sys.argv[3])))
"""


def build_system(repo: Path) -> tuple[list[str], str]:
    table = tomllib.loads((repo / "pyproject.toml").read_text())["build-system"]
    return list(table["requires"]), str(table.get("build-backend", "setuptools.build_meta"))


def ensure_venv(folder: Path, requires: list[str]) -> Path:
    """The build venv with exactly the backend's requirements (installed once; a changed list
    is installed again)."""
    python = folder / "bin" / "python"
    stamp = folder / ".requires.json"
    if python.is_file() and stamp.is_file() and json.loads(stamp.read_text()) == requires:
        return python
    if not python.is_file():
        venv.EnvBuilder(with_pip=True, clear=True).create(folder)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *requires],
        check=True,
    )
    stamp.write_text(json.dumps(requires))
    return python


def hook(python: Path, backend: str, name: str, out: Path, cwd: Path) -> str:
    res = subprocess.run(
        [str(python), "-c", HOOK, backend, name, str(out)],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    if res.returncode != 0:
        sys.stderr.write(res.stdout[-4000:] + res.stderr[-4000:])
        raise SystemExit(f"build_dist: {backend}.{name} failed (exit {res.returncode})")
    return str(json.loads(res.stdout.strip().splitlines()[-1]))


def _extract(tar: tarfile.TarFile, into: Path) -> None:
    """The sdist unpacked: with the "data" filter where this Python has it (3.11.4+; Debian
    12's 3.11.2 has not), else member by member, refusing a path that leaves `into` or a link
    (the sdist is the one just built, but an unpacker should not trust that)."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(into, filter="data")
        return
    for m in tar.getmembers():
        target = (into / m.name).resolve()
        if not target.is_relative_to(into.resolve()) or m.issym() or m.islnk():
            raise SystemExit(f"build_dist: the sdist holds {m.name!r}, which it should not")
    tar.extractall(into)


def build(repo: Path, venv_dir: Path, out: Path) -> tuple[Path, Path]:
    requires, backend = build_system(repo)
    python = ensure_venv(venv_dir, requires)
    out.mkdir(parents=True, exist_ok=True)
    sdist = out / hook(python, backend, "build_sdist", out.absolute(), repo)
    with tempfile.TemporaryDirectory(prefix="gh-run-dist.") as tmp:
        with tarfile.open(sdist) as tar:
            _extract(tar, Path(tmp))
        [top] = Path(tmp).iterdir()
        wheel = out / hook(python, backend, "build_wheel", out.absolute(), top)
    return sdist, wheel


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--venv", type=Path, default=REPO / ".venvs" / "build")
    ap.add_argument("--out", type=Path, default=REPO / "dist")
    args = ap.parse_args(argv)
    start = time.monotonic()
    sdist, wheel = build(REPO, args.venv, args.out)
    took = time.monotonic() - start
    for p in (sdist, wheel):
        print(f"{p} ({p.stat().st_size / 2**20:.1f} MiB)")
    print(f"built in {took:.0f} s with {' '.join(build_system(REPO)[0])} alone ({args.venv})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
