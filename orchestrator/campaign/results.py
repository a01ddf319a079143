"""After the last job: collect every variant, extract its metrics, find the baseline, and
compare each variant with the same variant of the baseline campaign."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import TypeGuard

from pydantic import Field

from orchestrator.analysis.catalogue.views import campaign_values
from orchestrator.analysis.metrics import Metrics
from orchestrator.analysis.presentation.changes import WhatChanged
from orchestrator.analysis.presentation.compare import change_text
from orchestrator.campaign import bands, figures
from orchestrator.campaign.bands import NoiseBand
from orchestrator.campaign.model import METRICS, Band, Campaign, Threshold, repeat_of
from orchestrator.campaign.sources import (
    PHASE_SOURCES,
    WORKLOAD_KEYS,
    run_files,
    trace_files,
    why_absent,
)
from orchestrator.core.base import Strict
from orchestrator.core.errors import GhRunError, UserError
from orchestrator.executors.base import Warn
from orchestrator.runs import lifecycle as R
from orchestrator.store import campaigns as db
from orchestrator.store.db import SUBMIT_FAILED, Run, Store, record

# Trace analyses of a campaign's runs, by run id: made once, read by the report.
Analyses = dict[str, Metrics]


def extract_metrics(
    home: Path, run: Run, warn: Warn | None = None, analyses: Analyses | None = None
) -> dict[str, float | None]:
    """The run's metrics: its metrics.json, plus trace analysis when it left a trace (kept
    in `analyses`, run id → Metrics, for the run reports and "what changed")."""
    values: dict[str, float | None] = {}
    folder = run_files(home, run)
    mfile = folder / "metrics.json"
    if mfile.is_file():
        from orchestrator.analysis.readers.side_inputs import SideInputError, load_json

        try:
            data = load_json(mfile)
        except SideInputError as exc:
            if warn:
                warn(f"{run.run_id}: metrics.json is not read ({exc}); skipped")
            data = {}
        if not isinstance(data, dict):
            data = {}
        for src, key in WORKLOAD_KEYS.items():
            if _is_number(value := data.get(src)):
                values[key] = float(value)
        for src, prefix in PHASE_SOURCES.items():
            phases = data.get(src)
            for name, value in phases.items() if isinstance(phases, dict) else ():
                if _is_number(value) and isinstance(name, str) and 0 < len(name) <= 64:
                    values[prefix + name] = float(value)
    if run.submitted_at and run.ended_at:
        values["elapsed_s"] = max(0.0, run.ended_at - run.submitted_at)
    traces = trace_files(folder)
    if traces:
        try:
            from orchestrator.analysis import analyze_paths

            m = analyze_paths(traces, label=run.run_id)
            values.update(trace_metrics(m))
            if analyses is not None:
                analyses[run.run_id] = m
        except (GhRunError, ValueError, OSError) as exc:
            if warn:
                warn(f"{run.run_id}: trace analysis failed ({exc}); metrics.json only")
    return values


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def trace_metrics(m: Metrics) -> dict[str, float | None]:
    """The campaign metrics a trace gives (the metric catalogue's campaign view): GPU shares
    when it has a GPU timeline (CPU-only traces have none), the others where they have a value
    (the data-wait share of the steps whenever it has steps)."""
    return campaign_values(m)


def collect_all(
    store: Store,
    campaign_id: str,
    home: Path,
    warn: Warn | None = None,
    analyses: Analyses | None = None,
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
        values = extract_metrics(home, run, warn, analyses)
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
    # How the night was judged: "band" (learned from `band_nights` good nights), "warm-up"
    # (too few good nights for a band: recorded, flagged only beyond the warm-up factor of
    # their median, the `baseline`), or against one baseline night ("last-good", "pinned");
    # `note` says why no band was used.
    rule: str = "last-good"
    band_low: float | None = None
    band_high: float | None = None
    band_nights: int | None = None
    note: str | None = None
    # The figure whose values were compared: the metric itself, or a figure that measures the
    # same thing which the campaign file allows (`thresholds.METRIC.fallback`), in the metric's
    # unit; None when tonight has none of them. `figure_note`: why a fallback judged.
    figure: str | None = None
    figure_note: str | None = None
    # Why the threshold could not be evaluated (a sentence naming the metric and the cause):
    # a failure of the judgement, never a pass (campaign state UNJUDGED, exit 1).
    unjudged: str | None = None

    @property
    def recorded(self) -> bool:
        """Judged against nothing by the campaign's own rule (a first night, a warm-up
        without history): its value is recorded and sets the baseline of the nights after."""
        return self.unjudged is None and self.value is not None and self.baseline is None


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
    # With repeats: every run of the variant tonight (its metrics are their medians).
    run_ids: list[str] = Field(default_factory=list)
    report: str | None = None  # the run's own report, relative to the campaign report
    what_changed: WhatChanged | None = None

    @property
    def regressed(self) -> bool:
        return any(f.regression for f in self.findings)

    @property
    def unjudged(self) -> list[Finding]:
        return [f for f in self.findings if f.unjudged is not None]


class CampaignResult(Strict):
    campaign_id: str
    name: str
    state: str
    baseline_id: str | None
    baseline_note: str
    variants: list[VariantResult]
    thresholds: dict[str, dict[str, float | list[str] | None]]
    band: dict[str, float] | None = None

    @property
    def regressions(self) -> list[Finding]:
        return [f for v in self.variants for f in v.findings if f.regression]

    @property
    def failed(self) -> list[VariantResult]:
        return [v for v in self.variants if v.state != "COMPLETED"]

    @property
    def unjudged(self) -> list[Finding]:
        """The thresholds of completed variants that could not be evaluated."""
        return [f for v in self.variants for f in v.unjudged]


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


def by_variant(store: Store, rec: db.CampaignRecord) -> dict[str, list[Run]]:
    """variant → its runs (one, or one per repeat), in plan order."""
    runs = db.runs_of(store, rec.campaign_id)
    try:
        names = repeat_of(Campaign.model_validate_json(rec.campaign_json))
    except (GhRunError, ValueError):
        names = {}
    out: dict[str, list[Run]] = {}
    for name, run in runs.items():
        out.setdefault(names.get(name, name), []).append(run)
    return out


def _median(values: list[float | None]) -> float | None:
    xs = [v for v in values if v is not None]
    if not xs:
        return None
    if any(math.isnan(x) for x in xs):
        return math.nan  # a NaN repeat is not outvoted: it is reported
    return statistics.median(xs)


def night_values(
    runs: list[Run], metrics: dict[str, dict[str, float | None]]
) -> dict[str, float | None]:
    """A variant's metrics for one night: the median over its completed repeats (a failed
    repeat has none; with no completed repeat, whatever the runs recorded)."""
    done = [r for r in runs if r.state == "COMPLETED"] or runs
    keys = dict.fromkeys(k for r in done for k in metrics.get(r.run_id, {}))
    return {k: _median([metrics.get(r.run_id, {}).get(k) for r in done]) for k in keys}


class History(Strict):
    """The good nights a band learns from: variant → metric → [(value, run id, night)]
    (night 0 is the newest), and how many nights each variant has."""

    campaigns: list[str]
    values: dict[str, dict[str, list[tuple[float, str, int]]]]
    nights: dict[str, int]


def band_history(store: Store, rec: db.CampaignRecord, nights: int) -> History:
    """Each variant's last `nights` good nights before this campaign: ended campaigns of the
    name where that variant completed and was not flagged (a regression elsewhere in the
    night does not spoil its other variants; a night judged before schema 3 counts only if
    the whole campaign passed)."""
    rows = store.rows(
        "SELECT * FROM campaigns WHERE name = ? AND state IN (?, ?, ?, ?) AND created_at < ? "
        "AND campaign_id != ? ORDER BY created_at DESC LIMIT ?",
        (
            rec.name,
            db.PASSED,
            db.REGRESSED,
            db.FAILED,
            db.UNJUDGED,
            rec.created_at,
            rec.campaign_id,
            nights * 4,
        ),
    )
    values: dict[str, dict[str, list[tuple[float, str, int]]]] = {}
    count: dict[str, int] = {}
    used: list[str] = []
    for night, past in enumerate(record(db.CampaignRecord, r) for r in rows):
        flags = {
            r["run_id"]: r["regressed"]
            for r in store.rows(
                "SELECT run_id, regressed FROM campaign_variants WHERE campaign_id = ?",
                (past.campaign_id,),
            )
        }
        grouped = by_variant(store, past)
        ms = store.metrics_of([r.run_id for rs in grouped.values() for r in rs])
        for variant, runs in grouped.items():
            good = all(
                r.state == "COMPLETED"
                and (
                    flags.get(r.run_id) == 0
                    or (flags.get(r.run_id) is None and past.state == db.PASSED)
                )
                for r in runs
            )
            if not good or count.get(variant, 0) >= nights:
                continue
            count[variant] = count.get(variant, 0) + 1
            if past.campaign_id not in used:
                used.append(past.campaign_id)
            for run in runs:
                for key, v in ms.get(run.run_id, {}).items():
                    if v is not None and math.isfinite(v):
                        values.setdefault(variant, {}).setdefault(key, []).append(
                            (v, run.run_id, night)
                        )
    return History(campaigns=used, values=values, nights=count)


def _judge(
    variant: str,
    key: str,
    th: Threshold,
    value: float | None,
    base: float | None,
    rule: str,
    band: NoiseBand | None,
    note: str | None,
) -> Finding:
    change = why = None
    if value is not None and math.isnan(value):
        # A metric that came out NaN cannot pass a threshold: it is reported as a
        # regression, never waved through as "no change".
        why = change = "NaN (not a number): cannot be compared with the baseline"
    elif band is not None and value is not None:
        why = bands.judge(value, band, th)
        # against the band's centre; a percentage, a factor, "new" or "from ~0"
        change = why or f"{change_text(value, band.center, '')} (inside or beside the band)"
        base = band.center
    elif value is not None and base is not None and math.isnan(base):
        change = "the baseline's value is NaN: not compared"
    elif value is not None and base is not None:
        why = th.crossed(value, base)
        # a percentage, a factor, "new" or "from ~0": never a percent of a ~0 baseline
        change = why or change_text(value, base, "")
    return Finding(
        variant=variant,
        metric=key,
        value=value,
        baseline=base,
        change=change,
        regression=why is not None,
        rule="band" if band is not None else rule,
        band_low=band.low if band else None,
        band_high=band.high if band else None,
        band_nights=band.nights if band else None,
        note=note,
    )


def _warmup(
    variant: str,
    key: str,
    th: Threshold,
    value: float | None,
    past: list[tuple[float, str, int]],
    nights: int,
    band: Band,
) -> Finding:
    """A night in the band's warm-up (fewer than `min_nights` good nights): recorded, so that
    it teaches the band, and flagged only when the metric moved beyond `warmup_factor` of the
    good nights' median (and past its threshold) in a bad direction. Judging it against one
    night's fixed limits is what cried wolf on a busy machine (issue 30)."""
    have = f"{nights} good night{'s' if nights != 1 else ''} of history"
    note = (
        f"{have}, the band needs {band.min_nights}: recorded, not judged (flagged only beyond "
        f"x{band.warmup_factor:g} of the good nights' median)"
    )
    base = statistics.median(v for v, _, _ in past) if past else None
    why = change = None
    if value is not None and math.isnan(value):
        why = change = "NaN (not a number): cannot be compared with the baseline"
    elif value is not None and base is not None:
        why = bands.gross(value, base, th, band.warmup_factor)
        n = len({night for _, _, night in past})
        median_of = f"the median of {n} good night{'s' if n != 1 else ''}"
        change = why or f"{change_text(value, base, '')} against {median_of}"
    return Finding(
        variant=variant,
        metric=key,
        value=value,
        baseline=base,
        change=change,
        regression=why is not None,
        rule="warm-up",
        note=note,
    )


