"""Operators: OpKind, C++ source operators, pre-compiled LTO-IR (RawOp), and
Python callables compiled to LTO-IR by numba-cuda where it is installed."""
from __future__ import annotations

import enum
import itertools

from cucore._core import _compute as _c

from cucore.compute._types import np


class OpKind(enum.IntEnum):
    """cuda.compute's well-known operators (STATELESS / STATEFUL name user operators there)."""
    PLUS = 0
    MINUS = 1
    MULTIPLIES = 2
    DIVIDES = 3
    MODULUS = 4
    EQUAL_TO = 5
    NOT_EQUAL_TO = 6
    GREATER = 7
    LESS = 8
    GREATER_EQUAL = 9
    LESS_EQUAL = 10
    LOGICAL_AND = 11
    LOGICAL_OR = 12
    LOGICAL_NOT = 13
    BIT_AND = 14
    BIT_OR = 15
    BIT_XOR = 16
    BIT_NOT = 17
    IDENTITY = 18
    NEGATE = 19
    MINIMUM = 20
    MAXIMUM = 21
    STATELESS = 100
    STATEFUL = 101


class CppOp:
    """A user operator in CUDA C++: `callable` is an expression callable in device
    code (a __device__ function's name, a function object like "Max{}", or a lambda);
    `preamble` defines what it needs."""

    def __init__(self, callable: str, preamble: str = ""):
        self.callable, self.preamble = callable, preamble

    def _key(self):
        return ("cpp", self.callable, self.preamble)


class RawOp:
    """Pre-compiled LTO-IR implementing `name` (cuda.compute's RawOp): extern "C"
    __device__ void name(void* arg0, ..., void* result). Stateless only."""

    def __init__(self, *, ltoir: bytes, name: str, state: bytes = b"", state_alignment: int = 1,
                 extra_ltoirs=None):
        if state:
            raise NotImplementedError("cucore.compute: stateful operators are not supported yet")
        self.ltoir, self.name, self.extra_ltoirs = bytes(ltoir), name, [bytes(e) for e in (extra_ltoirs or [])]

    def _key(self):
        return ("raw", self.name, self.ltoir, tuple(self.extra_ltoirs))


_numba_ids = itertools.count()
_numba_cache: dict = {}


def _numba_op(fn, arg_dtypes, result_dtype):
    key = (fn, tuple(np.dtype(d) for d in arg_dtypes), np.dtype(result_dtype))
    if key in _numba_cache:
        return _numba_cache[key]
    try:
        from numba import cuda, from_dtype
    except ImportError as e:
        raise ImportError(
            "cucore.compute: Python operators are compiled with numba-cuda, which is not installed "
            "(pass an OpKind, a CppOp or a RawOp instead)") from e
    for d in (*arg_dtypes, result_dtype):
        if np.dtype(d).fields is not None:
            raise TypeError("cucore.compute: Python operators on structs are not supported: use a CppOp")
    sig = from_dtype(np.dtype(result_dtype))(*[from_dtype(np.dtype(d)) for d in arg_dtypes])
    name = f"cucore_numba_op_{next(_numba_ids)}"
    kwargs = {}
    try:  # LTO-IR for the current device (numba's default target may be older)
        import cucore

        c = cucore.Device().compute_capability
        kwargs["cc"] = (c.major, c.minor)
    except Exception:
        pass
    ltoir, _ = cuda.compile(fn, sig, device=True, abi="c", abi_info={"abi_name": name}, output="ltoir", **kwargs)
    op = _c.Op.ltoir(name, bytes(ltoir), "values")
    _numba_cache[key] = op
    return op


def to_op(op, arg_dtypes, result_dtype):
    """The C++ operator for `op` called with `arg_dtypes` returning `result_dtype`."""
    if isinstance(op, OpKind):
        if op in (OpKind.STATELESS, OpKind.STATEFUL):
            raise ValueError(f"OpKind.{op.name} is not a well-known operation. Use OpKind.PLUS, OpKind.MAXIMUM, etc.")
        return _c.Op.well_known(int(op))
    if isinstance(op, CppOp):
        return _c.Op.source(op.callable, op.preamble)
    if isinstance(op, RawOp):
        return _c.Op.ltoir(op.name, op.ltoir, "pointers", op.extra_ltoirs)
    if callable(op):
        return _numba_op(op, arg_dtypes, result_dtype)
    raise TypeError(f"op must be an OpKind, a CppOp, a RawOp or a Python callable, got {type(op).__name__}")


def op_key(op, arg_dtypes, result_dtype):
    if isinstance(op, (CppOp, RawOp)):
        return op._key()
    if isinstance(op, OpKind):
        return ("kind", int(op))
    return ("py", op, tuple(map(str, arg_dtypes)), str(result_dtype))


__all__ = ["OpKind", "CppOp", "RawOp", "to_op", "op_key"]
