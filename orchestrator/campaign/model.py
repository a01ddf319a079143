"""The campaign file (campaigns/*.yaml): a base job, matrix axes, explicit variants, a
schedule, a baseline policy, thresholds and a notify command; and its expansion into variants.

Every axis value is a list of `--set`-style overrides (`KEY=VALUE`, the value read as YAML)
applied to the base job spec, in order: the campaign's own `set`, then each axis's value.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AfterValidator, BeforeValidator, Field, field_validator, model_validator

from orchestrator.analysis.catalogue.views import campaign_descriptions
from orchestrator.campaign import figures
from orchestrator.campaign.cron import CronExpr
from orchestrator.core.base import Strict
from orchestrator.core.errors import UserError
from orchestrator.core.units import format_time, parse_time
from orchestrator.spec import yamlio
from orchestrator.spec.job import NAME_RE

LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,30}$")
# What submission.new_campaign_id makes: NAME-YYYYMMDD-HHMMSS-xxxx.
CAMPAIGN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}-\d{8}-\d{6}-[0-9a-f]{4}$")

# Metrics a threshold can watch (docs/campaigns.md): from the workload's metrics.json and, when
# the run left a trace, from orchestrator.analysis (docs/metrics.md's catalogue defines them).
_WORKLOAD_METRICS = {
    "step_time_s": "median training-step time (s), metrics.json",
    "tokens_per_s": "training throughput (tokens/s), metrics.json",
    "peak_gpu_memory_bytes": "peak GPU memory allocated (bytes), metrics.json",
    "peak_host_rss_bytes": "peak host resident memory (bytes), metrics.json",
    "final_loss": "loss after the last step, metrics.json",
    "data_time_s": "median time a step waits for its batch (s), metrics.json",
    "step_cpu_time_s": "median CPU time of the training process per step (s), metrics.json",
    "step_cpu_relative": "median CPU time per step in units of a fixed work timed beside it "
    "(x), metrics.json with --cpu-reference: steady where the machine's speed drifts",
}
_ELAPSED = {"elapsed_s": "wall-clock time of the job (s), from the scheduler"}


class _Metrics(Mapping[str, str]):
    """Name → description of every metric a campaign can watch, read when asked: a metric added
    to the catalogue's campaign view is one at once."""

    def _all(self) -> dict[str, str]:
        return {**_WORKLOAD_METRICS, **campaign_descriptions(), **_ELAPSED}

    def __getitem__(self, key: str) -> str:
        return self._all()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


METRICS: Mapping[str, str] = _Metrics()


_T = TypeVar("_T")


def _overrides(v: object) -> object:
    return [v] if isinstance(v, str) else v


def _check_override(item: str) -> str:
    key, sep, _ = item.partition("=")
    key = key.removesuffix("+")
    if not sep or not key.strip() or any(p == "" for p in key.strip().split(".")):
        raise ValueError(
            f"{item!r} is not KEY=VALUE (or KEY+=[...] to append to a list) with a dotted key; "
            "write it like resources.nodes=2"
        )
    return item


def _check_name(v: str) -> str:
    if not NAME_RE.fullmatch(v):
        raise ValueError("must be 1-63 letters, digits, '.', '_' or '-'; rename it, e.g. nightly-1")
    return v


# A single override may be written as a string; each must be KEY=VALUE (or KEY+=[...]).
Overrides = Annotated[
    list[str],
    BeforeValidator(_overrides),
    AfterValidator(lambda v: [_check_override(x) for x in v]),
]
Name = Annotated[str, AfterValidator(_check_name)]


def apply_overrides(doc: yamlio.Located, overrides: Iterable[str]) -> yamlio.Located:
    """`--set` overrides in order; `KEY+=VALUE` appends to the list at KEY (the value read as
    YAML: a list is appended item by item; numbers become strings, as in argv)."""
    for raw in overrides:
        key, _, value_text = raw.partition("=")
        if not key.endswith("+"):
            yamlio.apply_overrides(doc, [raw])
            continue
        path = key[:-1].strip().split(".")
        node: Any = doc.data
        for part in path:
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise UserError(
                    f"{raw!r}: {key[:-1]} does not exist in the job spec; check the key"
                )
        if not isinstance(node, list):
            raise UserError(f"{raw!r}: {key[:-1]} is not a list; use = to replace it")
        value = yamlio.parse_value(value_text, f"--set {key}") if value_text.strip() else []
        items = value if isinstance(value, list) else [value]
        node.extend(
            str(x) if isinstance(x, int | float) and not isinstance(x, bool) else x for x in items
        )
    return doc


