#!/usr/bin/env bash
# Memory recordings through gh-run itself (issue 39): each case of bench/workloads/memory_cases.py
# submitted with `gh-run submit bench/jobs/memory_case.yaml --executor local --wait` and
# `profile.memory` on, so gh-run's import hook records PyTorch's allocator history from outside
# the workload; the workload writes what it measured itself (memory_truth.json). For a machine with
# one NVIDIA GPU and no SLURM (the device tool's H200). Run by hand; CI has no GPU.
#
#   bench/gpu_memory.sh [OUTDIR]     # default bench/out/gpu_memory
#
# Variants (NAME:MEMORY:CASE ARGS; MEMORY is profile.memory):
#   activations:snapshot:activations            activations dominate (SGD, no optimizer state)
#   activations_ckpt:snapshot:activations --checkpoint    the same, recomputed: a lower peak
#   activations_off:off:activations             the same without the hook (overhead baseline;
#                                               first, and again as activations_again after
#                                               the others: the drift between runs)
#   activations_timeline:timeline:activations   the hook without stacks (its overhead)
#   adam:snapshot:adam                          Adam's two moments dominate
#   leak:snapshot:leak                          a planted per-step leak
#   fragment:snapshot:fragment                  growing batches: reserved >> allocated
#   fragment_expandable:snapshot:fragment       the same with expandable_segments:True
#   oom:snapshot:oom                            out of memory under a memory fraction (fails)
#   activations_kineto, leak_kineto             no hook; a Kineto trace with the allocator's
#                                               memory events (profile_memory) instead
#   churn_off:off:churn, churn_timeline:timeline:churn, churn_snapshot:snapshot:churn
#                                               the cost of one recorded allocator event
#   churn_1m:snapshot:churn                     a snapshot of 1 M events (MAX_EVENTS_1M)
#
# Writes OUTDIR/env.txt, OUTDIR/<variant>/ (memory_truth.json, memory/ dumps, the job's logs,
# job.sbatch, submit.txt), OUTDIR/summary.txt. With PACK_DIR set, the variants' folders are packed
# into PACK_DIR/memory-recordings.tar.xz after each variant (the churn dumps left out: too large)
# and, when it fits
# the device tool's 16 MiB, the 1 M-event snapshot into PACK_DIR/churn-1m.pickle.xz.
# Knobs (environment): PYTHON (python3), DEVICE (cuda; cpu runs every case tiny and records
# nothing: a dry run of the plumbing), VARIANTS (names, default all), MAX_EVENTS (100000),
# MAX_EVENTS_1M (1000000), PACK_DIR, GH_RUN_COMMIT.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

OUTDIR=$(realpath -m "${1:-bench/out/gpu_memory}")
PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
MAX_EVENTS=${MAX_EVENTS:-100000}
MAX_EVENTS_1M=${MAX_EVENTS_1M:-1000000}
ALL=(
  "activations_off:off:activations"
  "activations:snapshot:activations"
  "activations_ckpt:snapshot:activations --checkpoint"
  "activations_timeline:timeline:activations"
  "adam:snapshot:adam"
  "leak:snapshot:leak"
  "fragment:snapshot:fragment"
  "fragment_expandable:snapshot:fragment"
  "oom:snapshot:oom"
  "activations_again:off:activations"
  "activations_kineto:off:activations --torch-profile out --profile-steps 2:4"
  "leak_kineto:off:leak --torch-profile out --profile-steps 1:15"
  "churn_off:off:churn"
  "churn_timeline:timeline:churn"
  "churn_snapshot:snapshot:churn"
  "churn_1m:snapshot:churn --events 800000"
)
read -ra wanted <<<"${VARIANTS:-}"
export PYTHONUNBUFFERED=1 COLUMNS=160
export GH_RUN_HOME="$OUTDIR/home" SCRATCH="$OUTDIR/scratch"
gh() { "$PYTHON" -m orchestrator "$@"; }
# shellcheck source=bench/lib/gpu_jobs.sh
source bench/lib/gpu_jobs.sh

rm -rf "$OUTDIR" && mkdir -p "$OUTDIR"
{
  echo "== date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.used --format=csv 2>&1
  "$PYTHON" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
  echo "gh-run commit: ${GH_RUN_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
  echo "device: $DEVICE, max events: $MAX_EVENTS"
} >"$OUTDIR/env.txt" 2>&1
cat "$OUTDIR/env.txt"

# pack: the variants done so far into PACK_DIR/memory-recordings.tar.xz (rewritten after each, so
# that a run stopped midway still returns what finished; the churn dumps are too large to keep)
pack() {
  [[ -n ${PACK_DIR:-} ]] || return 0
  mkdir -p "$PACK_DIR"
  local keep=() d n
  for d in "$OUTDIR"/*/; do
    n=$(basename "$d")
    [[ $n == home || $n == scratch ]] || keep+=("$n")
  done
  ((${#keep[@]})) || return 0
  tar -C "$OUTDIR" --exclude='churn_*/memory' -cf - "${keep[@]}" env.txt |
    xz -6 -T0 >"$PACK_DIR/memory-recordings.tar.xz.tmp" &&
    mv "$PACK_DIR/memory-recordings.tar.xz.tmp" "$PACK_DIR/memory-recordings.tar.xz"
}

