"""After the last job: collect every variant, extract its metrics, find the baseline, and
compare each variant with the same variant of the baseline campaign."""

from __future__ import annotations

import json
import math
from pathlib import Path

from pydantic import Field

from orchestrator import artifacts
from orchestrator import runs as R
from orchestrator.analysis.compare import change_text
from orchestrator.base import Strict
from orchestrator.campaign import records as db
from orchestrator.campaign.model import Campaign
from orchestrator.errors import GhRunError, UserError
from orchestrator.executors.base import Warn
from orchestrator.store import SUBMIT_FAILED, Run, Store

# metrics.json (written by workloads.sft, or any workload following its contract) → our keys.
WORKLOAD_KEYS = {
    "median_step_time_s": "step_time_s",
    "tokens_per_s": "tokens_per_s",
    "peak_gpu_memory_bytes": "peak_gpu_memory_bytes",
    "peak_host_rss_bytes": "peak_host_rss_bytes",
    "final_loss": "final_loss",
}


def _run_files(home: Path, run: Run) -> Path:
    collected = artifacts.store_dir(home, run.run_id) / "artifacts"
    if collected.is_dir() or run.transport:  # a remote run's folder is on the cluster
        return collected
    return Path(run.run_dir) / "artifacts"


def extract_metrics(home: Path, run: Run, warn: Warn | None = None) -> dict[str, float | None]:
    """The run's metrics: its metrics.json, plus trace analysis when it left a GPU trace."""
    values: dict[str, float | None] = {}
    folder = _run_files(home, run)
    mfile = folder / "metrics.json"
    if mfile.is_file():
        try:
            data = json.loads(mfile.read_text())
        except (OSError, ValueError) as exc:
            if warn:
                warn(f"{run.run_id}: metrics.json is not readable JSON ({exc}); skipped")
            data = {}
        for src, key in WORKLOAD_KEYS.items():
            value = data.get(src) if isinstance(data, dict) else None
            if isinstance(value, int | float) and not isinstance(value, bool):
                values[key] = float(value)
    if run.submitted_at and run.ended_at:
        values["elapsed_s"] = max(0.0, run.ended_at - run.submitted_at)
    traces = [
        p
        for p in folder.glob("*")
        if p.name.endswith((".sqlite", ".pt.trace.json", ".pt.trace.json.gz"))
    ]
    if traces:
        try:
            from orchestrator.analysis import analyze_paths

            m = analyze_paths(traces)
            agg = m.aggregate
            if agg.span_ns > 0:  # a GPU timeline (CPU-only traces have none)
                values["gpu_idle_pct"] = agg.idle_pct_mean
                values["gpu_compute_pct"] = agg.temporal_compute_pct_mean
                values["kernel_pct"] = agg.kernel_pct_mean
                values["um_share_pct"] = agg.um_share_of_memory_ops_pct_mean
        except (GhRunError, ValueError, OSError) as exc:
            if warn:
                warn(f"{run.run_id}: trace analysis failed ({exc}); metrics.json only")
    return values


def collect_all(
    store: Store, campaign_id: str, home: Path, warn: Warn | None = None
) -> dict[str, Run]:
    """Collect (verified) and extract metrics for every ended variant; variant → run."""
    runs = db.runs_of(store, campaign_id)
    ended = {n: r for n, r in runs.items() if r.terminal and r.state != SUBMIT_FAILED}
    # All at once: runs on a cluster reached over SSH come back in one copy.
    todo = [r for r in ended.values() if r.collected_at is None]
    results = R.collect_many(store, todo, home, warn)
    for name, run in ended.items():
        result = results.get(run.run_id)
        if isinstance(result, GhRunError) and warn:
            warn(f"variant {name}: collect failed: {result}")
        values = extract_metrics(home, run, warn)
        if values:
            store.put_metrics(run.run_id, values)
    return db.runs_of(store, campaign_id)


class Finding(Strict):
    variant: str
    metric: str
    value: float | None
    baseline: float | None
    change: str | None = None
    regression: bool = False


class VariantResult(Strict):
    variant: str
    run_id: str
    state: str
    exit_code: int | None
    job_id: str | None
    metrics: dict[str, float | None]
    baseline_run_id: str | None = None
    baseline_metrics: dict[str, float | None] = Field(default_factory=dict)
    findings: list[Finding] = Field(default_factory=list)

    @property
    def regressed(self) -> bool:
        return any(f.regression for f in self.findings)


class CampaignResult(Strict):
    campaign_id: str
    name: str
    state: str
    baseline_id: str | None
    baseline_note: str
    variants: list[VariantResult]
    thresholds: dict[str, dict[str, float | None]]

    @property
    def regressions(self) -> list[Finding]:
        return [f for v in self.variants for f in v.findings if f.regression]

    @property
    def failed(self) -> list[VariantResult]:
        return [v for v in self.variants if v.state != "COMPLETED"]


def _pinned_exists(store: Store, cid: str) -> bool:
    # The exact id: variants are looked up by it, so a prefix would compare with nothing.
    return bool(store.rows("SELECT 1 FROM campaigns WHERE campaign_id = ?", (cid,)))


