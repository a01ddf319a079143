"""Job spec loading: strict fields, readable errors with file/field/line, overrides, extends."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import UserError
from orchestrator.spec import JobSpec, load_spec

REPO = Path(__file__).resolve().parents[2]

MINIMAL = "name: t\nworkload:\n  command: echo\n"


def write(tmp_path: Path, text: str, name: str = "job.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_minimal_spec_gets_sane_defaults(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, MINIMAL))
    assert spec.resources.nodes == 1
    assert spec.resources.tasks_per_node == 1
    assert spec.container.runtime == "none"
    assert spec.workload.argv() == ["echo"]
    assert spec.artifacts.include == ["*.nsys-rep", "*.sqlite", "*.csv"]


def test_error_names_file_line_and_field(tmp_path: Path) -> None:
    p = write(tmp_path, "name: t\nresources:\n  nodes: 0\nworkload:\n  command: echo\n")
    with pytest.raises(UserError) as exc:
        load_spec(p)
    msg = str(exc.value)
    assert msg.startswith(f"{p}:3: resources.nodes: must be >= 1"), msg


def test_unknown_key_is_refused_with_its_line(tmp_path: Path) -> None:
    p = write(tmp_path, MINIMAL + "  bogus: 1\n")
    with pytest.raises(UserError, match=r":4: workload\.bogus: is not a known field"):
        load_spec(p)


def test_duplicate_keys_are_refused(tmp_path: Path) -> None:
    p = write(tmp_path, "name: a\nname: b\nworkload: {command: echo}\n")
    with pytest.raises(UserError, match=r":2: .*duplicate key 'name'"):
        load_spec(p)


def test_malformed_yaml_names_the_line(tmp_path: Path) -> None:
    p = write(tmp_path, "name: t\nworkload: [\n")
    with pytest.raises(UserError, match=r"job\.yaml:\d+: not valid YAML"):
        load_spec(p)


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="top level must be a mapping"):
        load_spec(write(tmp_path, "- a\n- b\n"))


@pytest.mark.parametrize(
    ("override", "check"),
    [
        ("resources.nodes=2", lambda s: s.resources.nodes == 2),
        ("resources.time=90", lambda s: s.resources.time == "01:30:00"),
        ("resources.mem=1.5G", lambda s: s.resources.mem == "1536M"),
        ("workload.args=[a, 'b c']", lambda s: s.workload.args == ["a", "b c"]),
        ("workload.env.X=1", lambda s: s.workload.env == {"X": "1"}),
    ],
)
def test_set_overrides(tmp_path: Path, override: str, check) -> None:  # type: ignore[no-untyped-def]
    spec = load_spec(write(tmp_path, MINIMAL), [override])
    assert check(spec)


def test_bad_override_names_the_override(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"--set resources\.nodes: resources\.nodes: must be >= 1"):
        load_spec(write(tmp_path, MINIMAL), ["resources.nodes=-1"])
    with pytest.raises(UserError, match="expected KEY=VALUE"):
        load_spec(write(tmp_path, MINIMAL), ["resources.nodes"])


def test_extends_merges_mappings_and_replaces_lists(tmp_path: Path) -> None:
    write(
        tmp_path,
        "name: base\nresources: {nodes: 2, cpus_per_task: 4}\n"
        "workload: {command: echo, args: [a, b]}\n",
        "base.yaml",
    )
    p = write(
        tmp_path, "extends: base.yaml\nname: child\nresources: {nodes: 1}\nworkload: {args: [c]}\n"
    )
    spec = load_spec(p)
    assert spec.name == "child"
    assert (spec.resources.nodes, spec.resources.cpus_per_task) == (1, 4)
    assert spec.workload.argv() == ["echo", "c"]


def test_extends_loop_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "extends: b.yaml\nname: a\n", "a.yaml")
    write(tmp_path, "extends: a.yaml\nname: b\n", "b.yaml")
    with pytest.raises(UserError, match="loop"):
        load_spec(tmp_path / "a.yaml")


def test_error_in_base_file_points_at_the_base(tmp_path: Path) -> None:
    write(tmp_path, "name: base\nresources:\n  nodes: -3\nworkload: {command: echo}\n", "base.yaml")
    p = write(tmp_path, "extends: base.yaml\nname: child\n")
    with pytest.raises(UserError, match=r"base\.yaml:3: resources\.nodes"):
        load_spec(p)


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("name", "'bad name'", "name: must be 1-63"),
        ("name", "'$(reboot)'", "name: must be 1-63"),
        ("resources", "{time: 'soon'}", "not a SLURM time"),
        ("resources", "{mem: 'lots'}", "not a memory size"),
        ("resources", "{constraint: 'a b'}", "characters sbatch cannot take"),
        ("artifacts", "['../secret']", "reaches outside"),
        ("artifacts", "['/etc/passwd']", "must be relative"),
        ("partition", "'gh;rm'", "characters sbatch cannot take"),
    ],
)
def test_values_refused(tmp_path: Path, field: str, value: str, needle: str) -> None:
    text = f"name: t\nworkload: {{command: echo}}\n{field}: {value}\n"
    if field == "name":
        text = f"name: {value}\nworkload: {{command: echo}}\n"
    with pytest.raises(UserError, match=needle):
        load_spec(write(tmp_path, text))


def test_env_names_are_checked_but_values_are_data(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="environment variable name"):
        load_spec(write(tmp_path, MINIMAL + "  env: {'A-B': x}\n"))
    spec = load_spec(write(tmp_path, MINIMAL + "  env: {A: \"$(rm -rf /); `x` 'q' \\n\"}\n"))
    assert spec.workload.env["A"] == "$(rm -rf /); `x` 'q' \n"


def test_huge_file_is_refused(tmp_path: Path) -> None:
    p = write(tmp_path, MINIMAL + "# " + "x" * (2 << 20) + "\n")
    with pytest.raises(UserError, match="larger than"):
        load_spec(p)


def test_shipped_smoke_spec_loads() -> None:
    spec = load_spec(REPO / "jobs" / "smoke.yaml")
    assert isinstance(spec, JobSpec)
    assert spec.container.runtime == "none"
