"""Reading YAML the way a user deserves: with line numbers, no silent duplicate keys,
`extends:` for small variant files, and `--set a.b=c` overrides.

Every problem becomes a `UserError`: one line that names the file, the field path (with the
YAML line where known), what is wrong and the fix:
``jobs/x.yaml:12: resources.nodes: must be >= 1 (got 0); set it to 1 or more``.
"""

from __future__ import annotations

import copy
import difflib
import functools
import re
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from orchestrator.core.errors import UserError

# display_path lives in paths.py (no YAML needed to show a path); re-exported for callers here
from orchestrator.core.paths import display_path as display_path

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
    """SafeLoader that refuses duplicate keys (YAML silently keeps the last one) and reads
    `1:30` and `1:00:00` as the text written, not as YAML 1.1's base-60 numbers (90 and 3600):
    such values are SLURM times (1 min 30 s; 1 h), and SLURM reads a bare number as minutes."""


# YAML 1.1's int and float rules without their sexagesimal (base 60) forms; every other form
# (decimal, octal, hex, binary, exponents, .inf, .nan) is read as before.
_INT = re.compile(
    r"""^(?:[-+]?0b[0-1_]+
    |[-+]?0[0-7_]+
    |[-+]?(?:0|[1-9][0-9_]*)
    |[-+]?0x[0-9a-fA-F_]+)$""",
    re.X,
)
_FLOAT = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
    |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)
_Loader.yaml_implicit_resolvers = {
    first: [
        (tag, {"tag:yaml.org,2002:int": _INT, "tag:yaml.org,2002:float": _FLOAT}.get(tag, rx))
        for tag, rx in rules
    ]
    for first, rules in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _construct_mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if isinstance(key, list | dict):  # `[a, b]: 1` or `? {a: 1}`: no field is named so
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"a key is a {'list' if isinstance(key, list) else 'mapping'}, which names no "
                "field; write a plain key such as `name:`",
                key_node.start_mark,
            )
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


def count_nodes(node: yaml.Node, limit: int = MAX_NODES) -> int:
    """Nodes of a composed document, each alias counted as often as it is used (what building
    the data would cost); stops counting past `limit`."""
    count, todo = 0, [node]
    while todo and count <= limit:
        current = todo.pop()
        count += 1
        if isinstance(current, yaml.MappingNode):
            for k, v in current.value:
                todo += (k, v)
        elif isinstance(current, yaml.SequenceNode):
            todo += current.value
    return count


def _compose(text: str) -> tuple[yaml.Node | None, _Loader]:
    loader = _Loader(text)
    try:
        return loader.get_single_node(), loader
    except BaseException:
        loader.dispose()
        raise


def _construct(loader: _Loader, node: yaml.Node | None) -> Any:
    try:
        return None if node is None else loader.construct_document(node)
    finally:
        loader.dispose()


def parse_value(text: str, where: str) -> Any:
    """One YAML value given on its own (a `--set` value, a campaign's override string), read
    with the same loader and the same limits as whole files. Text that is not valid YAML is
    taken as the text itself (`--set name=a: b`); too many values is refused."""
    if not text.strip():
        return ""
    if len(text.encode("utf-8", "replace")) > MAX_FILE_BYTES:
        raise UserError(
            f"{where}: the value is larger than {MAX_FILE_BYTES // 1024} KiB; give a shorter value"
        )
    try:
        node, loader = _compose(text)
    except yaml.YAMLError:
        return text
    except RecursionError:
        raise UserError(f"{where}: the value is nested too deeply; flatten it") from None
    if node is not None and count_nodes(node) > MAX_NODES:
        loader.dispose()
        raise UserError(
            f"{where}: the value expands to more than {MAX_NODES} values (aliases?); "
            "write the value out plainly"
        )
    try:
        return _construct(loader, node)
    except yaml.YAMLError:
        return text
    except RecursionError:
        raise UserError(f"{where}: the value is nested too deeply; flatten it") from None


def parse_text(text: str, src: str) -> Located:
    """Parse one YAML document into plain data plus field locations."""
    # A copy of the one parse of this text: the caller may change what it gets (overrides)
    parsed = _parse_text(text, src)
    return Located(data=copy.deepcopy(parsed.data), where=dict(parsed.where), source=src)


