"""Dispatch of input paths to the readers, and the rank rule.

- `.sqlite` → nsys reader; `.json` / `.json.gz` → Kineto reader; `.nsys-rep` → exported to
  SQLite with the local nsys first (`orchestrator.nsys_export`: once, reused); a directory →
  every such file under it (JSON files only when they hold `traceEvents`, so manifests are
  skipped; a `.nsys-rep` only when no export of it sits beside it).
- The workload's `metrics.json` / `metrics_rank<N>.json` beside a Kineto trace is folded into
  that rank (`fold_workload`): peak GPU memory (with its source), step times, tokens/s.
- Rank: Kineto `distributedInfo.rank`; else the file-name rule (`core.rank_from_name`:
  `rank3`, `.3.sqlite`, `_3.json.gz`); else the file's position among the inputs.
- Activation offloading on or off (`fold_offloading`, every reader): the workload's metrics.json
  (`config.offload_activations`, `offloaded_bytes_per_step`), else the run's `spec.lock.yaml`
  (`workload.cpu_offloading_layers`, a `cpu_offloading` Hydra override, or
  `--offload-activations` in a command's args) found beside the trace or in up to
  SPEC_LEVELS folders above it (also as `run/spec.lock.yaml`, the collected layout); else
  what the reader saw in the trace.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import orjson
import yaml

from orchestrator import nsys_export
from orchestrator.analysis import core, kineto, nsys_sqlite
from orchestrator.analysis.metrics import (
    Metrics,
    RankMetrics,
    Source,
    WorkloadReport,
    aggregate,
)
from orchestrator.errors import UserError

SUFFIXES = (".sqlite", ".json", ".json.gz", nsys_export.SUFFIX)


def _kind(path: Path) -> str | None:
    name = path.name.lower()
    if name.endswith(".sqlite"):
        return "nsys"
    if name.endswith(nsys_export.SUFFIX):
        return "nsys-rep"
    if name.endswith(".json") or name.endswith(".json.gz"):
        return "kineto"
    return None


def _looks_like_trace(path: Path) -> bool:
    try:
        opener = gzip.open if path.name.lower().endswith(".gz") else open
        with opener(path, "rb") as fh:
            head = fh.read(1 << 20)
    except OSError:
        return False
    return b'"traceEvents"' in head


def expand(paths: list[Path]) -> list[Path]:
    """Input files from files and directories, sorted, without duplicates."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = sorted(
                f
                for f in p.rglob("*")
                if f.is_file()
                and _kind(f) is not None
                and (_kind(f) == "nsys" or _looks_like_trace(f) or _unexported_report(f))
            )
            if not found:
                raise UserError(
                    f"{p}: no .nsys-rep, .sqlite or PyTorch-profiler .json/.json.gz files in it;"
                    " pass a run folder or trace files"
                )
            out.extend(found)
        elif p.is_file():
            if _kind(p) is None:
                raise UserError(
                    f"{p}: unknown file type; pass an nsys report (.nsys-rep) or export"
                    " (.sqlite), or a PyTorch-profiler trace (.json or .json.gz)"
                )
            out.append(p)
        else:
            raise UserError(f"{p}: no such file or directory; pass an existing trace path")
    seen: set[Path] = set()
    uniq = []
    for f in out:
        r = f.resolve()
        if r not in seen:
            seen.add(r)
            uniq.append(f)
    return uniq


def _unexported_report(f: Path) -> bool:
    """A .nsys-rep in a folder counts only without its export beside it (the job's own)."""
    return (
        _kind(f) == "nsys-rep"
        and not f.with_name(f.name[: -len(nsys_export.SUFFIX)] + ".sqlite").is_file()
    )


def workload_file(folder: Path, rank: int) -> Path | None:
    """The workload's own metrics beside a trace: `metrics_rank<N>.json` for rank N, else
    `metrics.json` (used only when its `rank` field is absent or equals N)."""
    per_rank = folder / f"metrics_rank{rank}.json"
    if per_rank.is_file():
        return per_rank
    common = folder / "metrics.json"
    return common if common.is_file() else None


SPEC_LEVELS = 3  # artifacts/<rank folder>/trace → the run folder holding spec.lock.yaml


def _read_json(f: Path) -> Any:
    try:
        return orjson.loads(f.read_bytes())
    except (OSError, ValueError) as exc:
        raise UserError(
            f"{f}: not readable JSON ({exc}); fix or remove the workload metrics file"
        ) from exc


def spec_lock_file(folder: Path) -> Path | None:
    """The run's spec.lock.yaml: in the trace's folder or up to SPEC_LEVELS folders above it,
    directly or as `run/spec.lock.yaml` (how `gh-run fetch` stores it beside `artifacts/`)."""
    for d in [folder, *folder.parents][: SPEC_LEVELS + 1]:
        for f in (d / "spec.lock.yaml", d / "run" / "spec.lock.yaml"):
            if f.is_file():
                return f
    return None