@dataclass
class _Variant:
    """One variant of tonight as a threshold is judged: its runs and values, the baseline
    night's values, and (with a band) its good nights' values by figure."""

    name: str
    runs: list[Run]
    mine: dict[str, float | None]
    theirs: dict[str, float | None]
    past: dict[str, list[tuple[float, str, int]]]
    nights: int
    completed: bool


@dataclass
class _Judge:
    """How tonight is judged: the campaign's rule, its baseline night, where the files are."""

    home: Path
    campaign: Campaign
    file: str
    base_id: str | None
    pinned_missing: bool
    store_path: Path

    def _run(self, v: _Variant) -> Run:
        return next((r for r in v.runs if r.state == "COMPLETED"), v.runs[0])

    def _field(self, key: str) -> str:
        return f"{self.file}: thresholds.{key}"

    def not_measured(self, v: _Variant, key: str, th: Threshold) -> str:
        run = self._run(v)
        text = f"{self._field(key)}: {key} was not measured: {why_absent(self.home, run, key)}"
        for fig in th.fallback:
            text += f"; nor its fallback {fig}: {why_absent(self.home, run, fig)}"
        others = [f for f in figures.alternatives(key) if f not in th.fallback]
        if others:
            fix = (
                "make the job measure it, or let a figure that measures the same thing judge: "
                f"fallback: [{', '.join(others)}] in thresholds.{key}"
            )
        else:
            fix = "make the job measure it, or remove the threshold"
        return f"{text}; {fix}"

    def figure_note(self, v: _Variant, key: str, fig: str) -> str:
        unit = figures.idea_of(key)
        what = f"{fig} ({METRICS[fig]}), taken in {unit.unit if unit else 'the same unit'}"
        if v.mine.get(key) is None:
            why = why_absent(self.home, self._run(v), key, named=False)
            return (
                f"{key} was not measured ({why}): judged by {what}, as "
                f"thresholds.{key}.fallback allows"
            )
        return (
            f"the nights compared with have no {key}: both judged by {what}, as "
            f"thresholds.{key}.fallback allows"
        )

    def threshold(self, v: _Variant, key: str, th: Threshold) -> tuple[Finding, str | None]:
        """One threshold of one variant, and the good run nearest its band's centre (what
        "what changed" compares with), when a band judged."""
        band_cfg = self.campaign.baseline.band
        rule = self.campaign.baseline.policy
        warm = band_cfg is not None and v.nights < band_cfg.min_nights

        def reference(fig: str) -> bool:
            if band_cfg is None:
                return v.theirs.get(fig) is not None
            return bool(v.past.get(fig)) or (not warm and v.theirs.get(fig) is not None)

        chain = [key, *th.fallback]
        fig = figures.choose(chain, lambda f: v.mine.get(f) is not None, reference)
        if fig is None:
            return (
                Finding(
                    variant=v.name,
                    metric=key,
                    value=None,
                    baseline=None,
                    rule="warm-up" if warm else rule,
                    unjudged=self.not_measured(v, key, th) if v.completed else None,
                ),
                None,
            )
        raw = v.mine[fig]
        assert raw is not None
        value = figures.in_unit(fig, key, raw)
        past = [(figures.in_unit(fig, key, x), rid, n) for x, rid, n in v.past.get(fig, [])]
        their = v.theirs.get(fig)
        base = figures.in_unit(fig, key, their) if their is not None else None
        near = None
        if band_cfg is not None and warm:
            f = _warmup(v.name, key, th, value, past, v.nights, band_cfg)
        elif band_cfg is not None and past:
            band = bands.learn([x for x, _, _ in past], band_cfg, v.nights)
            f = _judge(v.name, key, th, value, base, rule, band, None)
            if band is not None:
                # The newest good night's run nearest the band's centre: what "what changed"
                # compares with.
                first = min(n for _, _, n in past)
                near = min(
                    ((x, rid) for x, rid, n in past if n == first),
                    key=lambda xr: abs(xr[0] - band.center),
                )[1]
        else:
            why_not = (
                f"no {fig} in the last {v.nights} good nights: compared with the last good night"
                if band_cfg is not None
                else None
            )
            f = _judge(v.name, key, th, value, base, rule, None, why_not)
        f.figure = fig
        if fig != key:
            f.figure_note = self.figure_note(v, key, fig)
        if v.completed and not math.isnan(value):
            f.unjudged = self.baseline_problem(v, key, fig, f, their)
        if f.recorded:
            sets = f"no earlier good night has {fig}: recorded, it sets the baseline"
            f.note = f"{f.note}; {sets}" if f.note else sets
        return f, near

    def baseline_problem(
        self, v: _Variant, key: str, fig: str, f: Finding, their: float | None
    ) -> str | None:
        """Why the baseline cannot judge this threshold, or None (a first night, which the
        campaign's rule makes the baseline, is no problem)."""
        if f.rule in ("band", "warm-up"):
            return None
        if self.campaign.baseline.policy == "pinned":
            cid = self.campaign.baseline.campaign_id
            if self.pinned_missing:
                return (
                    f"{self._field(key)}: the pinned baseline {cid} is not in {self.store_path}: "
                    "nothing to compare with; pin a campaign of this store (`gh-run campaign "
                    "list`), or use policy last-good"
                )
            if their is None:
                return (
                    f"{self._field(key)}: the pinned baseline {cid} has no {fig} for variant "
                    f"{v.name}: nothing to compare with; pin a campaign in which it was measured"
                )
        if their is not None and math.isnan(their):
            return (
                f"{self._field(key)}: the baseline's {fig} of variant {v.name} is NaN (not a "
                f"number, run {self.base_id}): nothing to compare with; pin another night"
            )
        return None


