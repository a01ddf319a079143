"""The C boundary: every function the native readers export, as its C prototype declares it,
against the ctypes signature Python calls it with (`SIGNATURES` of sqlite_pages.py and
kineto_scan.py). ctypes checks nothing itself: an argument one place off, an int32 passed where
the C reads an int64, or a value where the C reads a pointer is memory corruption, not an error.

The prototypes are parsed by pycparser (a real C parser), from the definitions in the .c files
(every function not `static`). Each argument is compared as (pointer depth, width in bits,
signedness): `char` matches either signedness (its sign is the platform's), `void` has no width,
and `const` is not compared (ctypes cannot say it).
"""

from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from pycparser import c_ast, c_parser

from orchestrator.analysis.readers import kineto_scan, native, sqlite_pages

HERE = Path(sqlite_pages.__file__).parent
READERS = [
    ("_sqlite_pages.c", sqlite_pages.SIGNATURES),
    ("_kineto_scan.c", kineto_scan.SIGNATURES),
]


@dataclass(frozen=True)
class Shape:
    """What must agree across the boundary for one value."""

    pointers: int
    bits: int | None  # None: void
    signed: bool | None  # None: either (char) or not a number (void)

    def matches(self, other: Shape) -> bool:
        sign_ok = self.signed is None or other.signed is None or self.signed == other.signed
        return self.pointers == other.pointers and self.bits == other.bits and sign_ok


# The C types the readers use (fixed-width types only, by design: their widths do not move).
C_SCALARS = {
    "int8_t": (8, True),
    "uint8_t": (8, False),
    "int16_t": (16, True),
    "uint16_t": (16, False),
    "int32_t": (32, True),
    "uint32_t": (32, False),
    "int64_t": (64, True),
    "uint64_t": (64, False),
    "char": (8, None),
    "void": (None, None),
}
TYPEDEFS = "".join(
    f"typedef {base} {name};"
    for name, base in [
        ("int8_t", "signed char"),
        ("uint8_t", "unsigned char"),
        ("int16_t", "short"),
        ("uint16_t", "unsigned short"),
        ("int32_t", "int"),
        ("uint32_t", "unsigned int"),
        ("int64_t", "long long"),
        ("uint64_t", "unsigned long long"),
    ]
)


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL)
    return re.sub(r"//[^\n]*", " ", text)


# A top-level function definition: a line starting at column 0 with its return type, up to the
# body's brace. `static` ones are the file's own.
_DEFINITION = re.compile(r"^([A-Za-z_][\w \t*]*?\b\w+\s*\([^;{]*?\))\s*\{", re.MULTILINE)


def exported_prototypes(source: str) -> dict[str, list[Shape]]:
    """Each exported function of a C file: its name -> [return shape, argument shapes...]."""
    text = _strip_comments(source)
    protos = [
        m.group(1)
        for m in _DEFINITION.finditer(text)
        if not m.group(1).lstrip().startswith(("static", "typedef"))
        and not re.match(r"\s*(if|for|while|switch|return)\b", m.group(1))
    ]
    ast = c_parser.CParser().parse(TYPEDEFS + "".join(p + ";" for p in protos))
    out: dict[str, list[Shape]] = {}
    for decl in ast.ext:
        if isinstance(decl, c_ast.Decl) and isinstance(decl.type, c_ast.FuncDecl):
            fn = decl.type
            params = fn.args.params if fn.args is not None else []
            args = [_c_shape(p.type) for p in params]
            if args == [Shape(0, None, None)]:  # f(void)
                args = []
            out[decl.name] = [_c_shape(fn.type), *args]
    return out


def _c_shape(node: c_ast.Node) -> Shape:
    pointers = 0
    while isinstance(node, c_ast.PtrDecl):
        pointers += 1
        node = node.type
    assert isinstance(node, c_ast.TypeDecl), f"unexpected C declarator {node!r}"
    names = node.type.names
    name = names[-1] if names[-1] in C_SCALARS else " ".join(names)
    assert name in C_SCALARS, f"C type {name!r} is not a fixed-width type this test knows"
    bits, signed = C_SCALARS[name]
    return Shape(pointers, bits, signed)


_SIGNED_CODES = set("bhilq")
_UNSIGNED_CODES = set("BHILQ")


def ctypes_shape(t: object) -> Shape:
    """The shape of a ctypes type, or of numpy's ndpointer class (a pointer to its dtype)."""
    dtype = getattr(t, "_dtype_", None)
    if dtype is not None:  # np.ctypeslib.ndpointer
        dt = np.dtype(dtype)
        assert dt.kind in "iu", f"ndpointer of {dt} is not an integer array"
        return Shape(1, dt.itemsize * 8, dt.kind == "i")
    assert isinstance(t, type)
    if issubclass(t, ctypes._Pointer):
        inner = ctypes_shape(t._type_)
        return Shape(inner.pointers + 1, inner.bits, inner.signed)
    code = getattr(t, "_type_", None)
    if code == "z":  # c_char_p
        return Shape(1, 8, None)
    if code == "P":  # c_void_p
        return Shape(1, None, None)
    if code == "c":
        return Shape(0, 8, None)
    assert isinstance(code, str) and code in _SIGNED_CODES | _UNSIGNED_CODES, f"ctypes type {t!r}"
    return Shape(0, ctypes.sizeof(t) * 8, code in _SIGNED_CODES)


