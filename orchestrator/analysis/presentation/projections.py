"""What each finding's knob would buy (issue 41 items 1, 4): the step the finding's cause
leaves when removed, from the replay of the step's dependency structure
(`families/critical_path.py`), with its range and its assumption in one line, or why no
honest projection exists.

A finding maps to one lever of the replay (`LEVERS`). The data loader's projection adds the
loader's own floor: N workers deliver a batch every (loading time) / N, so the step settles at
no less than that however much of the wait the replay removes. Findings whose cause the replay
cannot remove say so (`NONE`): an interval no cause outweighs, Unified-Memory migrations
(they stall kernels from inside, so their time bounds the gain and says nothing of it), a
straggler (another rank's cause), the GPU-metric rules (no time on them).

The replay stands in the capture's time, whose cost lands on the host; where the workload's
own steps say how much faster the host ran outside the capture (`host_pace`), the projection is
taken there, as `try` measures the run with the knob, and says so. Where they cannot say
(`pace_withheld`) and the knob leaves the host more of the projected step than the run's own
step left it, its range reaches down to the GPU's own time and the line says why.

A rule whose checked projections were often wrong (`scores`: the state store's running
accuracy, passed in) says so beside its projection.
"""

from __future__ import annotations

from orchestrator.analysis.metrics import LeverProjection, RankMetrics, StepProjections
from orchestrator.analysis.presentation.capture_cost import MIN_OUTSIDE, walls
from orchestrator.analysis.settings import RunSettings
from orchestrator.core.base import Strict

# the lever of `critical_path` each rule's knob pulls
LEVERS = {
    "data-loader": "input",
    "host-compute": "host-compute",
    "launch-bound": "launch-bound",
    "sync-overhead": "sync",
    "fp32-kernels": "fp32-gemms",
    "host-device-copies": "copies",
    "low-overlap": "comm-overlap",
}
NONE = {
    "idle-unclassified": "no cause outweighs the others in these intervals, so no knob is known"
    " to remove them",
    "unified-memory": "migrations stall kernels from inside them, so their time bounds the gain"
    " (at most the migrations' time) without saying how much of it a prefetch gives back",
    "offload-traffic": "offloading fewer layers trades memory for speed by an amount the trace"
    " does not hold",
    "straggler": "the straggler's own cause lies on another rank; project that rank's findings",
}
# whole steps the capture must show for a wait at the step boundaries (an idle lever)
MIN_WHOLE_STEPS = 2
DEFAULT_WORKERS = 4  # the data-loader knob's workers from none (advice.KNOBS)
OFTEN_WRONG_PCT = 10.0  # a rule whose projections miss by more than this, on the median
OFTEN_WRONG_MIN = 3  # checked projections before a rule is called often wrong
# the host's part of the step a pace outside the capture is read off (over MIN_OUTSIDE steps
# there: `capture_cost.walls`), at least this share of the step: k is a ratio
# of two slivers of it, and a run's median step outside the capture moves between the stretches
# before and after the window (causes_h200: 0.1-0.2 % of the step in GPU-bound runs, 1-7 % in
# most host-bound ones), so under a tenth a move of 1 % would shift k by a tenth or more
MIN_HOST_SHARE = 0.10
# levers whose projected step less the GPU's own time is no host's part, so no pace of the
# host's applies: a CUDA graph's step is the GPU's own; communication that hides behind
# computation leaves the step its waits for the other ranks (the DDP recordings: 297.7 ms
# projected, 133.2 the GPU's own, the host's part of the run's step 1.9)
IN_CAPTURE_FRAME = frozenset({"launch-bound", "comm-overlap"})
# of the host's part of a step the capture did not slow, the share a knob must take away for
# the host part its projected step keeps to count as exposed work (`_capture_free`)
UNCOVERS = 0.5


