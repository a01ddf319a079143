"""Issue 15, class 1: small inputs never cause unbounded work.

Every YAML text gh-run parses (whole files, `--set` values, a campaign's `set:` and matrix
override strings, `KEY+=` appends) goes through one loader with one node limit; a campaign's
size is computed from its axes and refused above a settable limit before anything is expanded.
Each refusal: exit 2, one line naming where and the fix, nothing written, and fast (the
figures are in bench/bench_bounded_input.py; here only the outcome is asserted).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from orchestrator.campaign.model import (
    DEFAULT_MAX_VARIANTS,
    Campaign,
    check_size,
    expand,
    load_campaign,
    variant_count,
)
from orchestrator.core.errors import UserError
from orchestrator.spec import yamlio
from tests.conftest import run_cli

REPO = Path(__file__).resolve().parents[2]

# 10 levels of 10 aliases each: 10^9 values from a few hundred bytes.
BOMB = (
    "["
    + ", ".join(
        ["&a0 [x, x, x, x, x, x, x, x, x, x]"]
        + [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    )
    + "]"
)


def test_bomb_is_small() -> None:
    assert len(BOMB) < 600


def test_parse_value_refuses_an_alias_bomb() -> None:
    with pytest.raises(UserError, match=r"--set x: the value expands to more than 100000 values"):
        yamlio.parse_value(BOMB, "--set x")


def test_parse_value_keeps_plain_values_and_text() -> None:
    assert yamlio.parse_value("2", "w") == 2
    assert yamlio.parse_value("[a, b]", "w") == ["a", "b"]
    assert yamlio.parse_value("a: b: c", "w") == "a: b: c"  # not YAML: the text itself
    assert yamlio.parse_value("", "w") == ""


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def test_set_value_alias_bomb_is_refused_by_render(tmp_path: Path) -> None:
    home = tmp_path / "home"
    res = run_cli(
        ["render", "jobs/smoke.yaml", "-x", "local", "--set", f"workload.args={BOMB}"],
        home,
        timeout=60,
    )
    assert res.rc == 2, res.text
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and "--set workload.args" in lines[0], res.err
    assert "write the value out plainly" in lines[0]
    assert not home.exists()


def _campaign(folder: Path, body: str) -> Path:
    job = _write(
        folder,
        "job.yaml",
        """\
        name: tiny
        cluster: dev
        resources: {time: "00:01:00"}
        workload: {command: "true", args: [x]}
        """,
    )
    return _write(folder, "camp.yaml", f"name: camp\njob: {job.name}\n" + textwrap.dedent(body))


@pytest.mark.parametrize(
    "body",
    [
        f"set: ['workload.args={BOMB}']\nmatrix: {{a: {{x: []}}}}\n",
        f"matrix: {{a: {{x: ['workload.args={BOMB}']}}}}\n",
        f"matrix: {{a: {{x: ['workload.args+={BOMB}']}}}}\n",
    ],
    ids=["set", "matrix", "append"],
)
def test_campaign_override_strings_have_the_node_limit(tmp_path: Path, body: str) -> None:
    camp = _campaign(tmp_path, body)
    home = tmp_path / "home"
    res = run_cli(["campaign", "run", str(camp), "-x", "local"], home, timeout=60)
    assert res.rc == 2, res.text
    lines = res.err.strip().splitlines()
    assert len(lines) == 1, res.err
    assert "camp.yaml" in lines[0] and "expands to more than 100000 values" in lines[0]
    assert not home.exists()


def _matrix(axes: int, values: int) -> str:
    lines = ["matrix:"]
    for a in range(axes):
        lines.append(f"  ax{a}:")
        lines += [f"    v{v}: []" for v in range(values)]
    return "\n".join(lines) + "\n"


def test_matrix_size_from_the_axes(tmp_path: Path) -> None:
    camp = load_campaign(_campaign(tmp_path, _matrix(7, 10)))
    assert variant_count(camp) == (10**7, "10 x 10 x 10 x 10 x 10 x 10 x 10")
    with pytest.raises(UserError, match=r"10000000 variants is more than the limit of 10000"):
        expand(camp, "camp.yaml")


def test_matrix_limit_is_settable_and_counts_includes(tmp_path: Path) -> None:
    camp = Campaign.model_validate(
        {
            "name": "c",
            "job": "j.yaml",
            "matrix": {"a": {"x": [], "y": []}, "b": {"p": [], "q": [], "r": []}},
            "include": [{"name": "extra"}],
        }
    )
    assert variant_count(camp) == (7, "2 x 3 + 1")
    assert check_size(camp, "c.yaml", 7) == 7
    with pytest.raises(UserError, match=r"2 x 3 \+ 1 = 7 variants is more than the limit of 6"):
        check_size(camp, "c.yaml", 6)
    assert len(expand(camp, "c.yaml", 7)) == 7


def test_huge_matrix_refused_before_anything_is_written(tmp_path: Path) -> None:
    camp = _campaign(tmp_path, _matrix(7, 10))
    assert camp.stat().st_size < 2200
    home = tmp_path / "home"
    res = run_cli(["campaign", "run", str(camp), "-x", "local"], home, timeout=60)
    assert res.rc == 2, res.text
    [line] = res.err.strip().splitlines()
    assert "camp.yaml: matrix: " in line and f"limit of {DEFAULT_MAX_VARIANTS}" in line
    assert "--max-variants" in line
    assert not home.exists()
    # The flag and the environment variable set the limit (here: lower than the default).
    small = _campaign(tmp_path, _matrix(2, 3))
    res = run_cli(["campaign", "run", str(small), "-x", "local", "--max-variants", "8"], home)
    assert res.rc == 2 and "9 variants is more than the limit of 8" in res.err, res.text
    res = run_cli(
        ["campaign", "run", str(small), "-x", "local"], home, env={"GH_RUN_MAX_VARIANTS": "5"}
    )
    assert res.rc == 2 and "limit of 5" in res.err, res.text
    assert not home.exists()
