"""Property-based tests (hypothesis): whatever a spec holds, loading raises at most a UserError,
every rendered script passes `bash -n`, and names, args and environment values (any printable
unicode: quotes, $(), backticks, newlines, ;, Jinja) reach the job byte for byte.

The byte-for-byte check runs generated specs as real jobs: here through the local executor
(the very script SLURM would run), and a sample of 5 on the real dev cluster in
tests/integration/test_lifecycle.py::test_generated_values_arrive_intact_on_slurm.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.core.errors import UserError
from orchestrator.executors.choose import choose_executor
from orchestrator.executors.local import LocalExecutor
from orchestrator.render.scripts import render_job
from orchestrator.runs import lifecycle as runs
from orchestrator.site.cluster import load_cluster, validate_job
from orchestrator.spec import yamlio
from orchestrator.spec.job import JobSpec
from orchestrator.store.db import Store
from tests.budget import examples

# Any unicode a YAML file can carry, minus NUL (refused with a clear error) and surrogates.
TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    max_size=40,
)
NASTY = st.sampled_from(
    ["'", '"', "$(id)", "`id`", "\n", ";", "&&", "|", "\\", "{{ x }}", "{% if %}", "$HOME", "\t"]
)
VALUE = st.one_of(TEXT, st.lists(st.one_of(NASTY, TEXT), max_size=5).map("".join))
NAME = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.-]{0,20}\Z")
ENV_SUFFIX = st.from_regex(r"\A[A-Z0-9_]{1,8}\Z")

ECHO = (
    'printf "%s\\0" "$@" > "$GH_RUN_ARTIFACTS/args.bin"; '
    ': > "$GH_RUN_ARTIFACTS/env.bin"; '
    'for n in $GHT_NAMES; do printf "%s\\0" "${!n}" >> "$GH_RUN_ARTIFACTS/env.bin"; done'
)


@st.composite
def echo_specs(draw: st.DrawFn) -> dict[str, Any]:
    """A valid spec whose job writes its args and env values back, NUL-separated."""
    args = draw(st.lists(VALUE, max_size=6))
    suffixes = draw(st.lists(ENV_SUFFIX, max_size=5, unique=True))
    env = {f"GHT_{s}": draw(VALUE) for s in suffixes}
    env["GHT_NAMES"] = " ".join(env)
    return {
        "name": draw(NAME),
        "cluster": "dev",
        "workload": {"command": "bash", "args": ["-c", ECHO, "argv0", *args], "env": env},
        "artifacts": ["*.bin"],
    }


# Specs are written with non-ASCII escaped ("\u2028"): YAML itself reads a raw U+0085, U+2028
# or U+2029 inside a scalar as a line break, so a file can only carry them escaped.


def _load(text: str) -> JobSpec:
    return yamlio.to_model(yamlio.parse_text(text, "gen.yaml"), JobSpec)


ANY_YAML = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), TEXT),
    lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(TEXT, kids, max_size=4)),
    max_leaves=20,
)
SPEC_KEYS = st.sampled_from(
    ["name", "cluster", "partition", "resources", "workload", "artifacts", "retries", "container"]
)


@settings(max_examples=examples(200), deadline=None)
@given(st.dictionaries(SPEC_KEYS, ANY_YAML, max_size=6))
def test_loading_anything_raises_only_user_error(data: dict[str, Any]) -> None:
    text = yaml.safe_dump(data, allow_unicode=True)
    try:
        _load(text)
    except UserError as exc:
        assert "gen.yaml" in str(exc) and "Traceback" not in str(exc)


@settings(max_examples=examples(200), deadline=None)
@given(TEXT)
def test_parsing_any_text_raises_only_user_error(text: str) -> None:
    try:
        _load(text)
    except UserError as exc:
        assert str(exc).startswith("gen.yaml")


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(echo_specs())
def test_every_rendered_script_passes_bash_n(spec_data: dict[str, Any]) -> None:
    spec = _load(yaml.safe_dump(spec_data, allow_unicode=False))
    assert spec.workload.args == spec_data["workload"]["args"]
    assert spec.workload.env == spec_data["workload"]["env"]
    cluster = load_cluster("dev")
    part_name, part = validate_job(spec, cluster)
    for launcher in ("srun", "direct"):
        rendered = render_job(spec, cluster, part_name, part, "r-1", "/tmp/r-1", launcher)
        res = subprocess.run(
            ["bash", "-n"], input=rendered.script, capture_output=True, text=True, check=False
        )
        assert res.returncode == 0, res.stderr


def nul_split(data: bytes) -> list[str]:
    if not data:
        return []
    assert data.endswith(b"\0")
    return [x.decode("utf-8") for x in data[:-1].split(b"\0")]


def submit_generated(
    spec_data: dict[str, Any], home: Path, tmp: Path, executor: str
) -> tuple[Store, str]:
    path = tmp / "gen.yaml"
    path.write_text(yaml.safe_dump(spec_data, allow_unicode=False), encoding="utf-8")
    store = Store(home)
    prep = runs.prepare(path)
    ex = LocalExecutor() if executor == "local" else choose_executor("slurm")
    run = runs.submit(store, prep, ex, home)
    return store, run.run_id


def check_echoed(store: Store, run_id: str, spec_data: dict[str, Any], home: Path) -> None:
    run = store.get_run(run_id)
    assert run.state == "COMPLETED", (run.state, run.reason)
    runs.collect(store, run, home)
    art = home / "artifacts" / run_id / "artifacts"
    args = spec_data["workload"]["args"][3:]
    # printf '%s\0' with no arguments still prints one empty field.
    assert nul_split((art / "args.bin").read_bytes()) == (args or [""])
    env = spec_data["workload"]["env"]
    names = env["GHT_NAMES"].split()
    assert nul_split((art / "env.bin").read_bytes()) == [env[n] for n in names]


@settings(
    max_examples=examples(8),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(spec_data=echo_specs())
def test_values_arrive_intact_local(spec_data: dict[str, Any], tmp_path_factory: Any) -> None:
    tmp = tmp_path_factory.mktemp("gen")
    home = tmp / "home"
    store, run_id = submit_generated(spec_data, home, tmp, "local")
    runs.wait(store, [store.get_run(run_id)], min_interval=0.1, max_interval=0.3)
    check_echoed(store, run_id, spec_data, home)


@pytest.mark.parametrize("value", ["$(touch /tmp/gh-run-pwned)", "a'b\"c`d`;e\nf", "{{ 7*7 }}"])
def test_secret_never_written(value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """secret_env passes a variable by name: its value reaches the job, never a file of ours."""
    secret = f"s3cr3t-{value}-HF"
    monkeypatch.setenv("GHT_SECRET", secret)
    spec_path = tmp_path / "secret.yaml"
    spec_path.write_text(
        yaml.safe_dump(
            {
                "name": "secret",
                "cluster": "dev",
                "workload": {
                    "command": "bash",
                    "args": ["-c", 'printf "%s" "$GHT_SECRET" | sha256sum > "$GH_RUN_ARTIFACTS/h"'],
                    "secret_env": ["GHT_SECRET"],
                },
                "artifacts": ["h"],
            }
        )
    )
    home = tmp_path / "home"
    store = Store(home)
    run = runs.submit(store, runs.prepare(spec_path), LocalExecutor(), home)
    [run] = runs.wait(store, [run], min_interval=0.1, max_interval=0.3)
    assert run.state == "COMPLETED"
    runs.collect(store, run, home)
    import hashlib

    got = (home / "artifacts" / run.run_id / "artifacts" / "h").read_text().split()[0]
    assert got == hashlib.sha256(secret.encode()).hexdigest()
    needle = secret.encode()
    for path in [*home.rglob("*"), Path(run.run_dir) / "job.sbatch"]:
        if path.is_file():
            assert needle not in path.read_bytes(), f"the secret leaked into {path}"


def test_missing_secret_refused_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GHT_ABSENT", raising=False)
    spec_path = tmp_path / "s.yaml"
    spec_path.write_text(
        "name: s\ncluster: dev\nworkload: {command: 'true', secret_env: [GHT_ABSENT]}\n"
    )
    home = tmp_path / "home"
    store = Store(home)
    with pytest.raises(UserError, match=r"workload\.secret_env: GHT_ABSENT is not set"):
        runs.submit(store, runs.prepare(spec_path), LocalExecutor(), home)
    assert store.list_runs() == [] and not (home / "runs").exists()


def test_user_only_modes(tmp_path: Path) -> None:
    spec_path = tmp_path / "m.yaml"
    spec_path.write_text("name: m\ncluster: dev\nworkload: {command: 'true'}\n")
    home = tmp_path / "home"
    store = Store(home)
    run = runs.submit(store, runs.prepare(spec_path), LocalExecutor(), home)
    runs.wait(store, [run], min_interval=0.1, max_interval=0.3)
    mode = lambda p: p.stat().st_mode & 0o777  # noqa: E731
    assert mode(home) == 0o700
    assert mode(home / "state.db") == 0o600
    run_dir = Path(run.run_dir)
    assert mode(run_dir) == 0o700 and mode(run_dir / "artifacts") == 0o700
    assert mode(run_dir / "job.sbatch") == 0o700
    assert mode(run_dir / "spec.lock.yaml") == 0o600
    assert not mode(run_dir / "task.sh") & 0o077


def test_retry_policy_decisions() -> None:
    from orchestrator.runs.retry import decide
    from orchestrator.spec.job import Retries

    pol = Retries.model_validate({"max": 2, True: ["NODE_FAIL", "TIMEOUT"]})  # YAML's `on`
    assert pol.on == ["NODE_FAIL", "TIMEOUT"]
    assert decide(pol, "FAILED", 0, back_in_queue=False).action == "none"
    assert decide(pol, "NODE_FAIL", 0, back_in_queue=True).action == "requeued"
    assert decide(pol, "TIMEOUT", 1, back_in_queue=False).action == "resubmit"
    assert decide(pol, "TIMEOUT", 2, back_in_queue=False).action == "exhausted"
    assert decide(Retries(), "NODE_FAIL", 0, back_in_queue=False).action == "none"


def test_only_the_controllers_restart_count_proves_a_requeue() -> None:
    from orchestrator.runs.retry import requeue_of

    def seen(held: tuple[str, int] | None, recorded: int) -> tuple[bool, str] | None:
        r = requeue_of(held, recorded)
        return None if r is None else (r.new, r.state)

    # SLURM requeued it: scontrol's Restarts passed the requeues already recorded.
    assert seen(("PENDING", 1), 0) == (True, "PENDING")
    assert seen(("RUNNING", 2), 1) == (True, "RUNNING")  # started again before the poll
    assert seen(("REQUEUE_HOLD", 1), 0) == (True, "PENDING")
    # That requeue is recorded already: accounting's NODE_FAIL or PENDING is of the attempt
    # before, not a new end.
    assert seen(("PENDING", 1), 1) == (False, "PENDING")
    assert seen(("RUNNING", 1), 1) == (False, "RUNNING")
    # Accounting said PENDING after RUNNING, but the controller never requeued the job
    # (slurmdbd answers for an older moment); a job that ended on a failed node lingers
    # COMPLETING; one the controller no longer holds.
    assert seen(("RUNNING", 0), 0) is None
    assert seen(("COMPLETING", 1), 0) is None
    assert seen(("NODE_FAIL", 1), 0) is None
    assert seen(("COMPLETED", 0), 0) is None
    assert seen(None, 0) is None


def test_local_timeout_is_retried_once_then_kept(tmp_path: Path) -> None:
    spec_path = tmp_path / "t.yaml"
    spec_path.write_text(
        "name: t\ncluster: dev\nresources: {time: '00:00:02'}\n"
        "workload: {command: bash, args: [-c, 'sleep 30']}\n"
        "retries: {max: 1, on: [TIMEOUT]}\n"
    )
    home = tmp_path / "home"
    store = Store(home)
    prep = runs.prepare(spec_path)
    ex = LocalExecutor(time_limit="00:00:02")
    run = runs.submit(store, prep, ex, home)
    [run] = runs.wait(store, [run], min_interval=0.2, max_interval=0.5, timeout=60)
    assert run.state == "TIMEOUT" and run.attempt == 1
    details = [e.detail or "" for e in store.events(run.run_id)]
    assert sum("resubmitted as job" in d for d in details) == 1
    assert any("retry limit reached" in d for d in details)


# --- Cluster files and campaign files: the same promise as job specs --------------------------
# Arbitrary documents fail at the first field; documents one to four edits away from a valid
# file reach every validator, the expansion of a campaign and the checks of its variants.

REPO = Path(__file__).resolve().parents[2]
SMOKE = str(REPO / "jobs" / "smoke.yaml")
VALID_CLUSTER: dict[str, Any] = yaml.safe_load((REPO / "clusters" / "dev.yaml").read_text())
VALID_CAMPAIGN: dict[str, Any] = {
    "name": "gen",
    "description": "generated",
    "job": SMOKE,
    "set": ["workload.env.GHT_ALL=1"],
    "matrix": {
        "mem": {"small": ["resources.mem=256M"], "big": ["resources.mem=300M"]},
        "w": {"w0": ["workload.env.W=0"], "w2": "workload.args+=[x]"},
    },
    "include": [{"name": "extra", "set": ["resources.nodes=2"]}],
    "exclude": [{"mem": "big", "w": "w2"}],
    "variant_name": "{mem}-{w}",
    "max_parallel": 2,
    "executor": "local",
    "schedule": {"cron": "0 2 * * 1-5", "tz": "Europe/Zurich", "mode": "slurm"},
    "baseline": {"policy": "pinned", "campaign_id": "gen-20260101-020000-ab12"},
    "thresholds": {"step_time_s": {"increase_pct": 5}, "gpu_idle_pct": {"increase_points": 3}},
    "notify": {"command": ["echo", "{report}"], "when": "always", "timeout_s": 5},
}
KEYS = st.one_of(
    TEXT,
    st.sampled_from(
        [
            *("name", "job", "matrix", "set", "kind", "tz", "cron", "policy", "partitions"),
            *("gh", "max_nodes", "launcher", "env", "increase_pct", "command", "exclude"),
            "campaign_id",
        ]
    ),
)
VALUES = st.one_of(
    ANY_YAML,
    NASTY,
    st.sampled_from(
        [
            *("America", "a" * 300, "*/0 * * * *", "61 * * * *", "{x}", "{}", "{0}", "{a.b}"),
            *("resources.nodes=two", "workload.args+=1", "a..b=1", "=", "x+=", "gh", "srun"),
            *(-1, 0, 2**63, 1e308, "00:00:00", "4000M", "9999999T", "../../etc/passwd"),
        ]
    ),
)


def _containers(doc: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of every mapping and list inside `doc` (itself included)."""
    out = [path] if isinstance(doc, dict | list) else []
    items = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    )
    for k, v in items:
        out += _containers(v, (*path, k))
    return out