class Projection(Strict):
    """One finding's projection: the step now (`step_ms`), the step the knob would leave
    (`projected_ms`, None: no honest projection, `none_because` says why), its range, the
    speed-up, the assumption in one line, and the rule's record where it has one."""

    lever: str | None = None
    step_ms: float | None = None
    projected_ms: float | None = None
    low_ms: float | None = None
    high_ms: float | None = None
    speedup: float | None = None
    basis: str = "per step"
    assumption: str | None = None
    none_because: str | None = None
    record: str | None = None

    def sentence(self) -> str:
        """One line for every view."""
        if self.projected_ms is None or self.step_ms is None:
            text = f"no honest projection: {self.none_because}"
        else:
            rng = (
                ""
                if self.low_ms is None or self.high_ms is None or self.low_ms == self.high_ms
                else f", {self.low_ms:.1f}-{self.high_ms:.1f}"
            )
            unit = "step" if self.basis == "per step" else "capture"
            text = (
                f"projected {unit} {self.step_ms:.1f} -> {self.projected_ms:.1f} ms"
                f" ({self.speedup:.2f}x{rng}), assuming {self.assumption}"
            )
        return f"{text}; {self.record}" if self.record else text


def loader_workers(st: RunSettings) -> tuple[int, int]:
    """(workers now, workers the knob asks for): 4 from none; from some, twice as many."""
    w = st.data_workers
    now = 0
    if w is not None and isinstance(w.value, int) and not isinstance(w.value, bool):
        now = w.value
    return now, DEFAULT_WORKERS if now == 0 else max(2 * now, now + 2)


def project(
    rule: str,
    r: RankMetrics,
    st: RunSettings,
    records: dict[str, str] | None = None,
) -> Projection | None:
    """The projection of `rule`'s finding on entry `r` (None: a rule no view projects)."""
    record = (records or {}).get(rule)
    if rule in NONE:
        return Projection(none_because=NONE[rule], record=record)
    lever_name = LEVERS.get(rule)
    if lever_name is None:
        return None
    p = r.projections
    if p is None:
        return Projection(
            lever=lever_name, none_because="the entry has no idle time or no GPU work to replay",
            record=record,
        )  # fmt: skip
    lever = next((x for x in p.levers if x.lever == lever_name), None)
    if lever is None:
        return Projection(
            lever=lever_name, step_ms=p.base_ms, basis=p.basis, record=record,
            none_because="the replay finds none of this cause's time on the step's critical"
            " path",
        )  # fmt: skip
    idle_lever = lever_name in ("input", "host-compute", "sync", "communication")
    if idle_lever and p.basis == "per step" and p.whole_steps < MIN_WHOLE_STEPS:
        return Projection(
            lever=lever_name, step_ms=p.base_ms, basis=p.basis, record=record,
            none_because=f"the capture shows {p.whole_steps or 'fewer than two'} whole"
            " step(s) between boundaries, and a wait at the boundaries needs two to be put"
            " per step (capture more steps)",
        )  # fmt: skip
    step, why, low_end = p.base_ms, None, None
    if lever_name not in IN_CAPTURE_FRAME and lever.gpu_ms is not None:
        pace = _pace(r)
        if isinstance(pace, str):
            low_end = _host_bound_low(lever, p, pace, uncharged=_capture_free(r, lever, p))
        else:
            k, step, why = pace
            lever = _at_pace(lever, k, step)
    low, mid, high = lever.low_ms, lever.step_ms, lever.high_ms
    assumption = lever.assumption
    if lever_name == "input":
        mid, high, assumption = _loader_floor(st, lever, step)
    if why is not None:
        assumption = f"{assumption}; {why}"
    if low_end is not None and low_end[0] < min(low, mid):  # else the range already says it
        low, assumption = low_end[0], f"{assumption}; {low_end[1]}"
    mid = max(mid, 0.0)
    return Projection(
        lever=lever_name,
        step_ms=step,
        projected_ms=round(mid, 2),
        low_ms=round(max(min(low, mid), 0.0), 2),
        high_ms=round(max(high, mid), 2),
        speedup=round(step / mid, 2) if mid > 0 else None,
        basis=p.basis,
        assumption=assumption,
        record=record,
    )


