"""After the last job: collect, analyse, compare, report, record the verdict, notify."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from orchestrator.campaign import records as db
from orchestrator.campaign import report
from orchestrator.campaign.model import Campaign, Notify
from orchestrator.campaign.results import CampaignResult, collect_all, evaluate
from orchestrator.campaign.submission import campaign_dir
from orchestrator.executors.base import Warn
from orchestrator.store import Store

# Exit codes of `campaign run --wait` / `resume`: 0 passed, 1 a variant failed (or gh-run
# itself), 2 bad input, 3 a threshold was crossed.
EXIT_REGRESSION = 3


@dataclass
class Outcome:
    result: CampaignResult
    paths: dict[str, Path]
    notified: str | None

    @property
    def exit_code(self) -> int:
        if self.result.state == db.FAILED:
            return 1
        if self.result.state == db.REGRESSED:
            return EXIT_REGRESSION
        return 0


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
    rec = db.get_campaign(store, campaign_id)
    campaign = Campaign.model_validate_json(rec.campaign_json)
    collect_all(store, campaign_id, home, warn)
    result = evaluate(store, campaign_id)
    # The verdict goes in before the report so the trend plots include tonight.
    db.set_campaign(
        store,
        campaign_id,
        state=result.state,
        baseline_id=result.baseline_id,
        regressions=len(result.regressions),
        ended_at=time.time(),
    )
    out_dir = campaign_dir(home, campaign_id) / "report"
    paths = report.write(store, result, out_dir)
    db.set_campaign(store, campaign_id, report_dir=str(out_dir))
    notified = None
    problem = result.state != db.PASSED
    if campaign.notify and (campaign.notify.when == "always" or problem):
        notified = run_notify(campaign.notify, paths["html"], warn)
    return Outcome(result, paths, notified)
