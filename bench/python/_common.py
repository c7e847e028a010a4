"""What the Python benchmarks share: leaving with a message (exit status 0)
when what they compare is missing, and importing cucore (with a usable GPU)
and NVIDIA's cuda.core, the peer. A module of helpers, not a benchmark
(scripts/gpu-check runs bench/python/bench_*.py)."""
from __future__ import annotations

import sys


def skip(bench: str, msg: str) -> None:
    print(f"{bench}: skipped: {msg}")
    sys.exit(0)


def import_cucore(bench: str):
    """cucore, where it imports and sees a CUDA device; otherwise skips."""
    try:
        import cucore
    except ImportError as e:
        skip(bench, f"cucore is not importable ({e})")
    try:
        if cucore.Device.count() == 0:
            skip(bench, "no CUDA device")
    except Exception as e:
        skip(bench, f"no usable GPU ({str(e).splitlines()[0]})")
    return cucore


def import_cuda_core(bench: str):
    """NVIDIA's cuda.core, the peer; skips where it is not installed."""
    try:
        import cuda.core as cc
    except Exception as e:
        skip(bench, f"NVIDIA's cuda.core is not installed ({e})")
    return cc