def mismatches(c_protos: dict[str, list[Shape]], sigs: dict[str, native.Signature]) -> list[str]:
    """Every disagreement between the C prototypes and the Python declarations, one line each."""
    bad = []
    for name in sorted(set(c_protos) ^ set(sigs)):
        side = "C but not declared in Python" if name in c_protos else "Python but not in the C"
        bad.append(f"{name}: in {side}")
    for name in sorted(set(c_protos) & set(sigs)):
        c = c_protos[name]
        py = [ctypes_shape(sigs[name].restype), *map(ctypes_shape, sigs[name].argtypes)]
        if len(c) != len(py):
            bad.append(f"{name}: C takes {len(c) - 1} arguments, Python passes {len(py) - 1}")
            continue
        for i, (cs, ps) in enumerate(zip(c, py, strict=True)):
            if not cs.matches(ps):
                what = "return value" if i == 0 else f"argument {i}"
                bad.append(f"{name}: {what}: C {cs}, Python {ps}")
    return bad


@pytest.mark.parametrize(("c_file", "sigs"), READERS, ids=[r[0] for r in READERS])
def test_each_ctypes_signature_is_its_c_prototype(
    c_file: str, sigs: dict[str, native.Signature]
) -> None:
    protos = exported_prototypes((HERE / c_file).read_text())
    assert protos, f"no exported function found in {c_file}"
    assert mismatches(protos, sigs) == []


def test_the_parser_reads_what_the_c_declares() -> None:
    """The parse itself, on the known prototype of kineto_differ (six arguments)."""
    protos = exported_prototypes((HERE / "_kineto_scan.c").read_text())
    i64, p64 = Shape(0, 64, True), Shape(1, 64, True)
    assert protos["kineto_differ"] == [i64, Shape(1, 8, False), i64, p64, p64, p64, p64]
    assert set(protos) == {"kineto_scan", "kineto_differ"}  # the static helpers are not read


def _planted(
    sigs: dict[str, native.Signature], name: str, args: list[object]
) -> dict[str, native.Signature]:
    return {**sigs, name: native.Signature(sigs[name].restype, tuple(args))}


def test_a_planted_mismatch_on_the_python_side_fails() -> None:
    protos = exported_prototypes((HERE / "_sqlite_pages.c").read_text())
    sigs = sqlite_pages.SIGNATURES
    args = list(sigs["sqlite_pages_fetch"].argtypes)
    i32, i64 = ctypes.c_int32, ctypes.c_int64
    assert args[4] is i32 and args[8] is i64  # ndest (int32), cap (int64)
    plants = {
        "one argument missing": args[:-1],
        "one argument too many": [*args, i64],
        "two arguments swapped": [*args[:4], args[8], *args[5:8], args[4], *args[9:]],
        "a width": [*args[:4], i64, *args[5:]],
        "a signedness": [*args[:1], ctypes.c_uint64, *args[2:]],
        "a pointer passed by value": [*args[:-1], i64],
        "a pointer to a pointer": [*args[:-2], ctypes.POINTER(ctypes.POINTER(i64)), args[-1]],
    }
    for what, planted in plants.items():
        found = mismatches(protos, _planted(sigs, "sqlite_pages_fetch", planted))
        assert found, f"{what}: not noticed"
    wrong_return = {
        **sigs,
        "sqlite_pages_shape": native.Signature(i32, sigs["sqlite_pages_shape"].argtypes),
    }
    assert mismatches(protos, wrong_return) == [
        f"sqlite_pages_shape: return value: C {Shape(0, 64, True)}, Python {Shape(0, 32, True)}"
    ]
    # numpy's ndpointer of another dtype (the Kineto scan's arrays)
    ksigs = kineto_scan.SIGNATURES
    kargs = list(ksigs["kineto_differ"].argtypes)
    u64 = np.ctypeslib.ndpointer(dtype=np.uint64, flags="C_CONTIGUOUS")
    i32p = np.ctypeslib.ndpointer(dtype=np.int32, flags="C_CONTIGUOUS")
    kprotos = exported_prototypes((HERE / "_kineto_scan.c").read_text())
    assert mismatches(kprotos, _planted(ksigs, "kineto_differ", [*kargs[:2], u64, *kargs[3:]]))
    assert mismatches(kprotos, _planted(ksigs, "kineto_differ", [*kargs[:2], i32p, *kargs[3:]]))


def test_a_planted_mismatch_on_the_c_side_fails() -> None:
    source = (HERE / "_sqlite_pages.c").read_text()
    sigs = sqlite_pages.SIGNATURES
    assert mismatches(exported_prototypes(source), sigs) == []
    for old, new in [
        ("int32_t ndest,", "int64_t ndest,"),  # a width
        ("int64_t *seen)", "uint64_t *seen)"),  # a signedness
        ("int64_t **subs,", "int64_t *subs,"),  # a pointer level
        ("int64_t *seen)", "int64_t *seen, int32_t more)"),  # an argument added
    ]:
        assert old in source
        assert mismatches(exported_prototypes(source.replace(old, new, 1)), sigs), new
    renamed = source.replace("int64_t sqlite_pages_shape(", "int64_t sqlite_pages_shape2(", 1)
    assert mismatches(exported_prototypes(renamed), sigs) == [
        "sqlite_pages_shape: in Python but not in the C",
        "sqlite_pages_shape2: in C but not declared in Python",
    ]


def test_the_declared_signatures_are_the_ones_loaded() -> None:
    """ctypes calls with what `native.load` applied: the loaded functions carry SIGNATURES."""
    for module, stem in [(sqlite_pages, "sqlite_pages"), (kineto_scan, "kineto")]:
        lib = module._LIB
        assert lib is not None, f"{module.__name__}: the native library is not built"
        for name, sig in module.SIGNATURES.items():
            assert name.startswith(stem)
            fn = getattr(lib, name)
            assert fn.restype is sig.restype and list(fn.argtypes) == list(sig.argtypes)
