"""Input paths → timelines (the readers) → metrics (`rank_metrics`) → one `Metrics`, with the
cross-rank view.

- `.sqlite` → nsys reader (one timeline per process with GPU work); `.json` / `.json.gz` →
  Kineto reader; `.nsys-rep` → exported to SQLite with the local nsys first
  (`orchestrator.nsys.export`: once, reused); a directory → every such file under it (JSON files
  only when they hold `traceEvents`, so manifests are skipped; a `.nsys-rep` only when no export
  of it sits beside it).
- Ranks: `ranks.assign` (the trace first, then an explicit file-name pattern, else input order).
- Several files are read in parallel worker processes (one per CPU, at most `MAX_JOBS`) when
  they are large enough to pay for it (`PARALLEL_BYTES`); the metrics come back, the timelines
  stay in the workers.
- The workload's `metrics.json` / `metrics_rank<N>.json` beside a Kineto trace is folded into
  that rank (`fold_workload`): peak GPU memory (with its source), step times, tokens/s.
- Activation offloading on or off (`fold_offloading`, every reader): the workload's metrics.json
  (`config.offload_activations`, `offloaded_bytes_per_step`), else the run's `spec.lock.yaml`
  (`workload.cpu_offloading_layers`, a `cpu_offloading` Hydra override, or
  `--offload-activations` in a command's args), read only from the trace's own run folder
  (`spec_lock_file`); else what the trace shows.
"""

from __future__ import annotations

import contextlib
import gzip
import os
from pathlib import Path
from typing import Any

from orchestrator.analysis import (
    captures,
    cross_rank,
    memory_inputs,
    rank_metrics,
    records,
    settings,
)
from orchestrator.analysis.captures import spec_lock_file
from orchestrator.analysis.families import gpu_metrics, profiler_overhead, step_view
from orchestrator.analysis.metrics import (
    Metrics,
    RankMetrics,
    Source,
    WorkloadReport,
    aggregate,
)
from orchestrator.analysis.readers import kineto, tracetext
from orchestrator.analysis.records import FileResult
from orchestrator.analysis.timeline import ranks, step_rules
from orchestrator.analysis.timeline.ranks import rank_from_name
from orchestrator.core.base import Strict
from orchestrator.core.errors import UserError
from orchestrator.nsys import export as nsys_export

SUFFIXES = (".sqlite", ".json", ".json.gz", nsys_export.SUFFIX, *memory_inputs.SUFFIXES)


def _kind(path: Path) -> str | None:
    name = path.name.lower()
    if name.endswith(records.SUFFIX):
        return None  # a report's in-job analysis, read in the report's place
    if memory_inputs.is_snapshot(path):
        return "torch-snapshot"
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
            # reports analysed where they lie count whether or not they are here (records)
            recorded = set(records.reports_in(p))
            found = sorted(
                recorded
                | {
                    f
                    for f in p.rglob("*")
                    if f.is_file()
                    and _kind(f) is not None
                    and (
                        _kind(f) == "nsys"
                        or _looks_like_trace(f)
                        or _unexported_report(f)
                        or memory_inputs.hook_dump(f)
                    )
                    and _export_of(f) not in recorded
                }
            )
            if not found:
                raise UserError(
                    f"{p}: no .nsys-rep, .sqlite, PyTorch-profiler .json/.json.gz files or"
                    " memory snapshots (memory/*.pickle) in it; pass a run folder or trace files"
                )
            out.extend(found)
        elif p.is_file():
            if _kind(p) is None:
                raise UserError(
                    f"{p}: unknown file type; pass an nsys report (.nsys-rep) or export"
                    " (.sqlite), a PyTorch-profiler trace (.json or .json.gz), or a PyTorch"
                    " memory snapshot (.pickle)"
                )
            out.append(p)
        elif records.record_path(p).is_file():
            out.append(p)  # a report left on the cluster, analysed there
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


def _export_of(f: Path) -> Path:
    """The SQLite export beside a .nsys-rep (the path itself for any other file)."""
    if _kind(f) != "nsys-rep":
        return f
    return f.with_name(f.name[: -len(nsys_export.SUFFIX)] + ".sqlite")


def _unexported_report(f: Path) -> bool:
    """A .nsys-rep in a folder counts only without its export beside it (the job's own)."""
    return _kind(f) == "nsys-rep" and not _export_of(f).is_file()