def check_pinned_baseline(home: Path, campaign: Campaign, src: str) -> None:
    """Before a campaign is planned: a pinned baseline must be a campaign in the store of this
    gh-run home (a home without a store has none, and is not given one by asking)."""
    cid = campaign.baseline.campaign_id
    if campaign.baseline.policy != "pinned" or not cid:
        return
    path = home / "state.db"
    store = Store(home) if path.is_file() else None
    if store is not None and _pinned_exists(store, cid):
        return
    recent = [r.campaign_id for r in db.list_campaigns(store, campaign.name, 5)] if store else []
    fix = (
        f"pick one of the recent {campaign.name} campaigns ({', '.join(recent)})"
        if recent
        else f"use policy last-good until a campaign named {campaign.name} has run"
    )
    raise UserError(
        f"{src}: baseline.campaign_id: no campaign {cid!r} in {path}; {fix} "
        "(`gh-run campaign list`)"
    )


def find_baseline(
    store: Store, rec: db.CampaignRecord, campaign: Campaign
) -> tuple[str | None, str]:
    """(baseline campaign id, a sentence saying how it was chosen)."""
    if campaign.baseline.policy == "pinned":
        cid = campaign.baseline.campaign_id
        assert cid
        if not _pinned_exists(store, cid):
            # Checked when planned; gone since (another store, a deleted row). The night's
            # results still deserve a report, so compare with nothing rather than fail here.
            return None, f"pinned campaign {cid} is not in {store.path}: nothing compared"
        return cid, f"pinned campaign {cid}"
    rows = store.rows(
        "SELECT campaign_id FROM campaigns WHERE name = ? AND state = ? AND created_at < ? "
        "AND campaign_id != ? ORDER BY created_at DESC LIMIT 1",
        (rec.name, db.PASSED, rec.created_at, rec.campaign_id),
    )
    if not rows:
        return None, f"no earlier good campaign named {rec.name}: this one sets the baseline"
    cid = rows[0]["campaign_id"]
    return cid, f"last good campaign of {rec.name}: {cid}"


def evaluate(store: Store, campaign_id: str) -> CampaignResult:
    """Compare every variant with the same variant of the baseline; decide the state."""
    rec = db.get_campaign(store, campaign_id)
    campaign = Campaign.model_validate_json(rec.campaign_json)
    runs = db.runs_of(store, campaign_id)
    base_id, note = find_baseline(store, rec, campaign)
    base_runs = db.runs_of(store, base_id) if base_id else {}
    metrics = store.metrics_of([r.run_id for r in runs.values()])
    base_metrics = store.metrics_of([r.run_id for r in base_runs.values()])
    results: list[VariantResult] = []
    for name, run in runs.items():
        mine = metrics.get(run.run_id, {})
        base_run = base_runs.get(name)
        theirs = base_metrics.get(base_run.run_id, {}) if base_run else {}
        findings: list[Finding] = []
        for key, th in campaign.thresholds.items():
            value, base = mine.get(key), theirs.get(key)
            change = why = None
            if value is not None and math.isnan(value):
                # A metric that came out NaN cannot pass a threshold: it is reported as a
                # regression, never waved through as "no change".
                why = change = "NaN (not a number): cannot be compared with the baseline"
            elif value is not None and base is not None and math.isnan(base):
                change = "the baseline's value is NaN: not compared"
            elif value is not None and base is not None:
                why = th.crossed(value, base)
                # a percentage, a factor, "new" or "from ~0": never a percent of a ~0 baseline
                change = why or change_text(value, base, "")
            findings.append(
                Finding(
                    variant=name,
                    metric=key,
                    value=value,
                    baseline=base,
                    change=change,
                    regression=why is not None,
                )
            )
        results.append(
            VariantResult(
                variant=name,
                run_id=run.run_id,
                state=run.state,
                exit_code=run.exit_code,
                job_id=run.job_id,
                metrics=mine,
                baseline_run_id=base_run.run_id if base_run else None,
                baseline_metrics=theirs,
                findings=findings,
            )
        )
    if any(v.state != "COMPLETED" for v in results):
        state = db.FAILED
    elif any(v.regressed for v in results):
        state = db.REGRESSED
    else:
        state = db.PASSED
    return CampaignResult(
        campaign_id=campaign_id,
        name=rec.name,
        state=state,
        baseline_id=base_id,
        baseline_note=note,
        variants=results,
        thresholds={k: v.model_dump() for k, v in campaign.thresholds.items()},
    )


def history(
    store: Store, name: str, metric: str, limit: int = 14
) -> list[tuple[db.CampaignRecord, dict[str, float | None]]]:
    """Past campaigns of `name` (oldest first) with variant → value of `metric`."""
    out = []
    for rec in reversed(db.list_campaigns(store, name, limit)):
        runs = db.runs_of(store, rec.campaign_id)
        values = store.metrics_of([r.run_id for r in runs.values()])
        out.append((rec, {v: values.get(r.run_id, {}).get(metric) for v, r in runs.items()}))
    return out