@st.composite
def edited(draw: st.DrawFn, valid: dict[str, Any]) -> dict[str, Any]:
    """`valid` after 1-4 random edits: a value replaced, a key deleted or a key added."""
    import copy

    doc = copy.deepcopy(valid)
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(_containers(doc)))
        node: Any = doc
        for part in path:
            node = node[part]
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if isinstance(node, dict):
            if action == "add" or not node:
                node[draw(KEYS)] = draw(VALUES)
            else:
                key = draw(st.sampled_from(sorted(node, key=str)))
                if action == "delete":
                    del node[key]
                else:
                    node[key] = draw(VALUES)
        elif isinstance(node, list):
            if action == "add" or not node:
                node.append(draw(VALUES))
            else:
                i = draw(st.integers(0, len(node) - 1))
                if action == "delete":
                    del node[i]
                else:
                    node[i] = draw(VALUES)
    return doc


def _write(folder: Path, name: str, data: object) -> Path:
    """As a user writes it: keys in the order given (the matrix order is the variants' order)."""
    path = folder / name
    path.write_text(yaml.safe_dump(data, allow_unicode=False, sort_keys=False), encoding="utf-8")
    return path


def test_the_valid_starting_points_are_valid(tmp_path: Path) -> None:
    """The edited documents start from files that load: otherwise every edit is moot."""
    from orchestrator.campaign import expand, load_campaign

    assert load_cluster(str(_write(tmp_path, "c.yaml", VALID_CLUSTER))).partitions
    campaign = load_campaign(_write(tmp_path, "k.yaml", VALID_CAMPAIGN))
    assert [v.name for v in expand(campaign)] == ["small-w0", "small-w2", "big-w0", "extra"]