def workload_file(folder: Path, rank: int) -> Path | None:
    """The workload's own metrics beside a trace: `metrics_rank<N>.json` for rank N, else
    `metrics.json` (used only when its `rank` field is absent or equals N)."""
    per_rank = folder / f"metrics_rank{rank}.json"
    if per_rank.is_file():
        return per_rank
    common = folder / "metrics.json"
    return common if common.is_file() else None


def _read_json(f: Path) -> Any:
    """The workload's metrics file, through the bounded loader (`side_inputs`)."""
    from orchestrator.analysis.readers.side_inputs import SideInputError, load_json

    try:
        return load_json(f)
    except SideInputError as exc:
        raise UserError(f"{f}: {exc}; fix or remove the workload metrics file") from None


def _offloading_in_spec(f: Path) -> tuple[bool, str] | None:
    # only where a run folder holds a spec: a trace alone does not pay for YAML
    from orchestrator.analysis.readers.side_inputs import SideInputError, load_yaml_file

    try:
        data = load_yaml_file(f)
    except SideInputError as exc:
        raise UserError(
            f"{f}: not read ({exc}); restore the run's spec.lock.yaml or move it away"
        ) from None
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


def workload_kind(folder: Path) -> tuple[str, str] | None:
    """What ran, for the advice's wording: ("nemo" | "reference" | "generic", evidence) from
    the run's spec.lock.yaml (a `nemo` workload; a command that runs `workloads.sft`), else
    from the workload's metrics.json (`"workload": "sft"`: the reference workload); None when
    neither says."""
    spec = spec_lock_file(folder)
    if spec is not None:
        from orchestrator.analysis.readers.side_inputs import SideInputError, load_yaml_file

        try:
            data = load_yaml_file(spec)
        except SideInputError:
            data = None  # _offloading_in_spec names the broken file
        wl = data.get("workload") if isinstance(data, dict) else None
        if isinstance(wl, dict):
            kind = wl.get("kind")
            if kind == "nemo":
                return "nemo", f"{spec.name}: workload.kind = nemo"
            args = wl.get("args")
            words = [str(wl.get("command", "")), *map(str, args if isinstance(args, list) else [])]
            if any("workloads.sft" in w or w.endswith("workloads/sft.py") for w in words):
                return "reference", f"{spec.name}: the command runs workloads.sft"
            return "generic", f"{spec.name}: workload.kind = {kind}"
    for name in ("metrics.json", "metrics_rank0.json"):
        f = folder / name
        if f.is_file():
            data = _read_json(f)
            if isinstance(data, dict) and data.get("workload") == "sft":
                return "reference", f"{name}: workload = sft (workloads/sft.py)"
    return None


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


def fold_workload(r: RankMetrics, folder: Path, kineto: bool = True) -> RankMetrics:
    """Add the workload's metrics.json numbers (peak GPU memory, step times, tokens/s) to a
    rank; its peak GPU memory (whole run) replaces the trace's (trace window only) for a Kineto
    trace (an nsys export's memory-usage events keep their own peak). The step walls
    inside and outside the capture window give the profiler's cost (`profiler_overhead`)."""
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
    # the capture's cost as the workload measured it: its steps inside the window against out
    over = profiler_overhead.measured(
        r.profiler_overhead, wl.step_times_s, profiler_overhead.window_of(data, kineto)
    )
    if over is not None:
        update["profiler_overhead"] = over
        said = profiler_overhead.note(over)
        kept = [n for n in r.notes if not n.startswith(profiler_overhead.NOTE_STARTS)]
        update["notes"] = kept + ([said] if said is not None else [])
    if kineto and wl.peak_gpu_memory_bytes is not None:
        update["peak_gpu_memory_bytes"] = wl.peak_gpu_memory_bytes
        update["peak_gpu_memory_source"] = (
            f"{f.name}: peak_gpu_memory_bytes (torch.cuda.max_memory_allocated, whole run)"
        )
    return r.model_copy(update=update)


MAX_JOBS = 8
PARALLEL_BYTES = 64 << 20  # below this, starting worker processes costs more than it saves