def _at_pace(lever: LeverProjection, k: float, step: float) -> LeverProjection:
    """`lever` outside the capture: the part of each of its steps beyond the GPU's own time at
    `k` of its length, from `step`, the run's own step there."""
    gpu = lever.gpu_ms or 0.0

    def at(x: float) -> float:
        return gpu + k * (x - gpu) if x > gpu else x

    mid = at(lever.step_ms)
    return lever.model_copy(
        update={
            "step_ms": mid,
            "low_ms": at(lever.low_ms),
            "high_ms": at(lever.high_ms),
            "removed_ms": step - mid,
        }
    )


def host_pace(r: RankMetrics) -> tuple[float, float, str] | None:
    """(k, step, why): the share `k` of the host's part of a step (the step less the GPU's own
    time) that the workload's steps kept outside the capture, their mean step there, and the
    sentence that says so. A capture's cost lands on the host (a callback on every CUDA call,
    interposed OS calls, samples), so a projection read off the capture carries it into a step
    the host bounds; `try` measures the run outside it. Read from the workload's own walls
    (`profiler_overhead.measured`): its median step inside the window slower than outside it,
    over at least MIN_OUTSIDE steps outside, some after the window (steps only before it may be
    warming up), the host's part of the step inside at least MIN_HOST_SHARE of it (the GPU's
    own time: `StepProjections.gpu_ms`), and the step outside longer than the GPU's own time.
    None: no such evidence (`pace_withheld` says which), and the projection stays in the
    capture's frame."""
    found = _pace(r)
    return None if isinstance(found, str) else found


def pace_withheld(r: RankMetrics) -> str | None:
    """Why the run's own steps give no pace outside the capture (None: they give one)."""
    found = _pace(r)
    return found if isinstance(found, str) else None


def _pace(r: RankMetrics) -> tuple[float, float, str] | str:
    po, p = r.profiler_overhead, r.projections
    if p is None or p.gpu_ms is None or p.basis != "per step":
        return "the replay has no step of its own to set the run's steps against"
    if po is None or po.window_step_ms is None or po.outside_step_ms is None:
        return "the workload recorded no step times both inside and outside the capture"
    win, out = po.window_step_ms, po.outside_step_ms
    if (po.outside_steps or 0) < MIN_OUTSIDE or not po.outside_mean_ms:
        return f"the workload recorded fewer than {MIN_OUTSIDE} steps outside the capture"
    if not po.outside_after:
        return (
            "the workload recorded no step after the capture, and those before it may still"
            " have been warming up"
        )
    if out >= win:
        return (
            f"the capture did not slow its steps (median {win:.1f} ms inside, {out:.1f}"
            " outside), which says nothing of a step the host bounds more"
        )
    if win - p.gpu_ms < MIN_HOST_SHARE * win:
        return (
            f"its step is the GPU's ({win - p.gpu_ms:.1f} ms of {win:.1f} beyond the GPU's own"
            " time, too thin a part to read the host's pace from)"
        )
    if out <= p.gpu_ms:
        return (
            f"its steps outside ({out:.1f} ms) were shorter than the GPU's own time inside"
            f" ({p.gpu_ms:.1f}): the capture stretched the GPU's side too"
        )
    k = (out - p.gpu_ms) / (win - p.gpu_ms)  # in (0, 1): the checks above
    mean = po.outside_mean_ms
    why = (
        f"taken outside the capture, where the run's own steps averaged {mean:.1f} ms: the"
        f" host's part of each step at the pace it kept there ({k:.2f}x its time in the capture:"
        f" median step {out:.1f} ms outside, {win:.1f} inside, of which the GPU's own"
        f" {p.gpu_ms:.1f})"
    )
    return k, mean, why


