"""The long fuzz loop of the side-input readers against their references (issue 42, class 4):
random mutations of a real export's GPU_METRICS table (read with and without the page reader,
against plain SQL), of its GpuMetricsConfig YAML (against yaml.safe_load), of a report's record
(read in the report's place) and of the metrics.json / spec.lock.yaml beside a trace
(tests/fixtures/side_input_fuzz.py). Prints how many mutations ended as the reference reads
them (with what was left out noted, or not), refused (a note or one sentence, allowed), read by
libyaml where PyYAML's scanner refuses (allowed, counted apart) or as a silent difference (must
be 0), and stops with exit 1 at the first difference, keeping the case under
bench/out/fuzz-side/.

    .venv/bin/python bench/fuzz_side_inputs.py [--seconds 600] [--seed 1]
        [--only gpu_metrics|config|record|beside]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orchestrator.analysis import records, write_records  # noqa: E402
from tests.fixtures import side_input_fuzz as F  # noqa: E402

OUT = ROOT / "bench" / "out" / "fuzz-side"
KINDS = ("gpu_metrics", "config", "record", "beside")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=600.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", choices=KINDS, default=None)
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    rnd = random.Random(args.seed)
    kinds = [k for k in KINDS if args.only in (None, k)]
    base, config = F.gpu_base(OUT / "base")
    rec_dir = OUT / "record"
    shutil.rmtree(rec_dir, ignore_errors=True)
    rec_dir.mkdir()
    report = rec_dir / F.SAXPY.name
    shutil.copyfile(F.SAXPY, report)
    record_doc = json.loads(write_records.write(report).read_text())
    counts: dict[str, Counter[str]] = {k: Counter() for k in kinds}
    end = time.monotonic() + args.seconds
    i = 0
    while time.monotonic() < end:
        kind = kinds[i % len(kinds)]
        i += 1
        detail = ""
        if kind == "gpu_metrics":
            case = OUT / "case.sqlite"
            done = F.gpu_mutate(base, case, rnd)
            outcome, detail = F.gpu_case(case)
            detail = f"{detail} after {done}"
        elif kind == "config":
            text = F.config_mutate(config, rnd)
            (OUT / "case.yaml").write_text(text)
            outcome, detail = F.config_case(text)
        elif kind == "record":
            records.record_path(report).write_text(json.dumps(F.json_mutate(record_doc, rnd)))
            outcome, detail = F.record_case(report)
        else:
            folder = OUT / "beside"
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            trace = folder / F.SAXPY.name
            shutil.copyfile(F.SAXPY, trace)
            (folder / "metrics.json").write_text(json.dumps(F.json_mutate(F.METRICS, rnd)))
            (folder / "spec.lock.yaml").write_text(yaml.safe_dump(F.json_mutate(F.SPEC, rnd)))
            outcome, detail = F.beside_case(trace)
        counts[kind][outcome] += 1
        if outcome == F.DIFF:
            print(f"SILENT DIFFERENCE ({kind}, case {i}): {detail[:2000]}")
            break
    for kind in kinds:
        c = counts[kind]
        print(
            f"{kind}: {sum(c.values())} mutations: {c[F.SAME]} read as the reference reads them,"
            f" {c[F.NOTED]} read so with what was left out noted, {c[F.REFUSED]} refused (a"
            f" note or one sentence), {c[F.LENIENT]} read by libyaml where PyYAML's scanner"
            f" refuses, {c[F.DIFF]} silent differences"
        )
    return 1 if any(c[F.DIFF] for c in counts.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