def analyze_file(path: Path, max_trace_bytes: int | None = None) -> FileResult:
    """Read one input and compute its metrics (runs in a worker process for parallel reads)."""
    if _kind(path) == "nsys":
        from orchestrator.analysis.readers import nsys_sqlite  # a Kineto trace does not need it

        tls = nsys_sqlite.read_timelines(path)
    else:
        tls = [kineto.read_timeline(path, max_trace_bytes)]
    first = tls[0]
    claims = []
    for tl in tls:
        by_trace: tuple[int, str] | None = None
        if first.source.kind == "kineto-json":
            r = kineto.trace_rank_of(tl.meta)
            by_trace = (r, "distributedInfo.rank") if r is not None else None
        elif tl.rank_rule:
            by_trace = (tl.rank, tl.rank_rule)
        claims.append(ranks.Claim(path, by_trace, tl.process_index, tl.processes))
    claimed = [c.by_trace[0] * c.processes + c.process for c in claims if c.by_trace is not None]
    rule = next((c.by_trace[1] for c in claims if c.by_trace is not None), None)
    if first.source.kind == "kineto-json":
        capture = captures.of_kineto(path, first, claimed[0] if claimed else None)
    else:
        capture = captures.of_nsys(path, tls, claimed, rule)
    capture.name_rank = rank_from_name(path)
    captures.find_spec(capture, path.parent)
    entries = []
    for tl in tls:
        wl = workload_data(path.parent, tl.rank)
        known = step_rules.known_step_count(wl[1]) if wl is not None else None
        if known is not None and wl is not None:
            known = (known[0], f"{wl[0].name} {known[1]}")
        entries.append(rank_metrics.compute(tl, known))
    src = first.source
    source = Source(
        path=src.path,
        kind="nsys-sqlite" if src.kind == "nsys-sqlite" else "kineto-json",
        tool_version=src.tool_version,
        rank=0,
        rank_rule="",
        missing=src.missing,
        notes=list(first.notes),
        open_with=step_view.open_with(src.path, src.kind),
    )
    return FileResult(source, claims, entries, capture, first.gpu_samples)


def _jobs(files: list[Path], jobs: int | None) -> int:
    if jobs is not None:
        return max(1, jobs)
    if len(files) < 2:
        return 1
    size = 0
    for f in files:
        with contextlib.suppress(OSError):
            size += f.stat().st_size
    if size < PARALLEL_BYTES:
        return 1
    return max(1, min(len(files), os.cpu_count() or 1, MAX_JOBS))


def _read_all(
    files: list[Path], max_trace_bytes: int | None, jobs: int, use_records: bool = True
) -> list[FileResult]:
    """Each input's result: from its record where one may stand for it (`records.check`),
    else read here (in worker processes when `jobs` > 1), saying in its notes why a record
    beside it was not used. An export that is not here whose .nsys-rep is, and whose record
    does not vouch for that .nsys-rep, is exported here from it (`files` is updated)."""
    out: dict[int, FileResult] = {}
    why: dict[int, str] = {}
    for i, f in enumerate(files):
        if not use_records:
            break
        checked = records.check(f)
        if checked.data is not None:
            try:
                out[i] = records.decode(checked.data, f)
                continue
            except (
                KeyError,
                TypeError,
                ValueError,
                IndexError,
                AttributeError,
                OverflowError,
            ) as exc:
                what = f"{records.record_path(f).name} not used: it does not read as a record"
                detail = " ".join(str(exc).split())[:200]
                if not f.is_file() and not records._rep_here(f):
                    raise UserError(
                        f"{records.record_path(f)}: damaged ({type(exc).__name__}: {detail}), "
                        "and its report is not here; remove the record, or bring the report "
                        "(`gh-run fetch RUN --reports`)"
                    ) from None
                why[i] = f"{what} ({type(exc).__name__}: {detail})"
        elif checked.why is not None:
            why[i] = checked.why
    todo = [i for i in range(len(files)) if i not in out]
    for i in todo:
        if files[i].exists():
            continue
        rep = records.rep_beside(files[i])
        if rep is not None and rep.is_file():
            files[i] = nsys_export.sqlite_for(rep)
        elif records.record_path(files[i]).is_file():
            raise UserError(
                f"{files[i]}: the report is not here (it was left on the cluster and analysed"
                " there); `gh-run fetch RUN --reports` brings it, verified"
            )
    if jobs <= 1 or len(todo) < 2:
        out.update({i: analyze_file(files[i], max_trace_bytes) for i in todo})
    else:
        import multiprocessing  # only for several large inputs
        from concurrent.futures import ProcessPoolExecutor

        methods = multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("fork" if "fork" in methods else None)
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            futures = {i: pool.submit(analyze_file, files[i], max_trace_bytes) for i in todo}
            out.update({i: f.result() for i, f in futures.items()})
    for i, text in why.items():
        out[i].source.notes.append(f"{text}; the report was read here instead")
    return [out[i] for i in range(len(files))]