def _capture_free(r: RankMetrics, lever: LeverProjection, p: StepProjections) -> bool:
    """Whether the run's own step is no measure of the capture's cost that `lever`'s projected
    step carries: the workload's walls show its steps carried none of it (over MIN_OUTSIDE
    steps outside the capture, some after it, their median no shorter than the median inside),
    so the host's part of its step was waiting (in a pageable copy's call, a sleep, a read),
    which hid the capture's cost on the host's own work; and the knob takes away at least
    UNCOVERS of that part, so what host part its projected step keeps is that work, exposed.
    A knob that leaves the waits (one that buys nothing, or a little host work removed) leaves
    the step as the run's own was."""
    found = walls(r)
    if found is None or p.gpu_ms is None:
        return False
    win, out = found
    return out >= win and lever.removed_ms >= UNCOVERS * (p.base_ms - p.gpu_ms)


def _host_bound_low(
    lever: LeverProjection, p: StepProjections, withheld: str, uncharged: bool = False
) -> tuple[float, str] | None:
    """(low end, clause) of a projection left in the capture's frame whose knob leaves a step
    the host bounds more than it bound the run's own: its part beyond the GPU's own time at
    least MIN_HOST_SHARE of the projected step, and that share MIN_HOST_SHARE or more above the
    run's (`StepProjections.gpu_ms`). A capture's cost lands on the host, and the run's own step
    carried less of it than the projected one does, so outside the capture the projected step
    may be shorter, at most down to the GPU's own time, by an amount the run's own steps cannot
    give (`withheld`). None otherwise: a knob that leaves the step about as host-bound as it was
    is read in the frame of the run's own step (the host-bound MLP's pinned copies; a knob that
    buys nothing). `uncharged`: the run's own walls showed its steps carried none of the
    capture's cost (`_capture_free`), so its host's part is no measure of that cost, and the
    projected step's host part is set against none."""
    if lever.gpu_ms is None or p.gpu_ms is None or lever.step_ms <= 0 or p.base_ms <= 0:
        return None
    share = (lever.step_ms - lever.gpu_ms) / lever.step_ms
    before = 0.0 if uncharged else max(p.base_ms - p.gpu_ms, 0.0) / p.base_ms
    if share < MIN_HOST_SHARE or share - before < MIN_HOST_SHARE:
        return None
    gpu = round(lever.gpu_ms, 2)  # as the range prints it
    against = (
        "while the run's own steps carried none of the capture's cost"
        if uncharged
        else f"against {100 * before:.0f} % of the run's own step"
    )
    return gpu, (
        f"the host bounds {lever.step_ms - gpu:.1f} ms of the projected step beyond the GPU's"
        f" own {gpu:.1f} ({100 * share:.0f} %, {against}),"
        " at the capture's pace, and a capture's cost lands on the host: outside it the"
        f" step may be as short as {gpu:.1f} (the range's low end), by how much this run's own"
        f" steps cannot say: {withheld}"
    )


def _loader_floor(
    st: RunSettings, lever: LeverProjection, base_ms: float
) -> tuple[float, float, str]:
    """(projected, high, assumption) of the data loader's knob: the later of the replay's step
    (the loading gone from the main thread) and the loader's steady state, N workers delivering
    a batch every load / N ms, loading one taking what the main thread's did (from no workers:
    the wait the replay removes; from some, the step). A training run outlasts the workers'
    prefetched batches (2 a worker), so the steady state is the step it settles at; a shorter
    run than that sees the replay's step, the range's low end."""
    now, want = loader_workers(st)
    load = base_ms * now if now else lever.removed_ms
    floor = load / want
    mid = max(lever.step_ms, floor)
    pace = f"as fast as the {now} now do" if now else "as fast as the main thread did"
    if floor > lever.step_ms:
        text = (
            f"{want} DataLoader workers, each loading a batch {pace}, deliver one every"
            f" {floor:.1f} ms once their prefetched batches are used, which the rest of the step"
            f" ({lever.step_ms:.1f} ms) cannot hide; the GPU work and the rest of the host's"
            " stays"
        )
    else:
        text = (
            f"{want} DataLoader workers keep up (each loading a batch {pace}, they deliver one"
            f" every {floor:.1f} ms); the GPU work and the rest of the host's stays"
        )
    return mid, max(lever.high_ms, floor, mid), text