# A command reads the same files more than once (a cluster file for each job it checks, the
# shipped clusters at every lookup), and PyYAML's parser (pure Python: libyaml's words and
# leniency differ, and users read those words) costs milliseconds a file where a copy of the
# result costs microseconds. Errors are not kept: each call raises its own.
@functools.lru_cache(maxsize=64)
def _parse_text(text: str, src: str) -> Located:
    if len(text.encode("utf-8", "replace")) > MAX_FILE_BYTES:
        raise UserError(
            f"{src}: the file is larger than {MAX_FILE_BYTES // 1024} KiB (a spec is a few "
            "lines); check that this is the file you meant"
        )
    try:
        node, loader = _compose(text)
        where: dict[Path_, tuple[str, int | None]] = {}
        if node is not None and _walk(node, (), src, where) > MAX_NODES:
            loader.dispose()
            raise UserError(
                f"{src}: the YAML expands to more than {MAX_NODES} values (aliases?); "
                "write the spec out plainly"
            )
        data = _construct(loader, node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark else ""
        problem = exc.problem or exc.context or "cannot be parsed"
        raise UserError(_one_line(f"{src}{line}: not valid YAML: {_yaml_fix(problem)}")) from None
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


# Common YAML mistakes and what to do about them; anything else: "fix the syntax there".
_YAML_HINTS = (
    (
        "mapping values are not allowed",
        "quote the value at that line if it holds ': ' or indent it",
    ),
    ("found character '\\t'", "indent that line with spaces, not tabs"),
    ("could not determine a constructor", "remove the tag at that line (plain YAML only)"),
    ("found undefined alias", "define the anchor (&name) before that line uses it"),
)


def _yaml_fix(problem: str) -> str:
    """The YAML parser's problem and its fix (at the line the message names)."""
    if "; " in problem:  # our own duplicate-key sentence carries its fix
        return problem
    for needle, fix in _YAML_HINTS:
        if needle in problem:
            return f"{problem}; {fix}"
    return f"{problem}; fix the syntax at that line (indentation, quotes, brackets)"


@dataclass(frozen=True)
class Trusted:
    """Read every file of the chain as `trust.read_checked` reads a file gh-run acts on (its
    owner and mode checked on the descriptor it is read from): `kind` names it, `fix` says what
    to do instead."""

    kind: str
    fix: str


def read_file(path: Path, trusted: Trusted | None = None) -> Located:
    """Read a YAML file, following `extends: other.yaml` (relative to this file). With
    `trusted`, every file of the chain is checked as the first is (issue 42, class 2: a user's
    own cluster file that extends a file anyone can write takes that file's setup lines)."""
    return _read(path, depth=0, chain=(), trusted=trusted)


def _read(path: Path, depth: int, chain: tuple[Path, ...], trusted: Trusted | None) -> Located:
    src = display_path(path)
    if depth > MAX_EXTENDS_DEPTH:
        raise UserError(f"{src}: extends: more than {MAX_EXTENDS_DEPTH} levels; flatten the chain")
    real = path.resolve()
    if real in chain:
        raise UserError(f"{src}: extends: the file extends itself through a loop; break the loop")
    too_big = UserError(
        f"{src}: the file is larger than {MAX_FILE_BYTES // 1024} KiB (a spec is a few "
        "lines); check that this is the file you meant"
    )
    try:
        if trusted is not None:
            from orchestrator.core import trust

            kind = trusted.kind if depth == 0 else f"{trusted.kind} (extended by {chain[0]})"
            data = trust.read_checked(path, kind, trusted.fix, MAX_FILE_BYTES)
            if len(data) > MAX_FILE_BYTES:
                raise too_big
            text = data.decode("utf-8")
        else:
            if not path.is_file():
                raise UserError(f"{src}: no such file; check the path")
            if path.stat().st_size > MAX_FILE_BYTES:
                raise too_big
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
    base = _read(path.parent / base_name, depth + 1, (*chain, real), trusted)
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
                f"--set {raw!r}: expected KEY=VALUE with a dotted key; "
                "write it like --set resources.nodes=2"
            )
        value = parse_value(value_text, f"--set {key}")
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


