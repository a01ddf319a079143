"""After the last job: collect, analyse, compare, report, record the verdict, notify."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.campaign import explain, report
from orchestrator.campaign.model import Campaign, Notify
from orchestrator.campaign.results import (
    Analyses,
    CampaignResult,
    collect_all,
    evaluate,
    trace_metrics,
)
from orchestrator.campaign.submission import campaign_dir
from orchestrator.executors.base import Warn
from orchestrator.store import campaigns as db
from orchestrator.store.db import Store

# Exit codes of `campaign run --wait` / `resume`: 0 passed, 1 a variant failed or a threshold
# could not be judged (or gh-run itself failed), 2 bad input, 3 a threshold was crossed. A
# regression outranks a failed variant or an unjudged threshold:
# nightly alerting keys on 3, and a regression found in the variants that did run is news
# whatever happened to the others (docs/campaigns.md, "Exit codes").
EXIT_REGRESSION = 3
EXIT_FAILED = 1


@dataclass
class Outcome:
    result: CampaignResult
    paths: dict[str, Path]
    notified: str | None
    # `try_advice`: the tries scored and submitted tonight, a line each
    tries: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return exit_code(self.result)


def exit_code(result: CampaignResult) -> int:
    """3 if any threshold was crossed, else 1 if any variant did not complete or any threshold
    could not be judged, else 0."""
    if result.regressions:
        return EXIT_REGRESSION
    if result.failed or result.unjudged:
        return EXIT_FAILED
    return 0


def verdict(result: CampaignResult) -> str:
    """The words for the summary line: both problems when there are both."""
    words = []
    if result.failed:
        words.append(f"FAILED ({_count(len(result.failed), 'variant')})")
    if result.regressions:
        words.append(f"REGRESSED ({_count(len(result.regressions), 'regression')})")
    if result.unjudged:
        words.append(f"UNJUDGED ({_count(len(result.unjudged), 'threshold')})")
    return " and ".join(words) or result.state


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def notify_argv(notify: Notify, report_path: Path) -> list[str]:
    """The notify argv with `{report}` replaced; never through a shell."""
    return [part.replace("{report}", str(report_path)) for part in notify.command]


def run_notify(notify: Notify, report_path: Path, warn: Warn | None) -> str:
    argv = notify_argv(notify, report_path)
    try:
        res = subprocess.run(
            argv, capture_output=True, text=True, timeout=notify.timeout_s, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        msg = f"notify command {argv[0]} failed: {exc}"
        if warn:
            warn(msg)
        return msg
    if res.returncode != 0 and warn:
        warn(f"notify command {argv[0]} exited {res.returncode}: {res.stderr.strip()[-300:]}")
    return f"{argv[0]} exited {res.returncode}"


def finish(store: Store, campaign_id: str, home: Path, warn: Warn | None = None) -> Outcome:
    """After the last job: collect every run (its metrics, its traces analysed), then judge."""
    analyses: Analyses = {}
    collect_all(store, campaign_id, home, warn, analyses)
    return judge(store, campaign_id, home, analyses, warn)


def judge_arrived(
    store: Store,
    campaign_id: str,
    home: Path,
    arrived: Analyses,
    warn: Warn | None = None,
) -> Outcome:
    """Judge a campaign where its runs' analyses arrive (`analyze --on-cluster CAMPAIGN`: one
    analysis per run, made by the reduce job where the reports lie): each run's trace figures
    recorded from its analysis (beside what its metrics.json gave), then the judgement, the
    run reports and the campaign report, from these analyses, nothing read again here."""
    runs = {r.run_id for r in db.runs_of(store, campaign_id).values()}
    for run_id, m in arrived.items():
        if run_id in runs:
            store.put_metrics(run_id, trace_metrics(m))
    return judge(store, campaign_id, home, dict(arrived), warn)


def judge(
    store: Store, campaign_id: str, home: Path, analyses: Analyses, warn: Warn | None = None
) -> Outcome:
    """Judge the campaign from the metrics in the store, write the run reports (from
    `analyses`, run id → Metrics, where a run has one), what changed and the report, then
    record the verdict and notify."""
    rec = db.get_campaign(store, campaign_id)
    campaign = Campaign.model_validate_json(rec.campaign_json)
    result = evaluate(store, campaign_id)
    out_dir = campaign_dir(home, campaign_id) / "report"
    explain.run_reports(store, home, result, out_dir, analyses, warn)
    explain.explain(store, home, result, analyses, warn)
    # The report first, the verdict after: a campaign marked ended always has its report, and
    # one that crashed in between is not ended, so `campaign resume` writes the report. (The
    # trend plots read tonight's metrics, already in the store; not the verdict.)
    paths = report.write(store, result, out_dir)
    name_of = {run.run_id: name for name, run in db.runs_of(store, campaign_id).items()}
    db.set_verdicts(
        store,
        campaign_id,
        {name_of[rid]: v.regressed for v in result.variants for rid in v.run_ids or [v.run_id]},
    )
    db.set_campaign(
        store,
        campaign_id,
        state=result.state,
        baseline_id=result.baseline_id,
        regressions=len(result.regressions),
        ended_at=time.time(),
        report_dir=str(out_dir),
    )
    tries: list[str] = []
    if campaign.try_advice:
        from orchestrator.campaign import advice_tries

        tries = advice_tries.score_ended(store, home, warn)
        tries += advice_tries.submit_tries(store, home, campaign, campaign_id, analyses, warn)
    notified = None
    problem = result.state != db.PASSED
    if campaign.notify and (campaign.notify.when == "always" or problem):
        notified = run_notify(campaign.notify, paths["html"], warn)
    return Outcome(result, paths, notified, tries)
