"""The bounded loaders of what a trace comes with (issue 42, class 4): the workload's
`metrics.json`, the run's `spec.lock.yaml` beside a trace, the GPU-metrics configuration an nsys
export carries (`TARGET_INFO_SYSTEM_ENV.GpuMetricsConfig`, YAML), a run's `manifest.json`. Each
is read within a size limit and, for YAML, a limit on the values it builds (aliases counted as
often as they are used, before anything is built: an alias bomb is refused, never expanded), so
the time and memory of each input are linear in its size with the constants below.

YAML is read as `yaml.safe_load` reads it (the same resolver and constructors: the values a
reader got before are the values it gets now), through libyaml's parser where PyYAML has it
(about 6 times faster on nsys's 180 KB configuration), else PyYAML's own.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

# metrics.json is a few kilobytes (a per-step list of a long run: a few megabytes)
MAX_JSON_BYTES = 16 << 20
# spec.lock.yaml (gh-run writes a few kilobytes) and nsys's GpuMetricsConfig (about 180 KB)
MAX_YAML_BYTES = 4 << 20
# values a YAML side input may build (nsys's GpuMetricsConfig: about 11,000)
MAX_YAML_NODES = 100_000
# lists and objects inside one another in a side JSON file (gh-run's and a workload's: a few).
# Python's json refused deep nesting only through RecursionError, which 3.14's parser no
# longer raises at the depths it did: the bound is gh-run's own, the same under every Python.
MAX_JSON_DEPTH = 256


class SideInputError(ValueError):
    """A side input that is not read (too large, not valid, too many values): the message
    says why, in words the caller puts in a note or a sentence."""


def read_bytes(path: Path, limit: int) -> bytes:
    """A side file's bytes, opened without following a link at its last component (a FIFO is
    not waited on), refused past `limit` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise SideInputError(f"not readable ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SideInputError("not a regular file")
        if st.st_size > limit:
            raise SideInputError(f"{st.st_size} bytes, more than the {limit >> 20} MiB read")
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise SideInputError(f"more than the {limit >> 20} MiB read")
    return data


def load_json(path: Path, limit: int = MAX_JSON_BYTES) -> Any:
    """A side JSON file, read by Python's json: orjson reads an integer past 64 bits as a float
    (a silent difference the fuzz run found: a window [0, 2**70] became floats), json reads it
    as written. Side files are small; nesting past the interpreter's depth is refused."""
    import json

    data = read_bytes(path, limit)
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SideInputError(f"not readable JSON ({' '.join(str(exc).split())[:200]})") from None
    except RecursionError:
        raise SideInputError("not readable JSON (nested too deeply)") from None
    if _deeper_than(value, MAX_JSON_DEPTH):
        raise SideInputError(f"not readable JSON (nested more than {MAX_JSON_DEPTH} deep)")
    return value


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether lists and objects nest past `limit` (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def load_yaml_file(path: Path, limit: int = MAX_YAML_BYTES) -> Any:
    data = read_bytes(path, limit)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SideInputError("not UTF-8 text") from None
    return load_yaml(text, limit)


def load_yaml(text: str, limit: int = MAX_YAML_BYTES, nodes: int = MAX_YAML_NODES) -> Any:
    """YAML text as `yaml.safe_load` reads it, refused when larger than `limit` bytes or when
    it would build more than `nodes` values (counted on the composed document, each alias as
    often as it is used, before anything is built)."""
    import yaml

    from orchestrator.spec.yamlio import count_nodes

    if len(text) > limit:  # characters: at least as many bytes
        raise SideInputError(f"{len(text)} characters, more than the {limit >> 20} MiB read")
    loader_class = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loader = loader_class(text)
    try:
        try:
            node = loader.get_single_node()
        except yaml.YAMLError as exc:
            raise SideInputError(f"not valid YAML ({' '.join(str(exc).split())[:200]})") from None
        except RecursionError:
            raise SideInputError("nested too deeply") from None
        if node is None:
            return None
        if count_nodes(node, nodes) > nodes:
            raise SideInputError(
                f"it would build more than {nodes} values (aliases used many times?)"
            )
        try:
            return loader.construct_document(node)
        except yaml.YAMLError as exc:
            raise SideInputError(f"not valid YAML ({' '.join(str(exc).split())[:200]})") from None
        except RecursionError:
            raise SideInputError("nested too deeply") from None
    finally:
        loader.dispose()
