"""Nightly profiling campaigns: a matrix of one base job, sent as job arrays, tracked with one
batched query per poll, resumable after a kill, scheduled by cron or SLURM, compared with the
last good night. See docs/campaigns.md.

Modules: model (the file and its expansion), cron (expressions), submission (plan +
arrays), resume, results (metrics, baseline, regressions), bands (noise bands and the
warm-up's rule), explain (run reports, what changed), cpu_changes (what changed in CPU time,
for a night judged on it), report, finish, schedule; the campaign tables are the store's
(`store.campaigns`). May import every room but the CLI.
"""

from __future__ import annotations

from orchestrator.campaign.finish import EXIT_REGRESSION, Outcome, finish
from orchestrator.campaign.model import Campaign, VariantPlan, expand, load_campaign
from orchestrator.campaign.resume import repair, resume
from orchestrator.campaign.submission import plan, send

__all__ = [
    "EXIT_REGRESSION",
    "Campaign",
    "Outcome",
    "VariantPlan",
    "expand",
    "finish",
    "load_campaign",
    "plan",
    "repair",
    "resume",
    "send",
]