@settings(max_examples=examples(300), deadline=None)
@given(data=st.one_of(edited(VALID_CLUSTER), st.dictionaries(KEYS, ANY_YAML, max_size=5)))
def test_loading_any_cluster_file_raises_only_user_error(
    data: dict[str, Any], tmp_path_factory: Any
) -> None:
    path = _write(tmp_path_factory.mktemp("cl"), "gen-cluster.yaml", data)
    try:
        cluster = load_cluster(str(path))
    except UserError as exc:
        assert "gen-cluster.yaml" in str(exc) and "\n" not in str(exc), str(exc)
    else:
        assert cluster.partitions and cluster.default_partition in cluster.partitions


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(edited(VALID_CAMPAIGN), st.dictionaries(KEYS, ANY_YAML, max_size=5)))
def test_loading_any_campaign_file_raises_only_user_error(
    data: dict[str, Any], tmp_path_factory: Any
) -> None:
    """Load, expand and check every variant against its job and cluster: what `campaign run`
    does before it writes anything."""
    from orchestrator.campaign import expand, load_campaign
    from orchestrator.campaign.submission import prepare_variants

    path = _write(tmp_path_factory.mktemp("camp"), "gen-campaign.yaml", data)
    try:
        campaign = load_campaign(path)
        variants = expand(campaign, "gen-campaign.yaml")
        prepare_variants(campaign, path, (), path.parent)
    except UserError as exc:
        assert "gen-campaign.yaml" in str(exc) and "\n" not in str(exc), str(exc)
    else:
        assert variants and len({v.name for v in variants}) == len(variants)