class Threshold(Strict):
    """When a metric counts as a regression. Percent thresholds are relative (step time +5%);
    point thresholds are absolute for metrics that are percentages (GPU idle +3 points); width
    thresholds count half-widths of the noise band learned from history (baseline.band).

    Against one baseline night the value must pass the limit; against a band it must also
    fall outside the band, on the limit's (bad) side, and the limits are taken from the band's
    centre (the median of the history)."""

    # `.inf` would switch the check off without a word, `.nan` too (no comparison is true).
    increase_pct: float | None = Field(None, gt=0, allow_inf_nan=False)
    decrease_pct: float | None = Field(None, gt=0, allow_inf_nan=False)
    increase_points: float | None = Field(None, gt=0, allow_inf_nan=False)
    decrease_points: float | None = Field(None, gt=0, allow_inf_nan=False)
    increase_widths: float | None = Field(None, gt=0, le=1000, allow_inf_nan=False)
    decrease_widths: float | None = Field(None, gt=0, le=1000, allow_inf_nan=False)
    fallback: list[str] = Field(
        default_factory=list,
        description="Figures that measure the same thing, in order, which judge (in this "
        "metric's unit) when a night has no value of the metric itself, e.g. step_time_s: "
        "[step_time_mean_ms] (the traced steps). Without it an unmeasured metric is not judged "
        "(campaign state UNJUDGED).",
    )

    @model_validator(mode="after")
    def _one(self) -> Threshold:
        if not any(v is not None for v in self._limits()):
            raise ValueError(
                "names no limit; give increase_pct, decrease_pct, increase_points, "
                "decrease_points, increase_widths or decrease_widths"
            )
        return self

    def _limits(self) -> tuple[float | None, ...]:
        return (
            self.increase_pct,
            self.decrease_pct,
            self.increase_points,
            self.decrease_points,
            self.increase_widths,
            self.decrease_widths,
        )

    @property
    def worse(self) -> set[str]:
        """The bad directions: "up" and/or "down"."""
        up = (self.increase_pct, self.increase_points, self.increase_widths)
        down = (self.decrease_pct, self.decrease_points, self.decrease_widths)
        return {d for d, lims in (("up", up), ("down", down)) if any(x is not None for x in lims)}

    @property
    def needs_band(self) -> bool:
        """Only width limits: nothing to say without a band."""
        return all(
            v is None
            for v in (
                self.increase_pct,
                self.decrease_pct,
                self.increase_points,
                self.decrease_points,
            )
        )

    def crossed(self, value: float, base: float, half_width: float | None = None) -> str | None:
        """Why `value` regressed against `base` (a sentence fragment), or None. `half_width`
        (a band's) makes the width limits count; without it they are not checked."""
        if (
            self.increase_pct is not None
            and base > 0
            and value > base * (1 + self.increase_pct / 100)
        ):
            return f"+{(value / base - 1) * 100:.1f}% (limit +{self.increase_pct:g}%)"
        if (
            self.decrease_pct is not None
            and base > 0
            and value < base * (1 - self.decrease_pct / 100)
        ):
            return f"{(value / base - 1) * 100:.1f}% (limit -{self.decrease_pct:g}%)"
        if self.increase_points is not None and value - base > self.increase_points:
            return f"+{value - base:.2f} points (limit +{self.increase_points:g})"
        if self.decrease_points is not None and base - value > self.decrease_points:
            return f"-{base - value:.2f} points (limit -{self.decrease_points:g})"
        if half_width:
            widths = (value - base) / half_width
            if self.increase_widths is not None and widths > self.increase_widths:
                return f"+{widths:.1f} band widths (limit +{self.increase_widths:g})"
            if self.decrease_widths is not None and -widths > self.decrease_widths:
                return f"{widths:.1f} band widths (limit -{self.decrease_widths:g})"
        return None