def _offloading_in_spec(f: Path) -> tuple[bool, str] | None:
    try:
        data = yaml.safe_load(f.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        why = " ".join(str(exc).split())  # YAML errors span lines; the message is one sentence
        raise UserError(
            f"{f}: not readable YAML ({why}); restore the run's spec.lock.yaml or move it away"
        ) from exc
    wl = data.get("workload") if isinstance(data, dict) else None
    if not isinstance(wl, dict):
        return None
    layers = wl.get("cpu_offloading_layers")
    if isinstance(layers, int) and not isinstance(layers, bool) and layers > 0:
        return True, f"{f.name}: workload.cpu_offloading_layers = {layers}"
    overrides = wl.get("overrides")
    if isinstance(overrides, dict):
        for key, value in overrides.items():
            if str(key).lstrip("+~").endswith("cpu_offloading") and isinstance(value, bool):
                return value, f"{f.name}: workload.overrides {key} = {str(value).lower()}"
    args = wl.get("args")
    if isinstance(args, list) and "--offload-activations" in args:
        return True, f"{f.name}: workload.args has --offload-activations"
    return None  # a spec without an offloading knob says nothing: a config file may set it


def workload_data(folder: Path, rank: int) -> tuple[Path, dict[str, Any]] | None:
    """This rank's workload metrics beside a trace (`workload_file`), read: None when there are
    none, or when the file is not an object, or a `metrics.json` says it is another rank's."""
    f = workload_file(folder, rank)
    if f is None:
        return None
    data = _read_json(f)
    if not isinstance(data, dict):
        return None
    if f.name == "metrics.json" and "rank" in data and data["rank"] != rank:
        return None
    return f, data


def offloading_of(folder: Path, rank: int) -> tuple[bool, str] | None:
    """(on, evidence) from the workload's metrics file or the run's spec, None when they are
    absent or silent."""
    found = workload_data(folder, rank)
    if found is not None:
        f, data = found
        cfg = data.get("config")
        flag = cfg.get("offload_activations") if isinstance(cfg, dict) else None
        if isinstance(flag, bool):
            return flag, f"{f.name}: config.offload_activations = {str(flag).lower()}"
        moved = _num(data.get("offloaded_bytes_per_step"))
        if moved is not None:
            return moved > 0, f"{f.name}: offloaded_bytes_per_step = {moved:.0f}"
    spec = spec_lock_file(folder)
    return _offloading_in_spec(spec) if spec is not None else None


def fold_offloading(r: RankMetrics, folder: Path) -> RankMetrics:
    """The run's own word on activation offloading (metrics.json, spec.lock.yaml) over what the
    reader inferred from the trace."""
    found = offloading_of(folder, r.rank)
    if found is None:
        return r
    on, evidence = found
    return r.model_copy(update={"offloading": on, "offloading_evidence": evidence})


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def fold_workload(r: RankMetrics, folder: Path) -> RankMetrics:
    """Add the workload's metrics.json numbers (peak GPU memory, step times, tokens/s) to a
    rank; its peak GPU memory (whole run) replaces the trace's (trace window only)."""
    found = workload_data(folder, r.rank)
    if found is None:
        return r
    f, data = found
    peak = _num(data.get("peak_gpu_memory_bytes"))
    steps = _num(data.get("steps"))
    times = data.get("step_times_s")
    wl = WorkloadReport(
        path=str(f),
        steps=int(steps) if steps is not None else None,
        median_step_time_s=_num(data.get("median_step_time_s")),
        step_times_s=[float(t) for t in times if _num(t) is not None]
        if isinstance(times, list)
        else [],
        tokens_per_s=_num(data.get("tokens_per_s")),
        peak_gpu_memory_bytes=int(peak) if peak is not None else None,
    )
    update: dict[str, object] = {"workload": wl}
    if wl.peak_gpu_memory_bytes is not None:
        update["peak_gpu_memory_bytes"] = wl.peak_gpu_memory_bytes
        update["peak_gpu_memory_source"] = (
            f"{f.name}: peak_gpu_memory_bytes (torch.cuda.max_memory_allocated, whole run)"
        )
    return r.model_copy(update=update)


def analyze_paths(paths: list[Path], label: str | None = None) -> Metrics:
    """Analyse nsys SQLite exports and/or Kineto traces into one Metrics."""
    files = expand([Path(p) for p in paths])
    sources: list[Source] = []
    ranks: list[RankMetrics] = []
    for index, given in enumerate(files):
        # A report is read through its SQLite export (made here once when the job made none).
        f = nsys_export.sqlite_for(given) if _kind(given) == "nsys-rep" else given
        by_name = core.rank_from_name(f)
        if _kind(f) == "nsys":
            rank, rule = (by_name, "file name") if by_name is not None else (index, "file order")
            src, rms = nsys_sqlite.read_nsys(f, rank, rule)
        else:
            trace = kineto.load_trace(f)
            by_info = kineto.trace_rank(trace)
            if by_info is not None:
                rank, rule = by_info, "distributedInfo.rank"
            elif by_name is not None:
                rank, rule = by_name, "file name"
            else:
                rank, rule = index, "file order"
            src, rms = kineto.read_kineto(f, rank, rule, trace)
            rms = [fold_workload(r, f.parent) for r in rms]
        rms = [fold_offloading(r, f.parent) for r in rms]
        sources.append(src)
        ranks.extend(rms)
    ranks.sort(key=lambda r: (r.rank, r.devices))
    return Metrics(label=label, sources=sources, ranks=ranks, aggregate=aggregate(ranks))
