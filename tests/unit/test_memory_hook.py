"""The in-job memory hook (orchestrator/nsys/memory_hook.py, memory_sitecustomize.py) and what
puts it in a job (profile.memory, memory_collect.py, task.sh): off unless asked, the image's own
sitecustomize still runs, no CUDA initialised by the hook, the step marks from outside the
workload, dumps written whole with names the collection and the analysis know.

CUDA does not exist here: the parts that need it (the allocator's history, its snapshot, the
out-of-memory observer) run against a stand-in torch namespace in the dump tests, named so;
the real recordings (tests/data/memory_h200) are what they produce on a GPU."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest

from orchestrator.core import memory_files
from orchestrator.core.errors import UserError
from orchestrator.nsys import memory_collect, memory_hook
from orchestrator.nsys.profile import ProfileSpec
from orchestrator.spec.job import load_spec

REPO = Path(__file__).resolve().parents[2]


def hook_dir(tmp: Path) -> Path:
    """The hook's folder as a job's run folder holds it."""
    d = tmp / memory_collect.HOOK_FOLDER
    d.mkdir(parents=True)
    for name, text in memory_collect.hook_sources().items():
        (tmp / name).write_text(text)
    return d


def run_python(code: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**os.environ, **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_loader_chains_the_images_own_sitecustomize_and_installs_the_hook(
    tmp_path: Path,
) -> None:
    # the hook runs torch in a child process (scripts/test-pythons.sh leaves out the files that
    # need torch: the extra interpreters' venvs have none)
    pytest.importorskip("torch")
    hook = hook_dir(tmp_path / "run")
    image = tmp_path / "image"
    image.mkdir()
    (image / "sitecustomize.py").write_text("import os\nos.environ['IMAGE_SITE'] = 'ran'\n")
    out = tmp_path / "out"
    res = run_python(
        """
        import os, sys
        import gh_run_memory_hook as h
        r = h.RECORDER
        print("image", os.environ.get("IMAGE_SITE"))
        print("mode", r.mode, r.max_events, r.dump_at, r.out_dir)
        import torch
        print("backward wrapped", getattr(torch.autograd.backward, "_gh_run_memory", False))
        print("cuda initialised", torch.cuda.is_initialized())
        r.started = True  # what CUDA's initialisation does; here, by hand
        m = torch.nn.Linear(4, 4)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        r._arm_forward()
        for _ in range(2):
            opt.zero_grad()
            m(torch.randn(2, 4)).sum().backward()
            opt.step()
        print("marks", [k for _, k, _ in r.marks])
        r.started = False
        """,
        {
            "PYTHONPATH": f"{hook}{os.pathsep}{image}",
            "GH_RUN_MEMORY": "snapshot",
            "GH_RUN_MEMORY_DIR": str(out),
            "GH_RUN_MEMORY_MAX_EVENTS": "5000",
        },
        tmp_path,
    )
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert "image ran" in lines, res.stdout
    assert f"mode snapshot 5000 exit {out}" in lines
    assert "backward wrapped True" in lines and "cuda initialised False" in lines
    step = ["fwd_begin", "bwd_begin", "bwd_end", "opt_begin", "opt_end"]
    assert f"marks {step * 2}" in lines, res.stdout
    assert not out.exists()  # nothing recorded: no CUDA here
    assert "gh-run memory hook" not in res.stderr, res.stderr


def test_off_unless_asked(tmp_path: Path) -> None:
    hook = hook_dir(tmp_path / "run")
    for mode in ("", "off"):
        res = run_python(
            "import sys; print('gh_run_memory_hook' in sys.modules)",
            {"PYTHONPATH": str(hook), "GH_RUN_MEMORY": mode},
            tmp_path,
        )
        assert res.returncode == 0 and res.stdout.strip() == "False", res
    res = run_python("pass", {"PYTHONPATH": str(hook), "GH_RUN_MEMORY": "all"}, tmp_path)
    assert res.returncode == 0 and "is not one of timeline, snapshot" in res.stderr


def test_settings_from_the_environment() -> None:
    assert memory_hook.settings({}) is None
    got = memory_hook.settings(
        {"GH_RUN_MEMORY": "timeline", "GH_RUN_MEMORY_DIR": "/d", "GH_RUN_MEMORY_MAX_EVENTS": "7"}
    )
    assert got == ("timeline", "/d", 7, "exit")
    bad = memory_hook.settings({"GH_RUN_MEMORY": "snapshot", "GH_RUN_MEMORY_MAX_EVENTS": "-1"})
    assert bad is not None and bad[2] == memory_hook.DEFAULT_MAX_EVENTS


def fake_torch(snapshot: dict[str, Any], devices: int = 1) -> Any:
    """A STAND-IN torch namespace with what the hook's dumps call (no CUDA here)."""

    def props(i: int) -> Any:
        return types.SimpleNamespace(name="stand-in GPU", total_memory=80 << 30)

    cuda = types.SimpleNamespace(
        memory=types.SimpleNamespace(_snapshot=lambda: dict(snapshot)),
        device_count=lambda: devices,
        get_device_properties=props,
        get_per_process_memory_fraction=lambda i: 0.5,
        memory_stats=lambda i: {"allocated_bytes.all.current": 3, "reserved_bytes.all.current": 4},
    )
    return types.SimpleNamespace(cuda=cuda, __version__="stand-in")