class Schedule(Strict):
    """When the campaign runs: a 5-field cron expression in a time zone."""

    cron: str = Field(..., description="minute hour day-of-month month day-of-week")
    tz: str = Field("UTC", description="IANA time zone the cron expression is read in.")
    mode: Literal["cron", "slurm"] = Field(
        "cron",
        description="cron: a crontab entry on the login node; slurm: a self-resubmitting job.",
    )
    partition: str | None = Field(None, description="Partition of the SLURM launcher job.")
    launcher_time: str = Field(
        "02:00:00", description="Time limit of the SLURM launcher job (it waits for the campaign)."
    )

    @field_validator("cron")
    @classmethod
    def _cron(cls, v: str) -> str:
        CronExpr.parse(v)
        return " ".join(v.split())

    @field_validator("tz")
    @classmethod
    def _tz(cls, v: str) -> str:
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: 'America' (a folder)
            raise ValueError(
                f"{v!r} is not a time zone; use an IANA name like Europe/Zurich"
            ) from None
        return v

    @field_validator("launcher_time", mode="before")
    @classmethod
    def _time(cls, v: object) -> object:
        # `launcher_time: 90` is 90 minutes, as SLURM reads a bare number.
        if isinstance(v, int) and not isinstance(v, bool):
            v = str(v)
        if not isinstance(v, str):
            return v
        seconds = parse_time(v)
        if seconds <= 0:
            raise ValueError("must be longer than zero; give a time such as 00:30:00")
        return format_time(seconds)


class Band(Strict):
    """A noise band per variant and metric, learned from the last good nights: its centre is
    the median of their values, its half-width `width` robust standard deviations (1.4826 x
    the median absolute deviation), never narrower than `floor_pct` of the centre. Until a
    variant has `min_nights` good nights (the warm-up) its nights are recorded and teach the
    band, and only a change beyond `warmup_factor` alarms."""

    nights: int = Field(10, ge=2, le=365, description="K: how many good nights the band uses.")
    min_nights: int = Field(
        3,
        ge=2,
        le=365,
        description="Fewer good nights: the warm-up, recorded and judged by warmup_factor alone.",
    )
    width: float = Field(
        4.0, gt=0, le=100, allow_inf_nan=False, description="Half-width in robust sigmas."
    )
    floor_pct: float = Field(
        2.0,
        ge=0,
        le=100,
        allow_inf_nan=False,
        description="Smallest half-width, in percent of the centre (quiet histories).",
    )
    # Issue 30: a busy submitting machine moved 2-step wall times 2.5-8x, and nights judged
    # against one good night raised 10-14 alarms on 3 of 4 ordinary nights. Until the band
    # knows the noise, only a change no noise explains may alarm.
    warmup_factor: float = Field(
        3.0,
        gt=1,
        le=1000,
        allow_inf_nan=False,
        description="Before min_nights good nights a night is recorded, not judged, unless a "
        "metric moved beyond this factor of the good nights' median (and past its threshold) "
        "in its bad direction.",
    )

    @model_validator(mode="after")
    def _enough(self) -> Band:
        if self.min_nights > self.nights:
            raise ValueError(
                f"min_nights {self.min_nights} is more than nights {self.nights}; lower "
                "min_nights or raise nights"
            )
        return self


class Baseline(Strict):
    """What each variant is compared with: the same variant of the last good campaign of the
    same name (`last-good`: every variant completed, no regression), or a pinned campaign.
    With `band`, a band learned from the last good nights, once there are enough of them."""

    policy: Literal["last-good", "pinned"] = "last-good"
    campaign_id: str | None = None
    band: Band | None = None

    @field_validator("campaign_id")
    @classmethod
    def _id(cls, v: str | None) -> str | None:
        if v is not None and not CAMPAIGN_ID_RE.fullmatch(v):
            raise ValueError(
                f"{v!r} is not a campaign id; copy one from `gh-run campaign list` "
                "(NAME-YYYYMMDD-HHMMSS-xxxx)"
            )
        return v

    @model_validator(mode="after")
    def _pinned(self) -> Baseline:
        if self.policy == "pinned" and not self.campaign_id:
            raise ValueError("policy pinned needs campaign_id; set it to a campaign id")
        if self.policy == "pinned" and self.band is not None:
            raise ValueError(
                "band learns from the last good nights, a pinned campaign is one night; "
                "use policy last-good with band, or remove band"
            )
        return self


