"""cucore's exception classes: the hierarchy with cuda.core's names (CUDAError,
NVRTCError) and bases, a machine without the driver raising
LibraryNotFoundError with what was searched, and the one table of error
classes (src/errors/error_classes.inc): every C++ error class declared under
include/ and src/ has its row, and each row's Python class has its bases,
aliases and attributes when the C++ exception is thrown through the binding.
CPU only."""
import importlib
import pathlib
import re

import pytest

import cucore
from cucore import CompileError, CudaError, CUDAError, NVRTCError


def test_exception_hierarchy():
    assert issubclass(cucore.Error, RuntimeError)
    assert issubclass(CudaError, cucore.Error)
    assert CUDAError is CudaError and NVRTCError is CompileError
    assert issubclass(CompileError, CudaError)
    assert issubclass(cucore.LibraryNotFoundError, cucore.Error)
    assert issubclass(cucore.FeatureUnavailableError, cucore.Error)
    assert CompileError.__module__ == "cucore"


def test_no_driver_is_library_not_found():
    info = cucore.pathfinder.find("driver")
    if info.found:
        # A machine with the driver: devices count and Device(0) works.
        assert cucore.Device.count() >= 1
        assert cucore.Device(0).device_id == 0
        return
    with pytest.raises(cucore.LibraryNotFoundError) as ei:
        cucore.Device(0)
    assert "libcuda" in str(ei.value)
    assert ei.value.component
    assert isinstance(ei.value.searched, list) and ei.value.searched


# ---- the one table of error classes (src/errors/error_classes.inc) --------------------------
ROOT = pathlib.Path(__file__).resolve().parents[2]
# The names and bases Python code (cuda.core's users, these tests) relies on: every C++ error class's
# Python class, whatever the table says.
EXPECTED = {
    "cucore::RuntimeError": ("cucore.Error", {"RuntimeError"}),
    "cucore::InvalidArgumentError": ("builtins.ValueError", None),
    "cucore::OutOfRangeError": ("builtins.IndexError", None),
    "cucore::OverflowError": ("builtins.OverflowError", None),
    "cucore::LogicError": ("builtins.RuntimeError", None),
    "cucore::SystemError": ("builtins.OSError", None),
    "cucore::CudaError": ("cucore.CudaError", {"Error"}),
    "cucore::CompileError": ("cucore.CompileError", {"CudaError"}),
    "cucore::LibraryNotFoundError": ("cucore.LibraryNotFoundError", {"Error"}),
    "cucore::FeatureUnavailableError": ("cucore.FeatureUnavailableError", {"Error", "NotImplementedError"}),
    "cucore::ClosedError": ("cucore.ClosedError", {"Error", "ValueError"}),
    "cucore::checkpoint::StateError": ("cucore.CudaError", None),
    "cucore::IpcError": ("cucore.Error", None),
    "cucore::MappedResourceError": ("builtins.TypeError", None),
    "cucore::NvmlError": ("cucore.system.NvmlError", None),
    "cucore::detail::FileError": ("builtins.ValueError", None),
}
ALIASES = {"CUDAError": "CudaError", "NVRTCError": "CompileError"}


def _rows():
    return [dict(zip(("cpp", "cpp_base", "python", "bases", "aliases", "attributes"), r))
            for r in cucore._core._error_classes()]


def _python_class(path):
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _declared_error_classes():
    """{C++ class: C++ base} of every class named *Error declared under include/ and src/ with a base."""
    found = {}
    decl = re.compile(r"^\s*class\s+(\w*Error)\s*(?:final\s*)?:\s*public\s+([\w:]+)", re.M)
    for path in sorted((ROOT / "include").rglob("*.hpp")) + sorted((ROOT / "src").rglob("*.hpp")):
        text = path.read_text()
        for m in decl.finditer(text):
            spaces = re.findall(r"^namespace\s+([\w:]+)\s*\{", text[:m.start()], re.M)
            ns = spaces[-1] if spaces else ""
            found[f"{ns}::{m.group(1)}"] = (m.group(2), path.relative_to(ROOT))
    return found


def test_every_cpp_error_class_has_its_row():
    rows = {r["cpp"]: r for r in _rows()}
    declared = _declared_error_classes()
    assert declared, "no error class found under include/ or src/"
    for cpp, (base, path) in declared.items():
        assert cpp in rows, f"{cpp} ({path}) has no row in src/errors/error_classes.inc"
        assert rows[cpp]["cpp_base"].rpartition("::")[2] == base.rpartition("::")[2], (cpp, base)
    assert set(rows) == set(declared), f"rows of no declared class: {set(rows) - set(declared)}"
    assert set(EXPECTED) == set(rows), set(EXPECTED) ^ set(rows)


def test_rows_come_after_their_bases():
    seen = {"std::runtime_error", "std::invalid_argument", "std::out_of_range", "std::overflow_error",
            "std::logic_error", "std::system_error"}
    for r in _rows():
        assert r["cpp_base"] in seen, f"{r['cpp']} comes before its base {r['cpp_base']}"
        seen.add(r["cpp"])


def test_every_python_class_has_its_bases_aliases_and_attributes():
    for i, r in enumerate(_rows()):
        python, bases = EXPECTED[r["cpp"]]
        assert r["python"] == python, r
        cls = _python_class(python)
        if bases is not None:  # made by cucore, with exactly these bases
            assert {b.__name__ for b in cls.__bases__} == bases, (python, cls.__bases__)
            assert set(r["bases"].split()) == bases, r
            assert cls.__module__ == "cucore" and cls.__doc__, python
        for alias in r["aliases"].split():
            assert ALIASES[alias] == python.rpartition(".")[2]
            assert getattr(cucore, alias) is cls
        # The C++ exception itself, thrown through the binding, arrives as this class with its attributes.
        with pytest.raises(cls) as ei:
            cucore._core._throw_error_sample(i)
        if bases is not None:
            assert type(ei.value) is cls, (r["cpp"], type(ei.value))
        if python == "cucore.system.NvmlError":  # the subclass of its return code
            from cucore.system import exceptions

            assert type(ei.value) is exceptions._exception_for_code(ei.value.code) is not cls
        assert str(ei.value)
        for attr in r["attributes"].split():
            assert hasattr(ei.value, attr), (r["cpp"], attr)
    for alias, name in ALIASES.items():
        assert getattr(cucore, alias) is getattr(cucore, name)
