"""The figures of bench/campaign_noise.sh, read from its gh-run home: per night its verdict,
alarms and what the load did to wall time; over the ordinary nights the false alarms; on the
planted night the detection and what changed. Also writes HOME/history.json: every night's
per-variant metrics (what tests/unit/test_campaign_noise_history.py replays; a recording is
kept in tests/data/campaign_noise/).

    python bench/campaign_noise_summary.py HOME NIGHTS PLANTED_COST
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

import bursty_load  # bench/, beside this file

from orchestrator.campaign.results import by_variant, night_values
from orchestrator.store import campaigns as db
from orchestrator.store.db import Store

WATCH = "step_cpu_relative"  # what every canary variant is judged on (campaigns/canary.yaml)
PLANTED = "data-bound"


def _spread(values: list[float]) -> float:
    return max(values) / min(values) if values and min(values) > 0 else float("nan")


def main(home: Path, nights: int, planted_cost: str) -> int:
    walls: dict[str, tuple[int, float]] = {}
    ids: dict[str, str] = {}
    for line in (home / "nights.txt").read_text().splitlines():
        label, rc, wall, cid = line.split()
        walls[label] = (int(rc), float(wall))
        ids[label] = cid
    labels = [f"ordinary-{i}" for i in range(1, nights + 1)] + ["planted"]
    store = Store(home)
    history: list[dict[str, Any]] = []
    lost: list[str] = []
    false_alarms: dict[str, int] = {}
    per_variant: dict[str, dict[str, list[float]]] = {}
    print(
        f"{'night':<11} {'state':<9} {'exit':>4} {'wall':>5}  {'alarms':>6}  wall per step "
        f"(min..max over variants)  {PLANTED} {WATCH} vs what judged it  |  alarms"
    )
    for label in labels:
        rc, wall = walls.get(label, (-1, float("nan")))
        rec = db.get_campaign(store, ids[label]) if ids.get(label, "-") != "-" else None
        if rec is None or not rec.report_dir:
            # Not a verdict: the campaign never ran to its report (the cluster was down, say).
            print(f"{label:<11} {'-':<9} {rc:>4} {wall:>4.0f}s  no report: see {label}.log")
            lost.append(label)
            continue
        report = json.loads((Path(rec.report_dir) / "campaign.json").read_text())
        grouped = by_variant(store, rec)
        metrics = store.metrics_of([r.run_id for rs in grouped.values() for r in rs])
        values = {v: night_values(rs, metrics) for v, rs in grouped.items()}
        history.append(
            {"label": label, "campaign_id": rec.campaign_id, "state": rec.state, "wall_s": wall}
            | {"variants": values}
        )
        steps = [v["step_time_s"] for v in values.values() if v.get("step_time_s")]
        step_range = f"{min(steps) * 1e3:.0f}..{max(steps) * 1e3:.0f} ms" if steps else "-"
        db_var = next(v for v in report["variants"] if v["variant"] == PLANTED)
        f = next(f for f in db_var["findings"] if f["metric"] == WATCH)
        if f["rule"] == "band":
            ref = f"band {f['band_low']:.2f}..{f['band_high']:.2f} ({f['band_nights']} nights)"
        elif f["baseline"] is not None:
            ref = f"{f['rule']}: median {f['baseline']:.2f}"
        else:
            ref = f"{f['rule']}: nothing yet"
        regs = [f"{g['variant']}:{g['metric']}({g['rule']})" for g in report["regressions"]]
        value = f"{f['value']:.2f}" if f["value"] is not None else "-"
        print(
            f"{label:<11} {report['state']:<9} {rc:>4} {wall:>4.0f}s  {len(regs):>6}  "
            f"{step_range:<31} {value} vs {ref}  |  {' '.join(regs) or '-'}"
        )
        if label != "planted":
            for g in report["regressions"]:
                false_alarms[g["rule"]] = false_alarms.get(g["rule"], 0) + 1
            for variant, vals in values.items():
                for key in ("step_time_s", "step_cpu_time_s", WATCH):
                    if vals.get(key):
                        per_variant.setdefault(variant, {}).setdefault(key, []).append(vals[key])
    n_variants = len(history[0]["variants"]) if history else 0
    print()
    if lost:
        print(f"nights without a report (not counted): {', '.join(lost)}")
    by_rule = ", ".join(f"{n} {r}" for r, n in false_alarms.items()) or "none"
    judged = sum(1 for n in history if n["label"] != "planted")
    print(
        f"false alarms over {judged} ordinary nights x {n_variants} variants: "
        f"{sum(false_alarms.values())} ({by_rule})"
    )
    print("spread over the ordinary nights (max/min of the nightly value):")
    for variant, keys in per_variant.items():
        cells = "  ".join(f"{k} x{_spread(vs):.2f}" for k, vs in keys.items())
        print(f"  {variant:<11} {cells}")
    planted = next((n for n in history if n["label"] == "planted"), None)
    if planted is None:
        print(f"planted night: no report (exit {walls.get('planted')}; see {home}/planted.log)")
    else:
        folder = Path(db.get_campaign(store, planted["campaign_id"]).report_dir or "")
        report = json.loads((folder / "campaign.json").read_text())
        f = next(
            f
            for v in report["variants"]
            if v["variant"] == PLANTED
            for f in v["findings"]
            if f["metric"] == WATCH
        )
        hit = any(g["variant"] == PLANTED and g["metric"] == WATCH for g in report["regressions"])
        over = (f["value"] / f["baseline"] - 1) * 100 if f["baseline"] else float("nan")
        others = sorted({g["variant"] for g in report["regressions"]} - {PLANTED})
        print(
            f"planted night (item cost 20 -> {planted_cost}): {PLANTED} {WATCH} {over:+.1f}% over "
            f"the {'band centre' if f['rule'] == 'band' else f['rule'] + ' median'}; detected "
            f"{int(hit)}/1; other variants flagged: {', '.join(others) or 'none'}"
        )
        changed = next(v for v in report["variants"] if v["variant"] == PLANTED)["what_changed"]
        if changed:
            print(f"what changed: {changed['finding']}")
            for p in changed["phases"]:
                pct = f"{p['change_pct']:+.0f}%" if p["change_pct"] is not None else "-"
                print(
                    f"  {p['name']:<10} {p['baseline_ms'] or 0:7.2f} -> {p['value_ms'] or 0:7.2f}"
                    f" ms  {pct}"
                )
    ordinary = [walls[x][1] for x in labels[:-1] if x in walls and x not in lost]
    if ordinary:
        print(
            f"canary wall time per night (submit to report): median "
            f"{statistics.median(ordinary):.0f} s, max {max(ordinary):.0f} s"
        )
    load_log = home / "load.log"
    load = bursty_load.summary(load_log) if load_log.is_file() else "none added"
    print(load)
    doc = {"planted_item_cost": int(planted_cost), "load": load, "nights": history}
    (home / "history.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"history: {home / 'history.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]))