# Value labels without '-' joined by '-' can never make two matrix points the same name; include
# names carry an upper-case letter, which no generated label has.
LABEL = st.from_regex(r"\A[a-z0-9][a-z0-9_.]{0,7}\Z")
AXIS = st.from_regex(r"\A[a-z][a-z0-9_]{0,7}\Z")
INCLUDE_NAME = st.from_regex(r"\AInc[A-Za-z0-9_.-]{0,10}\Z")


@st.composite
def valid_campaigns(draw: st.DrawFn) -> dict[str, Any]:
    axes = draw(st.lists(AXIS, min_size=1, max_size=3, unique=True))
    matrix = {
        axis: {
            label: [f"workload.env.GHT_{i}_{j}=v{j}"]
            for j, label in enumerate(draw(st.lists(LABEL, min_size=1, max_size=3, unique=True)))
        }
        for i, axis in enumerate(axes)
    }
    doc: dict[str, Any] = {"name": draw(NAME), "job": SMOKE, "matrix": matrix}
    if draw(st.booleans()):
        doc["set"] = ["workload.env.GHT_ALL=1"]
    if draw(st.booleans()):
        doc["variant_name"] = "v-" + "-".join(f"{{{a}}}" for a in axes)
    exclude = []
    for _ in range(draw(st.integers(0, 2))):
        picked = draw(st.lists(st.sampled_from(axes), min_size=1, max_size=len(axes), unique=True))
        exclude.append({a: draw(st.sampled_from(sorted(matrix[a]))) for a in picked})
    if exclude:
        doc["exclude"] = exclude
    names = draw(st.lists(INCLUDE_NAME, max_size=2, unique=True))
    if names:
        doc["include"] = [{"name": n, "set": ["resources.mem=300M"]} for n in names]
    return doc