def _inputs(paths: list[Path]) -> list[Path]:
    # A report is read through its SQLite export (made here once when the job made none), or
    # the record of that export where the job analysed it.
    return [
        (
            _export_of(f)
            if records.record_path(_export_of(f)).is_file()
            else nsys_export.sqlite_for(f)
        )
        if _kind(f) == "nsys-rep"
        else f
        for f in expand([Path(p) for p in paths])
    ]


def _snapshots(
    files: list[Path], ceiling: int | None
) -> tuple[list[Path], list[memory_inputs.Snapshot]]:
    """The traces among the inputs, and the memory snapshots read (one per rank and run)."""
    snaps = [f for f in files if _kind(f) == "torch-snapshot"]
    if not snaps:
        return files, []
    chosen, notes = memory_inputs.choose(snaps)
    read = [memory_inputs.read(f, ceiling) for f in chosen]
    if read and notes:
        read[0].notes.extend(notes)
    return [f for f in files if _kind(f) != "torch-snapshot"], read


def _memory_only(snaps: list[memory_inputs.Snapshot], label: str | None) -> Metrics:
    """A run of snapshots alone: an entry per rank, memory and nothing else."""
    ranks = memory_inputs.fold([], snaps)
    return Metrics(
        label=label,
        sources=[memory_inputs.source(s) for s in snaps],
        ranks=ranks,
        aggregate=aggregate(ranks),
        cross_rank=cross_rank.view(ranks, []),
    )


def _of_run(snaps: list[memory_inputs.Snapshot], files: list[Path]) -> list[memory_inputs.Snapshot]:
    homes = {memory_inputs.home(f) for f in files}
    return [s for s in snaps if s.home in homes]


def analyze_paths(
    paths: list[Path],
    label: str | None = None,
    *,
    max_trace_bytes: int | None = None,
    jobs: int | None = None,
    use_records: bool = True,
) -> Metrics:
    """Analyse nsys SQLite exports and/or Kineto traces as one run (the caller knows they are:
    a gh-run run's artifacts); `analyze_runs` finds the runs among inputs.

    `max_trace_bytes`: the ceiling on a Kineto trace's (uncompressed) text (default: see
    `tracetext.max_trace_bytes`); `jobs`: worker processes (default: by size and CPUs);
    `use_records`: take a report's in-job analysis (`records`) in its place where one may
    stand for it."""
    files = _inputs(paths)
    ceiling = tracetext.max_trace_bytes(max_trace_bytes)
    files, snaps = _snapshots(files, max_trace_bytes)
    if not files:
        return _memory_only(snaps, label)
    results = _read_all(files, ceiling, _jobs(files, jobs), use_records)
    return _metrics(files, results, label, snaps=snaps)


class RunSet(Strict):
    """The runs among a set of inputs (`captures.split`): one Metrics each, with the evidence
    that separated them (`why`; empty for one run)."""

    format: str = "gh-run.runs/1"
    label: str | None = None
    why: list[str] = []
    runs: list[Metrics]


def analyze_runs(
    paths: list[Path],
    label: str | None = None,
    *,
    max_trace_bytes: int | None = None,
    jobs: int | None = None,
    use_records: bool = True,
) -> RunSet:
    """Analyse inputs as the runs they are: the ranks of one job together, separate captures
    apart (`captures`). One run is labelled `label`; several each by their folder (or file)."""
    files = _inputs(paths)
    ceiling = tracetext.max_trace_bytes(max_trace_bytes)
    files, snaps = _snapshots(files, max_trace_bytes)
    if not files:
        return _memory_runs(snaps, label)
    results = _read_all(files, ceiling, _jobs(files, jobs), use_records)
    groups, why = captures.split([r.capture for r in results])
    if len(groups) == 1:
        own_snaps = _of_run(snaps, files)
        m = _metrics(files, results, label, groups[0].ties, snaps=own_snaps)
        rest = [s for s in snaps if s not in own_snaps]
        if not rest:
            return RunSet(label=label, runs=[m])
        others = _memory_runs(rest, None)
        return RunSet(label=label, why=[*why, *others.why], runs=[m, *others.runs])
    runs = []
    used: list[memory_inputs.Snapshot] = []
    for g in groups:
        own = [files[i] for i in g.members]
        mine = [s for s in _of_run(snaps, own) if s not in used]
        used += mine
        runs.append(
            _metrics(own, [results[i] for i in g.members], run_label(own, files), g.ties, mine)
        )
    rest = [s for s in snaps if s not in used]
    if rest:
        others = _memory_runs(rest, None)
        why += others.why
        runs += others.runs
    return RunSet(label=label, why=why, runs=runs)


