"""Job spec loading: strict fields, readable errors with file/field/line, overrides, extends."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.core.errors import UserError
from orchestrator.spec.job import JobSpec, load_spec

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


def test_unknown_key_is_refused_with_its_line_and_the_known_keys(tmp_path: Path) -> None:
    p = write(tmp_path, MINIMAL + "  bogus: 1\n")
    with pytest.raises(UserError) as exc:
        load_spec(p)
    assert str(exc.value) == (
        f"{p}:4: workload.bogus: unknown key 'bogus'; remove it or use one of: "
        "env, secret_env, workdir, distributed_env, kind, command, args"
    )


def test_misspelt_key_gets_the_right_spelling_in_one_line(tmp_path: Path) -> None:
    # `cmd` is unknown and therefore `command` is missing: one line, the typo first.
    p = write(tmp_path, "name: t\nworkload:\n  cmd: echo\n")
    with pytest.raises(UserError) as exc:
        load_spec(p)
    assert str(exc.value) == (
        f"{p}:3: workload.cmd: unknown key 'cmd'; rename it to 'command' or remove it "
        "(also: workload.command is required)"
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "resources: {nodes: abc}",
            "resources.nodes: expected a whole number, got 'abc'; write a number such as 2",
        ),
        (
            "resources: {nodes: 1.5}",
            "resources.nodes: expected a whole number, got 1.5; write a whole number such as 2",
        ),
        ("resources: {exclusive: maybe}", "expected true or false, got 'maybe'; write true or"),
        (
            "resources: [1, 2]",
            "resources: expected a mapping, got a list; write it as `key: value`",
        ),
        ("retries: {max: 99}", "retries.max: must be <= 20 (got 99); set it to 20 or less"),
        ("retries: {on: [DONE]}", "retries.on.0: 'DONE' is not one of the choices; use one of: "),
        ("resources: {gpus_per_node: -1}", "must be >= 0 (got -1); set it to 0 or more"),
    ],
)
def test_pydantic_errors_carry_a_fix(tmp_path: Path, body: str, expected: str) -> None:
    p = write(tmp_path, MINIMAL + body + "\n")
    with pytest.raises(UserError) as exc:
        load_spec(p)
    message = str(exc.value)
    assert f"{p}:4: " in message and expected in message, message
    assert "\n" not in message and "Input should" not in message


def test_unknown_workload_kind_names_kind_and_choices(tmp_path: Path) -> None:
    p = write(tmp_path, "name: t\nworkload:\n  kind: magic\n  command: x\n")
    with pytest.raises(UserError) as exc:
        load_spec(p)
    assert str(exc.value) == (
        f"{p}:3: workload.kind: unknown kind 'magic'; use one of: command, nemo"
    )


def test_model_level_error_is_reported_at_the_field_it_names(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        MINIMAL + "resources: {time: '00:05:00'}\nretries:\n  max: 1\n  signal_seconds: 600\n",
    )
    with pytest.raises(UserError) as exc:
        load_spec(p)
    assert str(exc.value).startswith(f"{p}:7: retries.signal_seconds (600) is not shorter")


def test_an_unknown_key_with_a_newline_stays_on_one_line(tmp_path: Path) -> None:
    p = write(tmp_path, MINIMAL + '"a\\nb": 1\n')
    with pytest.raises(UserError) as exc:
        load_spec(p)
    assert "\n" not in str(exc.value)
    assert "unknown key 'a\\nb'" in str(exc.value)


def test_a_field_named_like_a_union_tag_keeps_its_name() -> None:
    """`command` is a workload kind (a tag pydantic puts into error locations) and also an
    ordinary field name elsewhere (notify.command): only the tag is dropped."""
    from typing import Annotated, Literal

    from pydantic import Field

    from orchestrator.core.base import Strict
    from orchestrator.spec import yamlio

    class Cmd(Strict):
        kind: Literal["command"] = "command"
        command: str

    class Other(Strict):
        kind: Literal["other"]
        x: int

    class Notify(Strict):
        command: list[str]

    class Top(Strict):
        workload: Annotated[Cmd | Other, Field(discriminator="kind")]
        notify: Notify

    doc = yamlio.parse_text("workload: {kind: command, command: 1}\nnotify: {command: x}\n", "t")
    with pytest.raises(UserError) as exc:
        yamlio.to_model(doc, Top)
    message = str(exc.value)
    assert message.startswith("t:1: workload.command: expected text, got 1; put it in quotes")
    assert "notify.command expected a list" in message, message


@pytest.mark.parametrize(
    ("text", "fix"),
    [
        ("name: t\nworkload:\n\tcommand: x\n", "indent that line with spaces, not tabs"),
        ("name: a: b\n", "quote the value at that line if it holds ': '"),
        ("name: !!python/object/apply:os.system [id]\n", "remove the tag at that line"),
        ("name: [a\n", "fix the syntax at that line"),
    ],
)
def test_yaml_errors_carry_a_fix(tmp_path: Path, text: str, fix: str) -> None:
    with pytest.raises(UserError) as exc:
        load_spec(write(tmp_path, text))
    assert "not valid YAML" in str(exc.value) and f"; {fix}" in str(exc.value), str(exc.value)


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


def test_a_parse_its_caller_changed_leaves_the_next_parse_of_the_text_as_written() -> None:
    # parse_text keeps one parse per text: each caller gets its own copy to change
    from orchestrator.spec import yamlio

    text = "name: t\nlist: [1, 2]\nm: &a {k: v}\nn: *a\n"
    first = yamlio.parse_text(text, "x.yaml")
    first.data["list"].append(3)
    first.data["m"]["k"] = "changed"
    first.where.clear()
    again = yamlio.parse_text(text, "x.yaml")
    assert again.data == {"name": "t", "list": [1, 2], "m": {"k": "v"}, "n": {"k": "v"}}
    assert again.data["m"] is again.data["n"]  # an alias is one value, as YAML builds it
    assert again.locate(["list"]) == "x.yaml:2"
    assert yamlio.parse_text(text, "y.yaml").locate(["list"]) == "y.yaml:2"