# --- Turning pydantic's errors into one sentence: file:line, field, what is wrong, the fix ----

_FIELD_LIKE = re.compile(r"^[A-Za-z0-9_+-]+$")
# A model-level message that starts with a field path (`retries.signal_seconds (600) is ...`,
# `exclude[0]: ...`) is reported at that field's line.
_LEADING_FIELD = re.compile(r"^([A-Za-z_]\w*(?:\[\d+\]|\.[A-Za-z_]\w*)*)(?=[ :])")
_INDEX = re.compile(r"\[(\d+)\]")
_TYPE_NAMES = {"int", "float", "str", "bool", "list", "dict", "none", "bytes"}
MAX_ALSO = 3


def _show(value: Any) -> str:
    """A value as the user wrote it, short and on one line."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:37] + "...")
    return repr(value)


def _num(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _choices(expected: str) -> str:
    """pydantic's `'a', 'b' or 'c'` as `a, b, c`."""
    return ", ".join(x.strip().strip("'") for x in re.split(r",| or ", expected) if x.strip())


def _unwrap(tp: Any) -> Any:
    """Strip Annotated[...] and Optional[...] (one member besides None)."""
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            tp = get_args(tp)[0]
            continue
        if origin in (Union, types.UnionType):
            members = [a for a in get_args(tp) if a is not type(None)]
            if len(members) == 1:
                tp = members[0]
                continue
        return tp


def _union_members(tp: Any) -> list[Any]:
    if get_origin(tp) in (Union, types.UnionType):
        return [_unwrap(a) for a in get_args(tp) if a is not type(None)]
    return []


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _member_for(members: list[Any], part: Any) -> Any | None:
    """The union member that pydantic names `part` in an error location: a tag value of a
    discriminated union (`command`), or a member's type name (`Resources`, `list[str]`)."""
    if not isinstance(part, str):
        return None
    for m in members:
        if _is_model(m):
            if part == m.__name__:
                return m
            for f in m.model_fields.values():
                if get_origin(f.annotation) is Literal and part in get_args(f.annotation):
                    return m
        name = getattr(m, "__name__", "") if isinstance(m, type) else repr(m)
        if part.replace(" ", "") == str(name).replace(" ", ""):
            return m
    return None


def _model_keys(model: type[BaseModel]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()]


def _walk_loc(model: type[BaseModel] | None, loc: Iterable[Any]) -> tuple[Path_, Any]:
    """The user's field path for pydantic's error location (wrapper steps and union-member
    names dropped), and the type expected at the end of it (None when unknown)."""
    tp: Any = model
    out: list[str | int] = []
    for part in loc:
        if isinstance(part, str) and part.startswith(("function-", "tagged-union[")):
            continue
        tp = _unwrap(tp) if tp is not None else None
        members = _union_members(tp)
        if members:
            member = _member_for(members, part)
            if member is not None:
                tp = member
                continue
            if isinstance(part, str) and (part.lower() in _TYPE_NAMES or "[" in part):
                tp = None
                continue
        out.append(part)
        if _is_model(tp):
            fields = {f.alias or name: f for name, f in tp.model_fields.items()}
            f = fields.get(str(part))
            tp = f.annotation if f is not None else None
        elif get_origin(tp) in (list, tuple, set, frozenset) and get_args(tp):
            tp = get_args(tp)[0]
        elif get_origin(tp) is dict and len(get_args(tp)) == 2:
            tp = get_args(tp)[1]
        else:
            tp = None
    return tuple(out), (_unwrap(tp) if tp is not None else None)


def _dotted(path: Path_) -> str:
    out = ""
    for p in path:
        if isinstance(p, int):
            out += f".{p}" if out else str(p)
        else:
            text = p if _FIELD_LIKE.fullmatch(p) else repr(p)
            out += f".{text}" if out else text
    return out


def _unknown_key(key: Any, parent: Any) -> str:
    shown = repr(key) if isinstance(key, str) else repr(str(key))
    known = _model_keys(parent) if _is_model(parent) else []
    if not known:
        return f"unknown key {shown}; remove it or check the spelling"
    close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
    if close:
        return f"unknown key {shown}; rename it to {close[0]!r} or remove it"
    return f"unknown key {shown}; remove it or use one of: {', '.join(known)}"