def _memory_runs(snaps: list[memory_inputs.Snapshot], label: str | None) -> RunSet:
    """Snapshots without traces: one run per run folder (or folder)."""
    by_home: dict[Path, list[memory_inputs.Snapshot]] = {}
    for s in snaps:
        by_home.setdefault(s.home, []).append(s)
    if len(by_home) <= 1:
        return RunSet(label=label, runs=[_memory_only(snaps, label)])
    runs = [_memory_only(group, str(h)) for h, group in by_home.items()]
    why = [f"memory snapshots of {len(by_home)} runs (folders): {', '.join(map(str, by_home))}"]
    return RunSet(label=label, why=why, runs=runs)


def run_label(own: list[Path], every: list[Path]) -> str:
    """A run's name among others: the folder that holds its inputs and no other run's, else
    its inputs' paths."""
    if len(own) == 1 and len(every) == 1:
        return str(own[0])
    common = Path(os.path.commonpath([str(f.parent) for f in own]))
    others = [f for f in every if f not in own]
    if not any(common in f.parents for f in others) and str(common) not in ("", "."):
        return str(common)
    return " ".join(str(f) for f in own)


def _metrics(
    files: list[Path],
    results: list[FileResult],
    label: str | None,
    ties: list[str] | None = None,
    snaps: list[memory_inputs.Snapshot] | None = None,
) -> Metrics:
    """One run's Metrics from its inputs' results."""
    claims = [c for res in results for c in res.claims]
    assigned = iter(ranks.assign(claims))
    sources: list[Source] = []
    out: list[RankMetrics] = []
    cross: list[rank_metrics.CrossRankInput] = []
    samples: list[gpu_metrics.Samples | None] = []
    for f, res in zip(files, results, strict=True):
        file_ranks = []
        rules = []
        notes = []
        for rms, crs in res.entries:
            a = next(assigned)
            file_ranks.append(a.rank)
            rules.append(a.rule)
            if a.note:
                notes.append(a.note)
            for r, c in zip(rms, crs, strict=True):
                r = r.model_copy(update={"rank": a.rank})
                c.rank = a.rank
                r = fold_workload(r, f.parent, kineto=res.source.kind == "kineto-json")
                out.append(fold_offloading(r, f.parent))
                cross.append(c)
                samples.append(res.samples)
        sources.append(
            res.source.model_copy(
                update={
                    "rank": file_ranks[0],
                    "rank_rule": rules[0],
                    "ranks": file_ranks if len(file_ranks) > 1 else [],
                    "rank_note": "; ".join(notes) if notes else None,
                }
            )
        )
    kinds = [k for f in files if (k := workload_kind(f.parent)) is not None]
    kind, kind_evidence = kinds[0] if kinds else ("generic", None)
    command = next((res.capture.command for res in results if res.capture.command), None)
    spec = next((s for f in files if (s := spec_lock_file(f.parent)) is not None), None)
    run_settings = settings.read(files[0].parent, command, spec) if files else None
    out = gpu_metrics.attribute(out, [c.steps for c in cross], samples)
    order = sorted(range(len(out)), key=lambda i: (out[i].rank, out[i].devices))
    out = [out[i] for i in order]
    cross = [cross[i] for i in order]
    # the spread across the traces' entries (a snapshot alone makes no cross-rank input)
    spread = cross_rank.view(out, cross)
    if snaps:
        out = memory_inputs.fold(out, snaps)
        sources += [memory_inputs.source(s) for s in snaps]
    return Metrics(
        label=label,
        workload_kind=kind,
        workload_kind_evidence=kind_evidence,
        inputs_tied_by=list(ties or []),
        settings=run_settings or settings.RunSettings(),
        sources=sources,
        ranks=out,
        aggregate=aggregate(out),
        cross_rank=spread,
    )