failed=0
for entry in "${ALL[@]}"; do
  name=${entry%%:*}
  rest=${entry#*:}
  memory=${rest%%:*}
  read -ra case_args <<<"${rest#*:}"
  if ((${#wanted[@]})) && [[ " ${wanted[*]} " != *" $name "* ]]; then continue; fi
  events=$MAX_EVENTS
  [[ $name == churn_1m ]] && events=$MAX_EVENTS_1M
  args=(bench/workloads/memory_cases.py "${case_args[@]}" --device "$DEVICE")
  sets=(--cluster bench/clusters/gpu-host.yaml --set "name=mem-$name"
    --set "workload.command=$PYTHON" --set "workload.args=$(yaml_list "${args[@]}")"
    --set "profile.memory=$memory")
  [[ $memory != off ]] && sets+=(--set "profile.memory_max_events=$events")
  [[ $name == fragment_expandable ]] &&
    sets+=(--set "workload.env.PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
  echo "== $name: profile.memory=$memory: ${args[*]}"
  t0=$(date +%s)
  run_variant bench/jobs/memory_case.yaml "$OUTDIR/$name" "${sets[@]}"
  rc=$RUN_RC
  if [[ -d $RUN_DIR/artifacts/memory ]]; then
    cp -r "$RUN_DIR/artifacts/memory" "$OUTDIR/$name/"
  fi
  echo "   exit $rc in $(($(date +%s) - t0)) s; files: $(find "$OUTDIR/$name" -type f -printf '%P(%s) ' | head -c 600)"
  tail -n 4 "$OUTDIR/$name/submit.txt"
  # the oom case fails on purpose: status must say why
  if [[ $name == oom ]]; then
    gh status last >"$OUTDIR/$name/status.txt" 2>&1
    cat "$OUTDIR/$name/status.txt"
    ((rc != 0)) || { echo "   the oom case did not fail"; failed=1; }
  else
    ((rc == 0)) || failed=1
  fi
  pack
done

"$PYTHON" - "$OUTDIR" <<'PY' | tee "$OUTDIR/summary.txt"
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
gib = 2**30
print(f"{'variant':22} {'step ms':>8} {'max alloc GiB':>13} {'max resv GiB':>12} {'params GiB':>10} "
      f"{'dump files'}")
for d in sorted(p for p in out.iterdir() if p.is_dir() and p.name not in ("home", "scratch")):
    f = d / "memory_truth.json"
    if not f.is_file():
        print(f"{d.name:22} (no truth)")
        continue
    t = json.loads(f.read_text())
    step = t.get("median_step_time_s")
    dumps = sorted((d / "memory").glob("*")) if (d / "memory").is_dir() else []
    churn = t.get("churn")
    extra = f" churn {churn['us_per_allocation']:.2f} us/alloc" if churn else ""
    print(f"{d.name:22} {'-' if step is None else f'{step * 1e3:.1f}':>8} "
          f"{(t.get('max_memory_allocated') or 0) / gib:13.2f} "
          f"{(t.get('max_memory_reserved') or 0) / gib:12.2f} "
          f"{(t.get('parameter_bytes') or 0) / gib:10.3f} "
          + " ".join(f"{p.name}({p.stat().st_size})" for p in dumps) + extra)
PY

# what each dump holds (plain pickle here: the machine that made it), to see at once that the
# hook recorded: events per device, the time span of the trace and of the hook's marks
"$PYTHON" - "$OUTDIR" <<'PY' | tee -a "$OUTDIR/summary.txt"
import collections, pickle, sys, time
from pathlib import Path
for f in sorted(Path(sys.argv[1]).glob("*/memory/*.pickle")):
    t0 = time.perf_counter()
    with open(f, "rb") as fh:
        s = pickle.load(fh)
    took = time.perf_counter() - t0
    traces = s.get("device_traces", [])
    g = s.get("gh_run") or {}
    marks = g.get("marks") or []
    for dev, tr in enumerate(traces):
        if not tr:
            continue
        acts = collections.Counter(e.get("action") for e in tr)
        ts = [e.get("time_us") for e in tr if isinstance(e.get("time_us"), int)]
        framed = sum(1 for e in tr if e.get("frames"))
        span = f"{min(ts)}..{max(ts)}" if ts else "no time_us"
        inside = sum(1 for m in marks if ts and min(ts) <= m[0] <= max(ts))
        print(f"{f.parent.parent.name}/{f.name} dev {dev}: {len(tr)} events {dict(acts)}, framed "
              f"{framed}, time {span}; marks {len(marks)} ({inside} inside), segments "
              f"{len(s.get('segments', []))}, load {took:.2f} s, snapshot "
              f"{g.get('snapshot_seconds')} s, reason {g.get('reason')}, rss {g.get('max_rss_bytes')}")
    print("  keys", sorted(s), "gh_run keys", sorted(g), "marks[:6]", marks[:6])
PY

if [[ -n ${PACK_DIR:-} ]]; then
  cp "$OUTDIR/summary.txt" "$OUTDIR/env.txt" "$PACK_DIR/"
  pack
  big=$OUTDIR/churn_1m/memory/memory.rank0.pickle
  if [[ -f $big ]]; then
    xz -6 -T0 -c "$big" >"$PACK_DIR/churn-1m.pickle.xz"
    (($(stat -c %s "$PACK_DIR/churn-1m.pickle.xz") < 15 * 1024 * 1024)) || rm -f "$PACK_DIR/churn-1m.pickle.xz"
  fi
  ls -la "$PACK_DIR"
fi
exit "$failed"
