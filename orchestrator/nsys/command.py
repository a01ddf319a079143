"""A pasted `nsys profile ... APP ARGS` command line read into a ProfileSpec and the
application's argv: how someone who already profiles with nsys by hand brings the same
options into a job file (`from_nsys_command`). Each option maps to one ProfileSpec field; a
value nsys would read otherwise than the spec would (a fractional delay, a switch that is not
exactly true or false) is refused, never coerced.
"""

from __future__ import annotations

import shlex

from orchestrator.nsys.profile import ProfileSpec

# Short and long spellings of `nsys profile` options → ProfileSpec fields (from_nsys_command).
_OPTIONS: dict[str, str] = {
    "-t": "trace",
    "--trace": "trace",
    "-y": "delay",
    "--delay": "delay",
    "-d": "duration",
    "--duration": "duration",
    "-c": "capture_range",
    "--capture-range": "capture_range",
    "--capture-range-end": "capture_range_end",
    "-p": "nvtx_capture",
    "--nvtx-capture": "nvtx_capture",
    "--event-sample": "event_sample",
    "-s": "sample",
    "--sample": "sample",
    "--cpuctxsw": "cpuctxsw",
    "--cuda-memory-usage": "cuda_memory_usage",
    "--cuda-um-cpu-page-faults": "cuda_um_cpu_page_faults",
    "--cuda-um-gpu-page-faults": "cuda_um_gpu_page_faults",
    "--gpu-metrics-devices": "gpu_metrics_devices",
    "--gpu-metrics-device": "gpu_metrics_devices",  # the 2022.4/2023.4 spelling
    "--pytorch": "pytorch",
    "--cpu-metrics": "cpu_metrics",
    "-w": "show_output",
    "--show-output": "show_output",
    "-f": "force_overwrite",
    "--force-overwrite": "force_overwrite",
    "-o": "output",
    "--output": "output",
}


_BOOL_FIELDS = (
    "show_output",
    "force_overwrite",
    "cuda_memory_usage",
    "cuda_um_cpu_page_faults",
    "cuda_um_gpu_page_faults",
)


def _whole(value: str) -> str:
    try:
        return str(max(0, round(float(value))))
    except ValueError:
        return "360"


def from_nsys_command(command: str) -> tuple[ProfileSpec, list[str]]:
    """Read an `nsys profile ... APP ARGS` command line (short or long flags) into a
    ProfileSpec and the application's argv. Raises ValueError naming the option and the fix
    for an unknown option or a value nsys would not take the same way: switches take exactly
    `true` or `false`; `--delay`/`--duration` take whole seconds (a fraction is refused, never
    rounded)."""
    words = shlex.split(command)
    if words[:2] != ["nsys", "profile"]:
        raise ValueError("expected a command starting with `nsys profile`")
    values: dict[str, object] = {"tool": "nsys"}
    i = 2
    while i < len(words) and words[i].startswith("-"):
        word = words[i]
        name, eq, inline = word.partition("=")
        if name not in _OPTIONS:
            raise ValueError(f"nsys option {name} has no ProfileSpec field")
        if eq:
            value = inline
        else:
            if i + 1 >= len(words):
                raise ValueError(f"nsys option {name} has no value")
            value = words[i + 1]
            i += 1
        i += 1
        field = _OPTIONS[name]
        if field in ("trace", "pytorch", "cpu_metrics"):
            values[field] = value.split(",")
        elif field in ("delay", "duration"):
            if not value.isascii() or not value.isdigit():
                raise ValueError(
                    f"nsys option {name} {value}: profile.{field} takes whole seconds (a "
                    f"fraction is never rounded); write an integer, e.g. {name} "
                    f"{_whole(value)}"
                )
            values[field] = int(value)
        elif field in _BOOL_FIELDS:
            if value not in ("true", "false"):
                raise ValueError(
                    f"nsys option {name} {value}: profile.{field} takes true or false; write "
                    f"{name} true or {name} false"
                )
            values[field] = value == "true"
        else:
            values[field] = value
    return ProfileSpec.model_validate(values), words[i:]
