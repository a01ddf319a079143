"""Reading YAML the way a user deserves: with line numbers, no silent duplicate keys,
`extends:` for small variant files, and `--set a.b=c` overrides.

Every problem becomes a `UserError` that names the file, the field path and, where the YAML
gives one, the line: ``jobs/x.yaml:12: resources.nodes: must be >= 1``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from orchestrator.errors import UserError

# A spec is a few kilobytes; anything near this is a mistake or an attack (alias bombs too).
MAX_FILE_BYTES = 1 << 20
MAX_NODES = 100_000
MAX_EXTENDS_DEPTH = 8

Path_ = tuple[str | int, ...]
M = TypeVar("M", bound=BaseModel)


@dataclass
class Located:
    """Plain data from YAML plus where each field came from (file and line)."""

    data: Any
    where: dict[Path_, tuple[str, int | None]] = field(default_factory=dict)
    source: str = "<string>"

    def locate(self, path: Iterable[str | int]) -> str:
        """`file:line` for the deepest known prefix of `path` (the file alone if unknown)."""
        key = tuple(path)
        while True:
            if key in self.where:
                src, line = self.where[key]
                return f"{src}:{line}" if line else src
            if not key:
                return self.source
            key = key[:-1]


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (YAML silently keeps the last one)."""


def _construct_mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"duplicate key {key!r} (first on line {seen[key] + 1}); keep only one",
                key_node.start_mark,
            )
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _walk(node: yaml.Node, path: Path_, src: str, out: dict[Path_, tuple[str, int | None]]) -> int:
    """Record the line of every field; return the node count (to refuse alias bombs)."""
    out[path] = (src, node.start_mark.line + 1)
    count = 1
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            key = k.value if isinstance(k, yaml.ScalarNode) else str(k)
            count += _walk(v, (*path, key), src, out)
            if count > MAX_NODES:
                return count
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            count += _walk(v, (*path, i), src, out)
            if count > MAX_NODES:
                return count
    return count


