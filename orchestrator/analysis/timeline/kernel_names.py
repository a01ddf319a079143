"""Kernel names that fit a table cell (`short_kernel`: no return type, parameter list or
template arguments) and that still tell a set of kernels apart (`distinct_kernels`); the full
name goes on hover or in --json. Text only: the step rules, the verdict, reports and the CLI
use it.
"""

from __future__ import annotations

import re

_PARAMS = re.compile(r"(?<=[\w>])\(")
_RETURN = re.compile(r"^(?:void|int|float|double|__global__)\s+")


_GENERIC = re.compile(r"(?i)(?:^|::)(?:device_)?kernel\d*<…>$")


def _strip_templates(text: str) -> str:
    """`a<b<c>, d>::e<f>` → `a<…>::e<…>`."""
    out: list[str] = []
    depth = 0
    for i, ch in enumerate(text):
        # a template opens right after a name (`kernel<`), never a lone `<` (`a < b`, `<img`)
        if ch == "<" and (depth or (i and (text[i - 1].isalnum() or text[i - 1] in "_:>"))):
            if depth == 0:
                out.append("<…>")
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def short_kernel(name: str, limit: int = 60) -> str:
    """A kernel name that fits a table cell: no return type, parameter list or template
    arguments (`void at::native::elementwise_kernel<128, 4, …>(int, …)` →
    `at::native::elementwise_kernel<…>`), cut to `limit` characters with an ellipsis."""
    s = _RETURN.sub("", " ".join(name.split()))
    for anon in ("(anonymous namespace)::", "<unnamed>::"):
        s = s.replace(anon, "")
    short = _strip_templates(s)
    # the parameter list starts at the first `(` right after the name (`kernel<…>(int, …)`);
    # `(anonymous namespace)` after `::` and `Memcpy HtoD (Pageable -> Device)` stay
    cut = _PARAMS.search(short)
    if cut is not None:
        short = short[: cut.start()]
    if _GENERIC.search(short) and "<" in s:
        # cutlass::Kernel2<cutlass_80_simt_sgemm_…>: the argument is the name that matters
        inner = s[s.index("<") + 1 : s.rindex(">")] if ">" in s else ""
        first = _strip_templates(inner.split(",")[0].strip())
        short = short.replace("<…>", f"<{first}>", 1) if first else short
    s = short
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    return s or name[:limit]


# words of a kernel's signature that tell nothing apart: C++ keywords and index types, lambda
# bookkeeping, PyTorch's iterator plumbing (namespaces and class qualifiers, the words before
# `::`, are left out by position)
_PLAIN_WORDS = frozenset(
    (
        *("void", "int", "unsigned", "signed", "long", "short", "char", "bool", "const"),
        *("auto", "struct", "class", "lambda", "instance", "operator", "array", "anonymous"),
        *("namespace", "unnamed", "TensorIteratorBase", "TrivialOffsetCalculator"),
        *("OffsetCalculator", "LoadWithCast", "StoreWithCast", "LoadWithoutCast"),
        "StoreWithoutCast",
    )
)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?!\s*::)(?![A-Za-z0-9_])")
TAG_WORDS = 3  # at most this many words tell two kernels apart


def _telling_words(name: str) -> list[str]:
    """The words of a kernel signature that can tell it from a kernel of the same short name,
    in order, once each: not keywords, index types or plumbing (`_PLAIN_WORDS`), not
    qualifiers (a word before `::`), not template parameter names (T1) nor single letters."""
    out: list[str] = []
    for w in _WORD.findall(name):
        if w in _PLAIN_WORDS or len(w) < 3 or re.fullmatch(r"T\d*", w) or w in out:
            continue
        out.append(w)
    return out


def distinct_kernels(names: list[str], limit: int = 60) -> dict[str, str]:
    """Short names (`short_kernel`) for a set of kernels that tell them apart. Kernels whose
    short names collide (four `at::native::vectorized_elementwise_kernel<…>`) get the words of
    their signature that the group does not share (`… · CUDAFunctor_add`, `… · BinaryFunctor
    BFloat16`): the first one, or as many (up to `TAG_WORDS`) as it takes for the group to
    differ; else their position in the group (`… #2`)."""
    short = {n: short_kernel(n, limit) for n in names}
    groups: dict[str, list[str]] = {}
    for n in names:
        groups.setdefault(short[n], []).append(n)
    out = dict(short)
    for base, same in groups.items():
        if len(same) < 2:
            continue
        own = set(_telling_words(base))
        words = {n: [w for w in _telling_words(n) if w not in own] for n in same}
        common = set.intersection(*(set(ws) for ws in words.values()))
        rest = {n: [w for w in words[n] if w not in common] for n in same}
        tags: dict[str, str] = {}
        for k in range(1, TAG_WORDS + 1):
            tags = {n: " ".join(rest[n][:k]) for n in same}
            if all(tags.values()) and len(set(tags.values())) == len(same):
                break
        else:
            tags = {n: f"#{i + 1}" for i, n in enumerate(same)}
        for n in same:
            head = base.rstrip("…")
            while len(head) + len(tags[n]) + 3 > limit and "::" in head:
                head = head.split("::", 1)[1]  # namespaces go first, the kernel's name stays
            out[n] = f"{head} · {tags[n]}"
            if len(out[n]) > limit:
                out[n] = out[n][: limit - 1] + "…"
    return out