class Notify(Strict):
    """A command run after the report is written: an argv list (never a shell string); the
    element `{report}` (or any `{report}` inside an element) becomes the report's path."""

    command: list[str] = Field(..., min_length=1)
    when: Literal["always", "problem"] = Field(
        "problem", description="problem: only when a threshold is crossed or a variant failed."
    )
    timeout_s: int = Field(60, ge=1, le=3600)


def _known_metrics(v: dict[str, _T]) -> dict[str, _T]:
    unknown = sorted(set(v) - set(METRICS))
    if unknown:
        raise ValueError(f"unknown metric {', '.join(unknown)}; use one of {', '.join(METRICS)}")
    return v


_TH = TypeVar("_TH", bound="Threshold | None")


def _checked_fallbacks(v: dict[str, _TH], where: str) -> dict[str, _TH]:
    """Each threshold's fallback figures measure what its metric measures (figures.py)."""
    for key, th in v.items():
        if th is None or not th.fallback:
            continue
        why = figures.check_fallback(key, th.fallback)
        if why is not None:
            raise ValueError(f"{where}{key}.fallback: {why}")
    return v


class ExplicitVariant(Strict):
    name: Name
    set: Overrides = Field(default_factory=list)
    thresholds: Annotated[
        dict[str, Threshold | None],
        AfterValidator(_known_metrics),
        AfterValidator(lambda v: _checked_fallbacks(v, "")),
    ] = Field(
        default_factory=dict,
        description="This variant's own limits, over the campaign's (a steadier variant can "
        "be held tighter); null: this variant is not judged on that metric.",
    )


