"""cucore.compute: parallel algorithms with NVIDIA cuda.compute's API, over
cucore's C++ core: CUB's kernels built at run time for the types, operators and
iterators given, cached in memory and on disk (a second process finds them in
milliseconds).

    import cucore.compute as cc                      # was: import cuda.compute as cc
    cc.reduce_into(d_in=x, d_out=out, op=cc.OpKind.PLUS, num_items=len(x), h_init=np.array([0]))

Operators: OpKind members, CppOp (CUDA C++ source), RawOp (LTO-IR), or Python
callables (compiled by numba-cuda when it is installed).
"""
from cucore._core import _compute as _c
from cucore.compute._algorithms import (
    Determinism,
    DoubleBuffer,
    SortOrder,
    binary_transform,
    clear_all_caches,
    exclusive_scan,
    histogram_even,
    inclusive_scan,
    make_binary_transform,
    make_exclusive_scan,
    make_histogram_even,
    make_inclusive_scan,
    make_radix_sort,
    make_reduce_into,
    make_unary_transform,
    radix_sort,
    reduce_into,
    unary_transform,
)
from cucore.compute._iterators import (
    ConstantIterator,
    CountingIterator,
    DiscardIterator,
    IteratorBase,
    ReverseIterator,
    TransformIterator,
    ZipIterator,
)
from cucore.compute._ops import CppOp, OpKind, RawOp
from cucore.compute._types import gpu_struct


def cccl_version() -> str:
    """The CCCL version the kernels are built from."""
    return _c.cccl_version()


def build_cache_stats() -> dict:
    """The one-shot functions' per-process cache: hits, builds, waits, entries."""
    return _c.build_cache_stats()


__all__ = [
    "ConstantIterator", "CountingIterator", "CppOp", "Determinism", "DiscardIterator", "DoubleBuffer",
    "IteratorBase", "OpKind", "RawOp", "ReverseIterator", "SortOrder", "TransformIterator", "ZipIterator",
    "binary_transform", "build_cache_stats", "cccl_version", "clear_all_caches", "exclusive_scan", "gpu_struct",
    "histogram_even", "inclusive_scan", "make_binary_transform", "make_exclusive_scan", "make_histogram_even",
    "make_inclusive_scan", "make_radix_sort", "make_reduce_into", "make_unary_transform", "radix_sort",
    "reduce_into", "unary_transform",
]