def display_path(path: Path) -> str:
    """The path as the user would type it: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def parse_text(text: str, src: str) -> Located:
    """Parse one YAML document into plain data plus field locations."""
    if len(text.encode("utf-8", "replace")) > MAX_FILE_BYTES:
        raise UserError(
            f"{src}: the file is larger than {MAX_FILE_BYTES // 1024} KiB; "
            "a spec is a few lines: check that this is the file you meant"
        )
    try:
        node = yaml.compose(text, Loader=_Loader)
        where: dict[Path_, tuple[str, int | None]] = {}
        if node is not None and _walk(node, (), src, where) > MAX_NODES:
            raise UserError(
                f"{src}: the YAML expands to more than {MAX_NODES} values (aliases?); "
                "write the spec out plainly"
            )
        data = yaml.load(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark else ""
        problem = exc.problem or exc.context or "cannot be parsed"
        raise UserError(
            f"{src}{line}: not valid YAML: {problem}; fix the syntax at that line"
        ) from None
    except yaml.YAMLError as exc:
        raise UserError(f"{src}: not valid YAML ({exc}); fix the syntax") from None
    except RecursionError:
        raise UserError(f"{src}: the YAML is nested too deeply; flatten it") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UserError(
            f"{src}: the top level must be a mapping of keys to values, not a "
            f"{type(data).__name__}; start the file with `name: ...`"
        )
    return Located(data=data, where=where, source=src)


def read_file(path: Path) -> Located:
    """Read a YAML file, following `extends: other.yaml` (relative to this file)."""
    return _read(path, depth=0, chain=())


def _read(path: Path, depth: int, chain: tuple[Path, ...]) -> Located:
    src = display_path(path)
    if depth > MAX_EXTENDS_DEPTH:
        raise UserError(f"{src}: extends: more than {MAX_EXTENDS_DEPTH} levels; flatten the chain")
    real = path.resolve()
    if real in chain:
        raise UserError(f"{src}: extends: the file extends itself through a loop; break the loop")
    if not path.is_file():
        raise UserError(f"{src}: no such file; check the path")
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise UserError(
                f"{src}: the file is larger than {MAX_FILE_BYTES // 1024} KiB; "
                "a spec is a few lines: check that this is the file you meant"
            )
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{src}: not UTF-8 text; save the file as UTF-8") from None
    except OSError as exc:
        raise UserError(f"{src}: cannot be read ({exc.strerror}); check its permissions") from None
    here = parse_text(text, src)
    base_name = here.data.pop("extends", None)
    if base_name is None:
        return here
    if not isinstance(base_name, str) or not base_name.strip():
        raise UserError(
            f"{here.locate(('extends',))}: extends: must be the path of a YAML file, "
            "relative to this one"
        )
    if not (path.parent / base_name).is_file():
        raise UserError(
            f"{here.locate(('extends',))}: extends: {base_name} does not exist next to this file; "
            "fix the path (it is relative to this file)"
        )
    base = _read(path.parent / base_name, depth + 1, (*chain, real))
    merged = Located(data=deep_merge(base.data, here.data), source=src)
    merged.where.update(base.where)
    merged.where.update(here.where)
    return merged


def deep_merge(base: Any, over: Any) -> Any:
    """Mappings merge key by key; anything else (lists included) is replaced by `over`.

    A key set to null in `over` with a mapping in `base` is kept as null: that is how a
    variant switches a part of its base off.
    """
    if isinstance(base, Mapping) and isinstance(over, Mapping):
        out = dict(base)
        for k, v in over.items():
            out[k] = deep_merge(base[k], v) if k in base else v
        return out
    return over


def apply_overrides(doc: Located, overrides: Iterable[str]) -> Located:
    """Apply `a.b.c=value` overrides; the value is read as YAML (`2` → int, `[a, b]` → list)."""
    for raw in overrides:
        key, sep, value_text = raw.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UserError(
                f"--set {raw!r}: expected KEY=VALUE with a dotted key, e.g. --set resources.nodes=2"
            )
        try:
            value = yaml.load(value_text, Loader=_Loader) if value_text.strip() else ""
        except yaml.YAMLError:
            value = value_text
        parts: list[str | int] = [int(p) if p.isdigit() else p for p in key.split(".")]
        if any(p == "" for p in parts):
            raise UserError(f"--set {raw!r}: the key has an empty part; write it like a.b.c")
        node = doc.data
        for i, part in enumerate(parts[:-1]):
            nxt = parts[i + 1]
            if isinstance(node, dict):
                if not isinstance(node.get(part), dict | list):
                    node[part] = [] if isinstance(nxt, int) else {}
                    doc.where[tuple(parts[: i + 1])] = (f"--set {key}", None)
                node = node[part]
            elif isinstance(node, list) and isinstance(part, int) and part < len(node):
                node = node[part]
            else:
                where = ".".join(str(p) for p in parts[: i + 1])
                raise UserError(f"--set {raw!r}: {where} is not a mapping; check the key")
        last = parts[-1]
        if isinstance(node, dict):
            node[last] = value
        elif isinstance(node, list) and isinstance(last, int) and last <= len(node):
            if last == len(node):
                node.append(value)
            else:
                node[last] = value
        else:
            raise UserError(f"--set {raw!r}: cannot set {key}; check the key")
        doc.where[tuple(parts)] = (f"--set {key}", None)
    return doc


_FRIENDLY = {
    "missing": "is required; add it",
    "extra_forbidden": "is not a known field; remove it or check the spelling",
}


def _message(err: Mapping[str, Any]) -> str:
    kind = str(err.get("type", ""))
    if kind in _FRIENDLY:
        return _FRIENDLY[kind]
    ctx = err.get("ctx") or {}
    if kind == "greater_than_equal":
        return f"must be >= {ctx.get('ge')}"
    if kind == "greater_than":
        return f"must be > {ctx.get('gt')}"
    if kind == "less_than_equal":
        return f"must be <= {ctx.get('le')}"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}"
    msg = str(err.get("msg", "is invalid"))
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    return msg[0].lower() + msg[1:] if msg else msg


def _field_path(loc: Iterable[Any]) -> tuple[str | int, ...]:
    # Tagged unions add the tag (e.g. 'command') to the location; drop it for the user's view.
    out: list[str | int] = []
    for part in loc:
        if isinstance(part, str) and part.startswith(("function-", "tagged-union[")):
            continue
        out.append(part)
    return tuple(out)


def validation_error(doc: Located, exc: ValidationError, model_name: str) -> UserError:
    """One line per problem: `file:line: field.path: what is wrong`."""
    lines = []
    for err in exc.errors():
        path = _field_path(err.get("loc", ()))
        # Drop union-member names that pydantic puts between real keys (but not a field that
        # has the tag's name right after it: workload.command for the `command` kind).
        clean_list: list[str | int] = []
        dropped = False
        for p in path:
            if isinstance(p, str) and p in _UNION_TAGS and not dropped:
                dropped = True
                continue
            clean_list.append(p)
            dropped = False
        clean = tuple(clean_list)
        dotted = ".".join(str(p) for p in clean) or model_name
        lines.append(f"{doc.locate(clean)}: {dotted}: {_message(err)}")
    return UserError("\n".join(lines))


_UNION_TAGS: set[str] = set()


def register_union_tags(*tags: str) -> None:
    """Names that pydantic inserts into error locations for tagged unions (workload kinds)."""
    _UNION_TAGS.update(tags)


def to_model(doc: Located, model: type[M]) -> M:
    try:
        return model.model_validate(doc.data)
    except ValidationError as exc:
        raise validation_error(doc, exc, model.__name__) from None


def load_model(path: Path, model: type[M], overrides: Iterable[str] = ()) -> M:
    """Read, extend, override and validate a YAML file in one step."""
    doc = apply_overrides(read_file(path), overrides)
    return to_model(doc, model)
