"""The `nemo` workload: Hydra overrides in Hydra's grammar, the typed knobs, refusals, and the
Unified-Memory bootstrap run for real (with the stand-in rmm/torch of tests/fixtures/fake_rmm)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.core.errors import UserError
from orchestrator.render.scripts import render_job
from orchestrator.site.cluster import load_cluster, validate_job
from orchestrator.spec.job import JobSpec, load_spec
from orchestrator.spec.nemo import UM_BOOTSTRAP, NemoWorkload, hydra_quote, hydra_value
from tests.unit.test_render import extract_files

REPO = Path(__file__).resolve().parents[2]
FAKE_RMM = REPO / "tests" / "fixtures" / "fake_rmm"
SCRIPT = "/opt/NeMo/examples/nlp/language_modeling/tuning/megatron_gpt_finetuning.py"


def nemo(**fields: object) -> NemoWorkload:
    return NemoWorkload.model_validate({"script": SCRIPT, **fields})


def words(**fields: object) -> list[str]:
    return nemo(trainer_from_resources=False, **fields).hydra_args()


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "null"),
        (True, "True"),
        (False, "False"),
        (4, "4"),
        (1.5e-4, "0.00015"),
        ("bf16-mixed", "bf16-mixed"),
        ("/data/x.jsonl", "/data/x.jsonl"),
        ("a b", "'a b'"),
        ("it's", "'it\\'s'"),
        ("k=v", "'k=v'"),
        ("a,b", "'a,b'"),
        ("[x]", "'[x]'"),
        ("true", "'true'"),  # a string that Hydra would read as a boolean
        ("null", "'null'"),
        ("32", "'32'"),  # a string that Hydra would read as a number
        ("", "''"),
        ("ends\\", "'ends\\\\'"),  # a backslash before the closing quote is doubled
        ("a\\b", "'a\\b'"),  # elsewhere it stays
        ("${oc.env:GH_RUN_ARTIFACTS}/nemo", "${oc.env:GH_RUN_ARTIFACTS}/nemo"),
        (["a", "b c", 1, None], "[a,'b c',1,null]"),
    ],
)
def test_hydra_values(value: object, text: str) -> None:
    assert hydra_value(value) == text


def test_hydra_quote_escapes_quotes() -> None:
    assert hydra_quote("He said 'hi'") == "'He said \\'hi\\''"


def test_override_forms_add_force_delete_and_nesting() -> None:
    got = words(
        overrides={
            "trainer.max_steps": 10,
            "model": {"data": {"train_ds": {"file_names": ["/d/train.jsonl"]}}},
            "+model.extra": "x y",
            "++model.maybe": False,
            "~model.gone": None,
            "~model.only_if": 3,
            "exp_manager.name": "my run",
        }
    )
    assert got == [
        "trainer.max_steps=10",
        "model.data.train_ds.file_names=[/d/train.jsonl]",
        "+model.extra='x y'",
        "++model.maybe=False",
        "~model.gone",
        "~model.only_if=3",
        "exp_manager.name='my run'",
    ]


def test_knobs_expand_to_the_seed_overrides() -> None:
    assert words(data_workers=4) == [
        "model.data.train_ds.num_workers=4",
        "model.data.validation_ds.num_workers=4",
    ]
    assert words(data_workers=4, data_workers_keys=["model.data.num_workers"]) == [
        "model.data.num_workers=4"
    ]
    assert words(cpu_offloading_layers=8) == [
        "model.activations_checkpoint_granularity=null",
        "+model.cpu_offloading=True",
        "+model.cpu_offloading_num_layers=8",
    ]
    assert words(peft_scheme="lora") == ["model.peft.peft_scheme=lora"]
    assert words(peft_scheme="none") == ["model.peft.peft_scheme=none"]
    assert words(precision="bf16-mixed") == ["trainer.precision=bf16-mixed"]
    assert words(precision="16-mixed") == ["trainer.precision=16-mixed"]
    assert words(precision="32") == ["trainer.precision=32"]
    fp8 = words(precision="bf16-mixed", fp8="hybrid")
    assert fp8[:5] == [
        "trainer.precision=bf16-mixed",
        "++model.transformer_engine=True",
        "++model.fp8=True",
        "++model.fp8_e4m3=False",
        "++model.fp8_hybrid=True",
    ]
    assert "++model.fp8_e4m3=True" in words(fp8="e4m3")


def test_trainer_devices_and_nodes_follow_resources_unless_overridden() -> None:
    assert nemo().hydra_args(nodes=2, devices=4) == ["trainer.devices=4", "trainer.num_nodes=2"]
    w = nemo(overrides={"trainer.devices": 1})
    assert w.hydra_args(nodes=2, devices=4) == ["trainer.devices=1", "trainer.num_nodes=2"]


def test_config_path_and_name_and_bootstrap_argv() -> None:
    w = nemo(config_path="/cfg", config_name="my cfg", trainer_from_resources=False)
    assert w.argv(bootstrap="/run/um_bootstrap.py") == [
        "python",
        "/run/um_bootstrap.py",
        SCRIPT,
        "--config-path=/cfg",
        "--config-name=my cfg",
    ]


@pytest.mark.parametrize(
    ("fields", "words_in_message"),
    [
        ({"overrides": {"model..x": 1}}, ["model..x", "not a Hydra key"]),
        ({"overrides": {"a=b": 1}}, ["'a=b'", "not a Hydra key"]),
        ({"overrides": {"model": {"+x": 1}}}, ["+model.x"]),
        ({"overrides": {"model.x": 1, "+model.x": 2}}, ["model.x is given twice"]),
        ({"overrides": {"model.x": "a\nb"}}, ["control character"]),
        ({"overrides": {"model.x": [{"a": 1}]}}, ["mapping inside a list"]),
        (
            {"peft_scheme": "lora", "overrides": {"model.peft.peft_scheme": "none"}},
            ["peft_scheme sets model.peft.peft_scheme", "keep one"],
        ),
        (
            {"data_workers": 2, "overrides": {"model.data.train_ds.num_workers": 4}},
            ["data_workers sets model.data.train_ds.num_workers"],
        ),
        ({"fp8": "hybrid", "precision": "32"}, ["fp8 needs mixed precision"]),
        ({"precision": "bf16"}, ["precision"]),
        ({"peft_scheme": "qlora"}, ["peft_scheme"]),
        ({"cpu_offloading_layers": 0}, ["cpu_offloading_layers"]),
        ({"data_workers": -1}, ["data_workers"]),
        ({"data_workers_keys": ["+model.x"]}, ["not a dotted Hydra key"]),
    ],
)
def test_refusals_name_the_field_and_the_fix(
    tmp_path: Path, fields: dict[str, object], words_in_message: list[str]
) -> None:
    import yaml

    spec = tmp_path / "job.yaml"
    spec.write_text(
        yaml.safe_dump({"name": "n", "workload": {"kind": "nemo", "script": SCRIPT, **fields}})
    )
    with pytest.raises(UserError) as exc:
        load_spec(spec)
    message = str(exc.value)
    assert message.startswith(f"{spec}:") or "job.yaml:" in message
    assert ": workload" in message
    for w in words_in_message:
        assert w in message, message


def test_knob_override_clash_names_both(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: n\nworkload:\n  kind: nemo\n  script: /s.py\n  cpu_offloading_layers: 8\n"
        "  overrides:\n    +model.cpu_offloading: false\n"
    )
    with pytest.raises(UserError, match=r"cpu_offloading_layers sets model.cpu_offloading"):
        load_spec(spec)


def test_variants_extend_the_base_and_differ_by_one_knob() -> None:
    os.environ.setdefault("SCRATCH", "/scratch/test")
    base = load_spec(REPO / "jobs" / "sft.yaml").workload
    assert isinstance(base, NemoWorkload)
    assert base.peft_scheme == "lora" and base.data_workers == 0
    expected = {
        "sft_workers4.yaml": {"data_workers": 4},
        "sft_offload.yaml": {"cpu_offloading_layers": 8},
        "sft_full.yaml": {"peft_scheme": "none"},
        "sft_full_um.yaml": {"peft_scheme": "none", "unified_memory": True},
        "sft_fp8.yaml": {"fp8": "hybrid"},
    }
    for name, diff in expected.items():
        w = load_spec(REPO / "jobs" / name).workload
        assert isinstance(w, NemoWorkload)
        changed = {k: v for k, v in w.model_dump().items() if v != base.model_dump()[k]}
        assert changed == diff, name
        assert w.overrides == base.overrides, name


def _nemo_job(tmp_path: Path, script: Path, overrides: dict[str, object], um: bool) -> JobSpec:
    return JobSpec.model_validate(
        {
            "name": "um",
            "resources": {"nodes": 1, "ntasks_per_node": 1},
            "workload": {
                "kind": "nemo",
                "python": sys.executable,
                "script": str(script),
                "overrides": overrides,
                "unified_memory": um,
                "trainer_from_resources": False,
            },
        }
    )


ECHO_SCRIPT = """\
import json, os, sys
print(json.dumps({"argv": sys.argv, "name": __name__, "path0": sys.path[0],
                  "torch_stand_in": getattr(sys.modules.get("torch"), "STAND_IN", False)}))