def evaluate(store: Store, campaign_id: str) -> CampaignResult:
    """Compare every variant with its band (enough good nights) or with the same variant of
    the baseline night; decide the state. A threshold that could not be evaluated (its figure
    not measured, a baseline that cannot judge) is UNJUDGED, never a pass."""
    rec = db.get_campaign(store, campaign_id)
    campaign = Campaign.model_validate_json(rec.campaign_json)
    grouped = by_variant(store, rec)
    base_id, note = find_baseline(store, rec, campaign)
    base_grouped = by_variant(store, db.get_campaign(store, base_id)) if base_id else {}
    metrics = store.metrics_of([r.run_id for rs in grouped.values() for r in rs])
    base_metrics = store.metrics_of([r.run_id for rs in base_grouped.values() for r in rs])
    band_cfg = campaign.baseline.band
    hist = band_history(store, rec, band_cfg.nights) if band_cfg else None
    judge = _Judge(
        home=store.home,
        campaign=campaign,
        file=Path(rec.file).name if rec.file else f"campaign {rec.name}",
        base_id=base_id,
        pinned_missing=campaign.baseline.policy == "pinned" and base_id is None,
        store_path=store.path,
    )
    results: list[VariantResult] = []
    for name, runs in grouped.items():
        base_runs = base_grouped.get(name, [])
        v = _Variant(
            name=name,
            runs=runs,
            mine=night_values(runs, metrics),
            theirs=night_values(base_runs, base_metrics) if base_runs else {},
            past=hist.values.get(name, {}) if hist else {},
            nights=hist.nights.get(name, 0) if hist else 0,
            completed=all(r.state == "COMPLETED" for r in runs),
        )
        findings: list[Finding] = []
        near: str | None = None
        for key, th in campaign.thresholds_of(name).items():
            finding, nearest = judge.threshold(v, key, th)
            findings.append(finding)
            near = near or nearest
        rep = _representative(runs, metrics, list(campaign.thresholds)) or runs[0]
        base_rep = near or (_representative(base_runs, base_metrics, list(campaign.thresholds)))
        results.append(
            VariantResult(
                variant=name,
                run_id=rep.run_id,
                state=next((r.state for r in runs if r.state != "COMPLETED"), "COMPLETED"),
                exit_code=next(
                    (r.exit_code for r in runs if r.state != "COMPLETED"), rep.exit_code
                ),
                job_id=rep.job_id,
                metrics=v.mine,
                baseline_run_id=base_rep.run_id if isinstance(base_rep, Run) else base_rep,
                baseline_metrics=v.theirs,
                findings=findings,
                run_ids=[r.run_id for r in runs],
            )
        )
    if any(v.state != "COMPLETED" for v in results):
        state = db.FAILED
    elif any(v.regressed for v in results):
        state = db.REGRESSED
    elif any(v.unjudged for v in results):
        state = db.UNJUDGED
    else:
        state = db.PASSED
    if band_cfg and hist is not None:
        note += (
            f"; bands from the last {len(hist.campaigns)} good night"
            f"{'s' if len(hist.campaigns) != 1 else ''} (up to {band_cfg.nights}, "
            f"{band_cfg.min_nights} needed; a variant with fewer is in its warm-up: recorded, "
            f"and flagged only beyond x{band_cfg.warmup_factor:g})"
        )
    return CampaignResult(
        campaign_id=campaign_id,
        name=rec.name,
        state=state,
        baseline_id=base_id,
        baseline_note=note,
        variants=results,
        thresholds={k: v.model_dump() for k, v in campaign.thresholds.items()},
        band=band_cfg.model_dump() if band_cfg else None,
    )