class Campaign(Strict):
    """A nightly matrix of one base job."""

    name: Name
    description: str | None = None
    job: str = Field(..., description="Base job spec, relative to this file.")
    set: Overrides = Field(default_factory=list, description="Overrides for every variant.")
    matrix: dict[str, dict[str, list[str]]] = Field(
        default_factory=dict, description="axis → value label → overrides."
    )
    include: list[ExplicitVariant] = Field(default_factory=list)
    exclude: list[dict[str, str]] = Field(
        default_factory=list, description="Matrix points to drop: {axis: label, ...}."
    )
    variant_name: str | None = Field(
        None, description="Name pattern, e.g. 'w{workers}-{peft}'; default: labels joined by '-'."
    )
    max_parallel: int | None = Field(None, ge=1, le=100000, description="Array throttle %N.")
    repeats: int = Field(
        1, ge=1, le=50, description="Runs of each variant per night (its value: their median)."
    )
    executor: Literal["slurm", "local", "auto"] = "auto"
    schedule: Schedule | None = None
    baseline: Baseline = Field(default_factory=Baseline)
    thresholds: dict[str, Threshold] = Field(default_factory=dict)
    notify: Notify | None = None
    try_advice: bool = Field(
        False,
        description="When a night ends, submit each variant's costliest finding that has a"
        " knob in the spec as a run of its own with the knob applied (gh-run try), and score"
        " the tries of earlier nights that have ended: each night says which advice held.",
    )

    @field_validator("matrix", mode="before")
    @classmethod
    def _matrix(cls, v: object) -> object:
        if not isinstance(v, dict):
            return v
        out: dict[object, object] = {}
        for axis, values in v.items():
            if isinstance(values, dict):
                values = {str(k): _overrides(x) for k, x in values.items()}
            out[axis] = values
        return out

    @field_validator("matrix")
    @classmethod
    def _matrix_items(cls, v: dict[str, dict[str, list[str]]]) -> dict[str, dict[str, list[str]]]:
        for axis, values in v.items():
            if not LABEL_RE.fullmatch(axis):
                raise ValueError(
                    f"axis name {axis!r} is not 1-31 letters, digits, '.', '_' or '-'; rename it"
                )
            if not values:
                raise ValueError(f"axis {axis!r} has no values; give at least one")
            for label, items in values.items():
                if not LABEL_RE.fullmatch(label):
                    raise ValueError(
                        f"{axis}: value label {label!r} is not 1-31 letters, digits, '.', '_' "
                        "or '-'; rename it"
                    )
                for x in items:
                    _check_override(x)
        return v

    @field_validator("thresholds")
    @classmethod
    def _known(cls, v: dict[str, Threshold]) -> dict[str, Threshold]:
        return _checked_fallbacks(_known_metrics(v), "")

    def thresholds_of(self, variant: str) -> dict[str, Threshold]:
        """The limits a variant is held to: the campaign's, and an include's own over them
        (its null ones removing the campaign's)."""
        own = next((x.thresholds for x in self.include if x.name == variant), {})
        merged: dict[str, Threshold | None] = {**self.thresholds, **own}
        return {k: th for k, th in merged.items() if th is not None}

    @model_validator(mode="after")
    def _coherent(self) -> Campaign:
        for i, ex in enumerate(self.exclude):
            for axis, label in ex.items():
                if axis not in self.matrix or str(label) not in self.matrix[axis]:
                    raise ValueError(
                        f"exclude[{i}]: {axis}={label} is not a matrix value; check the spelling"
                    )
        if self.variant_name:
            try:
                self.variant_name.format_map({a: "x" for a in self.matrix})
            except (KeyError, ValueError, IndexError) as exc:
                raise ValueError(
                    f"variant_name {self.variant_name!r} uses {exc}, which is not an axis; "
                    f"use {{axis}} with axes {', '.join(self.matrix)}"
                ) from None
        if not self.matrix and not self.include:
            raise ValueError("has neither matrix nor include; give at least one variant")
        if self.baseline.band is None:
            limits = [(f"thresholds.{m}", th) for m, th in self.thresholds.items()]
            limits += [
                (f"include.{i}.thresholds.{m}", th)
                for i, x in enumerate(self.include)
                for m, th in x.thresholds.items()
                if th is not None
            ]
            for where, th in limits:
                if th.needs_band:
                    raise ValueError(
                        f"{where}: band widths need a band; add baseline.band "
                        "or give increase_pct / decrease_pct instead"
                    )
        return self


@dataclass(frozen=True)
class VariantPlan:
    """One expanded variant: its name, its axis labels and its overrides (in order)."""

    name: str
    labels: tuple[tuple[str, str], ...]
    overrides: tuple[str, ...]
    # With `repeats: N` each variant runs N times a night as NAME.r1 .. NAME.rN: `variant`
    # is NAME, `repeat` the 1-based index (0 when the campaign has no repeats).
    variant: str = ""
    repeat: int = 0


# How many variants a campaign may expand to unless told otherwise (`--max-variants N` or
# GH_RUN_MAX_VARIANTS): ten nights' worth of a large matrix, far below what would exhaust the
# login node that expands it (each variant is a validated spec, a run folder and a store row).
DEFAULT_MAX_VARIANTS = 10_000
MAX_VARIANTS_ENV = "GH_RUN_MAX_VARIANTS"