def _expected_names(doc: dict[str, Any]) -> list[str]:
    """The variant names, computed here without the model: product order, minus excludes."""
    import itertools

    axes = list(doc["matrix"])
    out = []
    for combo in itertools.product(*(list(doc["matrix"][a]) for a in axes)):
        point = dict(zip(axes, combo, strict=True))
        if any(all(point[a] == v for a, v in ex.items()) for ex in doc.get("exclude", [])):
            continue
        out.append(("v-" if "variant_name" in doc else "") + "-".join(combo))
    return out + [inc["name"] for inc in doc.get("include", [])]


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=valid_campaigns())
def test_valid_campaigns_expand_deterministically_to_unique_names(
    data: dict[str, Any], tmp_path_factory: Any
) -> None:
    from orchestrator.campaign import expand, load_campaign
    from orchestrator.campaign.submission import prepare_variants

    folder = tmp_path_factory.mktemp("camp")
    path = _write(folder, "ok.yaml", data)
    expected = _expected_names(data)
    if not expected:
        with pytest.raises(UserError, match="exclude removes every variant"):
            expand(load_campaign(path), "ok.yaml")
        return
    first = expand(load_campaign(path), "ok.yaml")
    again = expand(load_campaign(_write(folder, "again.yaml", data)), "again.yaml")
    assert first == again  # the same file always gives the same plan, in the same order
    names = [v.name for v in first]
    assert names == expected
    assert len(set(names)) == len(names)
    for v in first:
        labels = dict(v.labels)
        axis_overrides = [x for a, label in labels.items() for x in data["matrix"][a][label]]
        assert list(v.overrides) == data.get("set", []) + (
            axis_overrides or next(i["set"] for i in data["include"] if i["name"] == v.name)
        )
    # And every variant is a valid job for the dev cluster (what `campaign run` checks first).
    prepared = prepare_variants(load_campaign(path), path, (), folder)
    assert [name for name, _, _ in prepared] == names