"""


def test_um_bootstrap_runs_the_script_with_arguments_intact(tmp_path: Path) -> None:
    """Render a nemo job with unified_memory, run the whole batch script (launcher direct), and
    read back what the script saw. The rmm/torch imported are the STAND-INs of
    tests/fixtures/fake_rmm, which log each call in order."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    script_dir = tmp_path / "app"
    script_dir.mkdir()
    script = script_dir / "train.py"
    script.write_text(ECHO_SCRIPT)
    overrides = {
        "model.name": "with spaces and 'quotes' and \"double\"",
        "+model.eq": "a=b=c",
        "~model.drop": None,
        "trainer.max_steps": 3,
        "model.list": ["x y", "z"],
        "model.shell": "$(touch /tmp/gh-run-pwned) `id`; rm -rf /",
    }
    spec = _nemo_job(tmp_path, script, overrides, um=True)
    cluster = load_cluster("dev")
    pn, part = validate_job(spec, cluster)
    rendered = render_job(spec, cluster, pn, part, "um-1", str(run_dir), "direct")
    assert extract_files(rendered.script)["um_bootstrap.py"] == UM_BOOTSTRAP
    (run_dir / "job.sbatch").write_text(rendered.script)
    log = tmp_path / "calls.jsonl"
    env = {**os.environ, "PYTHONPATH": str(FAKE_RMM), "FAKE_RMM_LOG": str(log)}
    res = subprocess.run(
        ["bash", str(run_dir / "job.sbatch")], capture_output=True, text=True, env=env, cwd=run_dir
    )
    assert res.returncode == 0, res.stderr
    seen = json.loads(res.stdout.strip().splitlines()[-1])
    expected_words = spec.workload.argv()[2:]  # type: ignore[union-attr]
    assert seen["argv"] == [str(script), *expected_words]
    assert "model.name='with spaces and \\'quotes\\' and \"double\"'" in seen["argv"]
    assert "+model.eq='a=b=c'" in seen["argv"] and "~model.drop" in seen["argv"]
    assert seen["name"] == "__main__"
    assert seen["path0"] == str(script_dir)
    assert seen["torch_stand_in"] is True
    assert not Path("/tmp/gh-run-pwned").exists()
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c["event"] for c in calls] == [
        "import rmm",
        "rmm.reinitialize",
        "import torch",
        "torch.cuda.memory.change_current_allocator",
    ]
    assert calls[1]["kwargs"] == {"pool_allocator": True, "managed_memory": True}
    assert calls[3]["allocator"] == "STAND-IN rmm_torch_allocator"
    # rmm came first: nothing but the interpreter's own start-up modules was imported before it
    assert "torch" not in calls[0]["modules"] and "runpy" not in calls[0]["modules"]
    assert "gh-run: Unified Memory on" in res.stderr
    assert (run_dir / "exit_code").read_text().strip() == "0"