def max_variants_default() -> int:
    text = os.environ.get(MAX_VARIANTS_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_VARIANTS
    if not text.isdigit() or int(text) < 1:
        raise UserError(
            f"{MAX_VARIANTS_ENV}={text!r}: not a positive whole number; set it to a number "
            f"such as {DEFAULT_MAX_VARIANTS} or unset it"
        )
    return int(text)


def variant_count(campaign: Campaign) -> tuple[int, str]:
    """How many variants the campaign can have, from the axis sizes alone (matrix points
    before `exclude`, plus the includes), and the product written out (`3 x 4 + 1`)."""
    sizes = [len(values) for values in campaign.matrix.values()]
    points = math.prod(sizes) if sizes else 0
    shown = " x ".join(map(str, sizes)) if sizes else "0"
    if campaign.include:
        shown += f" + {len(campaign.include)}"
    if campaign.repeats > 1:
        shown = f"({shown}) x {campaign.repeats} repeats"
    return (points + len(campaign.include)) * campaign.repeats, shown


def check_size(campaign: Campaign, src: str, limit: int | None = None) -> int:
    """Refuse, before anything is expanded, a campaign larger than the limit."""
    limit = max_variants_default() if limit is None else limit
    total, shown = variant_count(campaign)
    if total > limit:
        raise UserError(
            f"{src}: matrix: {shown} = {total} variants is more than the limit of {limit}; "
            "remove axis values, or raise the limit with --max-variants "
            f"(or {MAX_VARIANTS_ENV}) if you mean it"
        )
    return total


def expand(
    campaign: Campaign, src: str = "campaign", max_variants: int | None = None
) -> list[VariantPlan]:
    """Matrix (minus excludes) plus explicit includes, each with a unique, valid name.
    The size is checked against the limit from the axes first (`check_size`)."""
    check_size(campaign, src, max_variants)
    out: list[VariantPlan] = []
    axes = list(campaign.matrix.items())
    if axes:
        for combo in itertools.product(*(list(values.items()) for _, values in axes)):
            labels = tuple((axis, label) for (axis, _), (label, _) in zip(axes, combo, strict=True))
            lab = dict(labels)
            if any(all(lab.get(a) == str(v) for a, v in ex.items()) for ex in campaign.exclude):
                continue
            if campaign.variant_name:
                name = campaign.variant_name.format_map(lab)
            else:
                name = "-".join(label for _, label in labels)
            overrides = tuple(campaign.set) + tuple(
                x for _, (_, items) in zip(axes, combo, strict=True) for x in items
            )
            out.append(VariantPlan(name, labels, overrides))
    for ex_v in campaign.include:
        out.append(VariantPlan(ex_v.name, (), tuple(campaign.set) + tuple(ex_v.set)))
    seen: set[str] = set()
    for v in out:
        if not NAME_RE.fullmatch(v.name):
            raise UserError(
                f"{src}: variant_name: {v.name!r} is not a valid name (letters, digits, . _ -); "
                "change variant_name or the value labels"
            )
        if v.name in seen:
            raise UserError(
                f"{src}: variant {v.name!r} appears twice; make variant_name use every axis or "
                "rename the include"
            )
        seen.add(v.name)
    if not out:
        raise UserError(f"{src}: exclude removes every variant; keep at least one")
    if campaign.repeats == 1:
        return [dataclasses.replace(v, variant=v.name) for v in out]
    repeated = []
    for v in out:
        for k in range(1, campaign.repeats + 1):
            name = f"{v.name}.r{k}"
            if not NAME_RE.fullmatch(name):
                raise UserError(
                    f"{src}: repeats: {name!r} is longer than 63 characters; shorten the "
                    "variant names"
                )
            repeated.append(dataclasses.replace(v, name=name, variant=v.name, repeat=k))
    return repeated


def repeat_of(campaign: Campaign) -> dict[str, str]:
    """Run name (NAME.rK with repeats) → variant name, for a campaign already planned."""
    return {v.name: v.variant for v in expand(campaign, max_variants=10**9)}


def load_campaign(path: Path, overrides: list[str] | tuple[str, ...] = ()) -> Campaign:
    if not path.is_file():
        raise UserError(f"{path}: no such campaign file; give a path like campaigns/nightly.yaml")
    campaign = yamlio.load_model(path, Campaign, overrides)
    job = job_path(path, campaign)
    if not job.is_file():
        raise UserError(
            f"{yamlio.display_path(path)}: job: {campaign.job} does not exist (looked for {job}); "
            "point it at a job spec relative to the campaign file"
        )
    return campaign


def job_path(campaign_file: Path, campaign: Campaign) -> Path:
    p = Path(campaign.job)
    return p if p.is_absolute() else (campaign_file.parent / p).resolve()
