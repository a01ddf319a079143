"""Five-field cron expressions (minute hour day-of-month month day-of-week), read in a time
zone: parsing and the next fire time (for `sbatch --begin`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

_FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day of month", 1, 31),
    ("month", 1, 12),
    ("day of week", 0, 7),
)


def _field(text: str, name: str, lo: int, hi: int) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        rng, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) < 1:
                raise ValueError(
                    f"{name}: step {step_text!r} must be a positive number; write e.g. */15"
                )
            step = int(step_text)
        if rng == "*":
            start, end = lo, hi
        elif "-" in rng:
            a, _, b = rng.partition("-")
            if not (a.isdigit() and b.isdigit()):
                raise ValueError(f"{name}: {part!r} is not a range; write it like 1-5")
            start, end = int(a), int(b)
        elif rng.isdigit():
            start = int(rng)
            end = hi if step_text else start
        else:
            raise ValueError(
                f"{name}: {part!r} is not a number, range, list or */step; write e.g. 1-5 or *"
            )
        if start < lo or end > hi or start > end:
            raise ValueError(f"{name}: {part!r} is outside {lo}-{hi}; use values in {lo}-{hi}")
        values.update(range(start, end + 1, step))
    return frozenset(values)


@dataclass(frozen=True)
class CronExpr:
    minute: frozenset[int]
    hour: frozenset[int]
    dom: frozenset[int]
    month: frozenset[int]
    dow: frozenset[int]
    dom_any: bool
    dow_any: bool

    @classmethod
    def parse(cls, text: str) -> CronExpr:
        # The expression becomes the start of a crontab line: a line break (or any control
        # character) inside it would make a second line of the user's table.
        if not all(c.isprintable() or c == "\t" for c in text):
            raise ValueError(
                f"{text!r} holds a line break or a control character; write the five fields on "
                "one line, e.g. '0 2 * * *'"
            )
        parts = text.split()
        if len(parts) != 5:
            raise ValueError(
                f"{text!r} has {len(parts)} fields; write 5: "
                "minute hour day-of-month month day-of-week, e.g. '0 2 * * *'"
            )
        sets = [_field(p, n, lo, hi) for p, (n, lo, hi) in zip(parts, _FIELDS, strict=True)]
        dow = frozenset(d % 7 for d in sets[4])  # 7 is Sunday too
        return cls(sets[0], sets[1], sets[2], sets[3], dow, parts[2] == "*", parts[4] == "*")

    def matches(self, t: datetime) -> bool:
        if t.minute not in self.minute or t.hour not in self.hour or t.month not in self.month:
            return False
        dom_ok = t.day in self.dom
        dow_ok = (t.isoweekday() % 7) in self.dow
        if self.dom_any or self.dow_any:  # cron: both restricted → either may match
            return dom_ok and dow_ok
        return dom_ok or dow_ok

    def next_after(self, after: datetime, tz: str) -> datetime:
        """The first matching minute strictly after `after`, as an aware datetime in `tz`."""
        zone = ZoneInfo(tz)
        t = after.astimezone(zone).replace(second=0, microsecond=0) + timedelta(minutes=1)
        for _ in range(366 * 24 * 60):
            if self.matches(t):
                return t
            t = (t + timedelta(minutes=1)).astimezone(zone)
        raise ValueError("the cron expression never fires within a year")