# What a type error expected, and how to write it.
_EXPECTED: dict[str, tuple[str, str]] = {
    "int_type": ("a whole number", "write a number such as 2"),
    "int_parsing": ("a whole number", "write a number such as 2"),
    "int_from_float": ("a whole number", "write a whole number such as 2"),
    "float_type": ("a number", "write a number such as 5 or 2.5"),
    "float_parsing": ("a number", "write a number such as 5 or 2.5"),
    "finite_number": ("a finite number", "write a number such as 5 or 2.5 (not .inf or .nan)"),
    "bool_type": ("true or false", "write true or false"),
    "bool_parsing": ("true or false", "write true or false"),
    "list_type": ("a list", "write a YAML list such as [a, b]"),
    "tuple_type": ("a list", "write a YAML list such as [a, b]"),
    "set_type": ("a list", "write a YAML list such as [a, b]"),
    "dict_type": ("a mapping", "write it as `key: value` lines"),
    "model_type": ("a mapping", "write it as `key: value` lines"),
    "model_attributes_type": ("a mapping", "write it as `key: value` lines"),
}


def _what_and_fix(err: Mapping[str, Any], parent: Any) -> tuple[str, str | None]:
    """What is wrong and how to fix it; the fix is None when `what` already says it (a
    validator's own sentence)."""
    kind = str(err.get("type", ""))
    ctx: Mapping[str, Any] = err.get("ctx") or {}
    got = err.get("input")
    if kind == "missing":
        return "is required", "add it"
    if kind == "extra_forbidden":
        loc = tuple(err.get("loc", ()))
        what, _, fix = _unknown_key(loc[-1] if loc else "?", parent).partition("; ")
        return what, fix
    if kind in _EXPECTED:
        expected, fix = _EXPECTED[kind]
        return f"expected {expected}, got {_show(got)}", fix
    if kind == "string_type":
        if isinstance(got, int | float) and not isinstance(got, bool):
            return f"expected text, got {_show(got)}", f"put it in quotes: '{_num(got)}'"
        if isinstance(got, bool):
            return f"expected text, got {_show(got)}", f"put it in quotes: '{_show(got)}'"
        return f"expected text, got {_show(got)}", "write a single value"
    if kind == "greater_than_equal":
        bound = _num(ctx.get("ge"))
        return f"must be >= {bound} (got {_show(got)})", f"set it to {bound} or more"
    if kind == "greater_than":
        bound = _num(ctx.get("gt"))
        return f"must be > {bound} (got {_show(got)})", f"set it above {bound}"
    if kind == "less_than_equal":
        bound = _num(ctx.get("le"))
        return f"must be <= {bound} (got {_show(got)})", f"set it to {bound} or less"
    if kind == "less_than":
        bound = _num(ctx.get("lt"))
        return f"must be < {bound} (got {_show(got)})", f"set it below {bound}"
    if kind in ("literal_error", "enum"):
        return (
            f"{_show(got)} is not one of the choices",
            f"use one of: {_choices(str(ctx.get('expected', '')))}",
        )
    if kind == "string_too_short":
        n = ctx.get("min_length", 1)
        if n == 1:
            return "must not be empty", "write a value"
        return f"must be at least {n} characters", "write a longer value"
    if kind == "string_too_long":
        return f"is longer than {ctx.get('max_length')} characters", "shorten it"
    if kind == "too_short":
        n = ctx.get("min_length", 1)
        return (
            f"needs at least {n} item{'s' if n != 1 else ''} (got {ctx.get('actual_length')})",
            "add one" if n == 1 else "add more",
        )
    if kind == "too_long":
        return f"has more than {ctx.get('max_length')} items", "remove some"
    if kind == "string_pattern_mismatch":
        return (
            f"{_show(got)} does not match the pattern {ctx.get('pattern')}",
            "change it to match",
        )
    if kind == "union_tag_invalid":
        disc = str(ctx.get("discriminator", "kind")).strip("'")
        return (
            f"unknown {disc} {ctx.get('tag')!r}",
            f"use one of: {_choices(str(ctx.get('expected_tags', '')))}",
        )
    if kind == "union_tag_not_found":
        disc = str(ctx.get("discriminator", "kind")).strip("'")
        return f"has no {disc}", f"add `{disc}:`"
    msg = str(err.get("msg", "is invalid"))
    if kind in ("value_error", "assertion_error"):
        msg = re.sub(r"^(Value|Assertion) error, ", "", msg)
        if msg[:1].isupper() and msg[1:2].islower():  # a sentence, not a field or a name
            msg = msg[:1].lower() + msg[1:]
        return msg, None
    # A pydantic error this module does not know yet: its own words and a generic fix.
    return msg[:1].lower() + msg[1:], "correct the value"