def test_without_um_the_script_runs_directly(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    script = tmp_path / "train.py"
    script.write_text(ECHO_SCRIPT)
    spec = _nemo_job(tmp_path, script, {"a": "b c"}, um=False)
    cluster = load_cluster("dev")
    pn, part = validate_job(spec, cluster)
    rendered = render_job(spec, cluster, pn, part, "n-1", str(run_dir), "direct")
    assert "um_bootstrap.py" not in extract_files(rendered.script)
    (run_dir / "job.sbatch").write_text(rendered.script)
    res = subprocess.run(
        ["bash", str(run_dir / "job.sbatch")], capture_output=True, text=True, cwd=run_dir
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.strip().splitlines()[-1])["argv"] == [str(script), "a='b c'"]


def test_words_parse_back_with_hydras_own_parser() -> None:
    """When hydra-core is installed (it is not a gh-run dependency), Hydra's override parser
    reads every word back to the value we meant."""
    parser_mod = pytest.importorskip("hydra.core.override_parser.overrides_parser")
    parser = parser_mod.OverridesParser.create()
    meant: dict[str, object] = {
        "a": "x y",
        "b": "it's",
        "c": None,
        "d": [1, "x y", True, "q'uote"],
        "e": "true",
        "f": "a=b,c",
        "g": "ends\\",
        "h": "",
        "i": 1.5e-4,
        "j": 'say "hi"',
    }
    w = nemo(overrides=meant, trainer_from_resources=False)
    for word, value in zip(w.hydra_args(), meant.values(), strict=True):
        assert parser.parse_override(word).value() == value, word