def test_an_out_of_memory_writes_its_note_then_its_snapshot(tmp_path: Path) -> None:
    r = memory_hook.Recorder("snapshot", str(tmp_path), 1000, "exit")
    r.torch = fake_torch({"segments": [], "device_traces": [[]]})
    r.started = True
    r.on_oom(0, 123, 456, 789)
    r.on_oom(0, 124, 456, 789)  # a second one: counted, not dumped again
    r.at_exit()  # no step after the out of memory: that dump is the story
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["memory-oom.rank0.pickle", "oom.rank0.json"]
    assert memory_files.dump_rank(names[0]) == (0, True)
    assert all(memory_files.is_memory_file(f"memory/{n}") for n in names)
    note = json.loads((tmp_path / "oom.rank0.json").read_text())
    assert note["requested_bytes"] == 123 and note["device_free_bytes"] == 789
    snap = pickle.loads((tmp_path / "memory-oom.rank0.pickle").read_bytes())
    hook = snap["gh_run"]
    assert hook["reason"] == "oom" and hook["oom"]["requested_bytes"] == 123
    assert [k for _, k, _ in hook["marks"]] == ["oom"]
    assert hook["devices"][0]["memory_fraction"] == 0.5
    assert r.ooms == 2


def test_the_exit_dump_once_and_a_second_process_of_a_rank_keeps_its_own(tmp_path: Path) -> None:
    for _ in range(2):
        r = memory_hook.Recorder("timeline", str(tmp_path), 1000, "exit")
        r.torch = fake_torch({"segments": [], "device_traces": [[]]})
        r.started = True
        r.at_exit()
        r.at_exit()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names[0] == "memory.rank0.pickle" and names[1].startswith("memory.rank0.pid")
    assert len(names) == 2
    assert all(memory_files.dump_rank(n) == (0, False) for n in names)


def test_a_failing_snapshot_is_said_and_never_raised(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = memory_hook.Recorder("snapshot", str(tmp_path), 1000, "exit")

    def boom() -> dict[str, Any]:
        raise RuntimeError("no allocator")

    r.torch = fake_torch({})
    r.torch.cuda.memory._snapshot = boom
    r.started = True
    r.at_exit()
    assert "the exit snapshot failed (RuntimeError: no allocator)" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


# ---- profile.memory in a job
def _spec(tmp: Path, profile: str) -> Path:
    path = tmp / "job.yaml"
    path.write_text(
        textwrap.dedent(
            f"""
            name: m
            cluster: dev
            workload: {{kind: command, command: python3, args: [-c, pass]}}
            profile: {profile}
            """
        )
    )
    return path


def test_memory_off_in_yaml_reads_as_off_and_on_is_refused(tmp_path: Path) -> None:
    assert load_spec(_spec(tmp_path, "{memory: off}")).profile.memory == "off"
    with pytest.raises(UserError) as info:
        load_spec(_spec(tmp_path, "{memory: on}"))
    assert "timeline or snapshot" in str(info.value)
    with pytest.raises(UserError) as info:
        load_spec(_spec(tmp_path, "{memory_max_events: 5000}"))
    assert "memory is off" in str(info.value)


def test_the_hook_for_a_job() -> None:
    assert memory_collect.hook_for(ProfileSpec(), "/r", "/r/artifacts") is None
    prof = ProfileSpec(memory="snapshot", capture_range="cudaProfilerApi", tool="nsys")
    hook = memory_collect.hook_for(prof, "/r", "/r/artifacts", "96G")
    assert hook is not None and hook.folder == "/r/memory_hook"
    assert hook.env == {
        "GH_RUN_MEMORY": "snapshot",
        "GH_RUN_MEMORY_DIR": "/r/artifacts/memory",
        "GH_RUN_MEMORY_MAX_EVENTS": str(memory_hook.DEFAULT_MAX_EVENTS),
        "GH_RUN_MEMORY_DUMP_AT": "profiler-stop",
        "GH_RUN_MEMORY_PARTITION_GPU_BYTES": str(96 << 30),
    }
    sources = memory_collect.hook_sources()
    assert (
        sources["memory_hook/gh_run_memory_hook.py"]
        == (REPO / "orchestrator" / "nsys" / "memory_hook.py").read_text()
    )


def test_the_hooks_names_are_the_collections() -> None:
    for name in (
        memory_hook.DUMP_NAME,
        memory_hook.OOM_DUMP_NAME,
        memory_hook.OOM_NOTE_NAME,
    ):
        assert memory_files.is_memory_file(f"memory/{name.format(rank=3)}"), name
    assert not memory_files.is_memory_file("memory/other.pickle")
    assert not memory_files.is_memory_file("memory.rank0.pickle")  # outside memory/
    assert memory_files.dump_rank("memory.rank12.pid77.pickle") == (12, False)
    assert memory_files.dump_rank("oom.rank1.json") is None