@dataclass
class _Problem:
    path: Path_
    where: str
    field: str
    what: str
    fix: str | None
    kind: str

    @property
    def sentence(self) -> str:
        head = f"{self.where}: {self.field}: " if self.field else f"{self.where}: "
        return head + (f"{self.what}; {self.fix}" if self.fix else self.what)

    @property
    def short(self) -> str:
        """The problem without its fix, for the `(also: ...)` tail."""
        what = self.what.partition("; ")[0]
        if self.field and not what.startswith(self.field):
            return f"{self.field} {what}"
        return what


def _problem(
    doc: Located, err: Mapping[str, Any], model: type[BaseModel] | None, model_name: str
) -> _Problem:
    kind = str(err.get("type", ""))
    path, _ = _walk_loc(model, err.get("loc", ()))
    parent = _walk_loc(model, tuple(err.get("loc", ()))[:-1])[1] if path else model
    what, fix = _what_and_fix(err, parent)
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        path = (*path, str((err.get("ctx") or {}).get("discriminator", "kind")).strip("'"))
    if not path:
        # A model-level check: report it at the field its sentence starts with, if any.
        m = _LEADING_FIELD.match(what)
        if m and model is not None:
            lead: Path_ = tuple(
                int(p) if p.isdigit() else p for p in _INDEX.sub(r".\1", m.group(1)).split(".")
            )
            if lead[0] in _model_keys(model):
                return _Problem(lead, doc.locate(lead), "", what, fix, kind)
        return _Problem((), doc.locate(()), model_name, what, fix, kind)
    return _Problem(path, doc.locate(path), _dotted(path), what, fix, kind)


def _one_line(text: str) -> str:
    return text.replace("\r", "\\r").replace("\n", "\\n")


def validation_error(
    doc: Located, exc: ValidationError, model_name: str, model: type[BaseModel] | None = None
) -> UserError:
    """One sentence, `file:line: field.path: what is wrong; the fix`; further problems of the
    same file follow in brackets: `(also: b is required)`."""
    problems: list[_Problem] = []
    for err in exc.errors():
        p = _problem(doc, err, model, model_name)
        if all(q.path != p.path or q.kind != p.kind for q in problems):
            problems.append(p)
    # An unknown key first: a misspelt key also makes its right spelling 'missing'.
    problems.sort(key=lambda p: p.kind != "extra_forbidden")
    if not problems:
        return UserError(f"{doc.source}: {model_name}: is invalid; check the file")
    text = problems[0].sentence
    rest = problems[1:]
    if rest:
        also = "; ".join(p.short for p in rest[:MAX_ALSO])
        more = f" and {len(rest) - MAX_ALSO} more" if len(rest) > MAX_ALSO else ""
        text += f" (also: {also}{more})"
    return UserError(_one_line(text))


_UNION_TAGS: set[str] = set()


def register_union_tags(*tags: str) -> None:
    """Kept for callers: tag names of tagged unions. Error locations are now read against the
    model itself (`_walk_loc`), which knows where a tag stands and where a field of that name
    does (`notify.command` is a field, `workload.command` a tag)."""
    _UNION_TAGS.update(tags)


def to_model(doc: Located, model: type[M]) -> M:
    try:
        return model.model_validate(doc.data)
    except ValidationError as exc:
        raise validation_error(doc, exc, model.__name__, model) from None


def load_model(path: Path, model: type[M], overrides: Iterable[str] = ()) -> M:
    """Read, extend, override and validate a YAML file in one step."""
    doc = apply_overrides(read_file(path), overrides)
    return to_model(doc, model)