def _representative(
    runs: list[Run], metrics: dict[str, dict[str, float | None]], keys: list[str]
) -> Run | None:
    """The run whose first watched metric is nearest the night's median (one run: itself)."""
    if not runs:
        return None
    done = [r for r in runs if r.state == "COMPLETED"] or runs
    for key in [*keys, "step_time_s"]:
        vals = [(v, r) for r in done if (v := metrics.get(r.run_id, {}).get(key)) is not None]
        vals = [(v, r) for v, r in vals if math.isfinite(v)]
        if vals:
            mid = statistics.median(v for v, _ in vals)
            return min(vals, key=lambda vr: abs(vr[0] - mid))[1]
    return done[0]


class NightPoint(Strict):
    """One variant in one night of a trend: its value, or why there is none."""

    value: float | None
    state: str  # the run's state (the worst of its repeats); "ABSENT": not in that night


def trend(
    store: Store, name: str, metric: str, limit: int = 14
) -> list[tuple[db.CampaignRecord, dict[str, NightPoint]]]:
    """Past campaigns of `name` (oldest first) with variant → its point for `metric`."""
    out = []
    for rec in reversed(db.list_campaigns(store, name, limit)):
        grouped = by_variant(store, rec)
        values = store.metrics_of([r.run_id for rs in grouped.values() for r in rs])
        points = {}
        for variant, runs in grouped.items():
            state = next((r.state for r in runs if r.state != "COMPLETED"), "COMPLETED")
            points[variant] = NightPoint(value=night_values(runs, values).get(metric), state=state)
        out.append((rec, points))
    return out


def history(
    store: Store, name: str, metric: str, limit: int = 14
) -> list[tuple[db.CampaignRecord, dict[str, float | None]]]:
    """Past campaigns of `name` (oldest first) with variant → value of `metric`."""
    return [
        (rec, {v: p.value for v, p in points.items()})
        for rec, points in trend(store, name, metric, limit)
    ]
