"""cucore.compute: cuda.compute's API over cucore's C++ algorithms.

CPU tests build for sm_90 with NVRTC (no GPU needed); GPU tests check every
algorithm against numpy on random data (CuPy and PyTorch arrays), user
operators and structs, iterators, and the disk cache in a fresh process."""
import os
import subprocess
import sys

import pytest

np = pytest.importorskip("numpy")
import cucore  # noqa: E402
import cucore.compute as cc  # noqa: E402

from conftest import require_gpu  # noqa: E402

CUDA_COMPUTE_NAMES = [
    "reduce_into", "make_reduce_into", "inclusive_scan", "make_inclusive_scan", "exclusive_scan",
    "make_exclusive_scan", "unary_transform", "make_unary_transform", "binary_transform", "make_binary_transform",
    "radix_sort", "make_radix_sort", "histogram_even", "make_histogram_even", "OpKind", "Determinism", "SortOrder",
    "DoubleBuffer", "CountingIterator", "ConstantIterator", "TransformIterator", "DiscardIterator", "ZipIterator",
    "ReverseIterator", "gpu_struct", "clear_all_caches",
]


# ---- CPU -------------------------------------------------------------------------------
def test_has_cuda_compute_names():
    for name in CUDA_COMPUTE_NAMES:
        assert hasattr(cc, name), name
    assert cucore.compute is cc
    assert cc.cccl_version().count(".") == 2


def test_gpu_struct_is_a_c_struct():
    Pair = cc.gpu_struct({"key": np.int8, "weight": np.float64}, name="Pair")
    assert Pair.dtype.itemsize == 16 and Pair.dtype.fields["weight"][1] == 8
    p = Pair(3, 2.5)
    assert (p.key, p.weight) == (3, 2.5)
    from cucore.compute._types import struct_definition, to_type

    assert "double weight;" in struct_definition(Pair.dtype, "Pair")
    t = to_type(Pair)
    assert (t.size, t.alignment) == (16, 8)
    packed = np.dtype([("a", np.int8), ("b", np.float64)])  # not aligned: not a C struct
    with pytest.raises(ValueError, match="align=True"):
        to_type(packed)


def test_iterators_describe_their_values():
    it = cc.CountingIterator(np.int64(5))
    assert it.value_type == np.int64
    z = cc.ZipIterator(it, cc.ConstantIterator(np.float32(1.5)))
    assert z.value_type.names == ("f0", "f1")
    assert "zip<count<int64>,const<float32>>" == z._kind()
    with pytest.raises(ValueError):
        cc.ZipIterator(it)


def test_builds_for_sm90_without_a_gpu(tmp_path):
    # Counting in, discard out: no device arrays needed; NVRTC compiles for real.
    red = cc.make_reduce_into(d_in=cc.CountingIterator(np.int32(0)), d_out=cc.DiscardIterator(),
                              op=cc.OpKind.MAXIMUM, h_init=np.int32(0), compute_capability=90)
    assert red is cc.make_reduce_into(d_in=cc.CountingIterator(np.int32(7)),
                                      d_out=cc.DiscardIterator(), op=cc.OpKind.MAXIMUM,
                                      h_init=np.int32(0), compute_capability=90), "built once per kind"


def test_operator_that_does_not_compile_shows_the_log():
    with pytest.raises(cucore.CompileError, match="no_such_name"):
        cc.make_unary_transform(d_in=cc.CountingIterator(np.int32(0)), d_out=cc.DiscardIterator(),
                                op=cc.CppOp("[](int x) { return x + no_such_name; }"), compute_capability=90)


def test_bad_operators_and_values_are_refused():
    with pytest.raises(ValueError, match="not a well-known operation"):
        cc.make_reduce_into(d_in=cc.CountingIterator(np.int32(0)), d_out=cc.DiscardIterator(),
                            op=cc.OpKind.STATELESS, h_init=np.int32(0), compute_capability=90)
    with pytest.raises(TypeError, match="h_init"):
        cc.make_reduce_into(d_in=cc.CountingIterator(np.int32(0)), d_out=cc.DiscardIterator(),
                            op=cc.CppOp("[](int a, int b) { return a; }"), h_init=None, compute_capability=90)
    with pytest.raises(TypeError, match="neither an iterator nor a device array"):
        cc.reduce_into(d_in=object(), d_out=cc.DiscardIterator(), num_items=1, op=cc.OpKind.PLUS,
                       h_init=np.int32(0))


def test_python_callable_needs_numba_cuda(monkeypatch):
    # Hide numba-cuda (installed or not) so the error path runs everywhere.
    monkeypatch.setitem(sys.modules, "numba", None)
    monkeypatch.setitem(sys.modules, "numba.cuda", None)
    with pytest.raises(ImportError, match="numba-cuda"):
        cc.make_unary_transform(d_in=cc.CountingIterator(np.int32(0)), d_out=cc.DiscardIterator(),
                                op=lambda x: x + 1, compute_capability=90)


# ---- GPU -------------------------------------------------------------------------------
@pytest.fixture
def cp():
    require_gpu()
    return pytest.importorskip("cupy")


SIZES = [1, 31, (1 << 20) + 1]
rng = np.random.default_rng(1234)


@pytest.mark.gpu
@pytest.mark.parametrize("n", SIZES + [1 << 28])
def test_reduce_into_sum(cp, n):
    h = rng.integers(0, 1 << 31, n, dtype=np.uint32)
    d_in, d_out = cp.asarray(h), cp.empty(1, np.uint32)
    cc.reduce_into(d_in=d_in, d_out=d_out, op=cc.OpKind.PLUS, num_items=n, h_init=np.array([5], np.uint32))
    assert int(d_out.get()[0]) == (int(h.astype(np.uint64).sum()) + 5) % (1 << 32)


@pytest.mark.gpu
def test_make_reduce_into_two_phase_and_torch_tensors(cp):
    torch = pytest.importorskip("torch")
    h = rng.standard_normal(100001).astype(np.float32)
    d_in = torch.tensor(h, device="cuda")
    d_out = torch.empty(1, dtype=torch.float32, device="cuda")
    red = cc.make_reduce_into(d_in=d_in, d_out=d_out, op=cc.OpKind.MAXIMUM, h_init=np.float32(-1e30))
    nbytes = red(temp_storage=None, d_in=d_in, d_out=d_out, num_items=len(h), h_init=np.float32(-1e30))
    temp = cp.empty(nbytes, np.uint8)
    red(temp_storage=temp, d_in=d_in, d_out=d_out, num_items=len(h), h_init=np.float32(-1e30))
    assert d_out.item() == h.max()
    with pytest.raises(ValueError, match="too small"):
        red(temp_storage=cp.empty(nbytes - 1, np.uint8), d_in=d_in, d_out=d_out, num_items=len(h),
            h_init=np.float32(-1e30))


@pytest.mark.gpu
@pytest.mark.parametrize("n", SIZES)
def test_scans(cp, n):
    h = rng.integers(0, 1000, n, dtype=np.int64)
    d_in, d_out = cp.asarray(h), cp.empty(n, np.int64)
    cc.inclusive_scan(d_in=d_in, d_out=d_out, op=cc.OpKind.PLUS, num_items=n)
    np.testing.assert_array_equal(d_out.get(), np.cumsum(h))
    cc.exclusive_scan(d_in=d_in, d_out=d_out, op=cc.OpKind.PLUS, init_value=np.int64(3), num_items=n)
    np.testing.assert_array_equal(d_out.get(), np.concatenate([[3], 3 + np.cumsum(h)[:-1]]))


@pytest.mark.gpu
def test_transforms_with_cpp_and_python_operators(cp):
    n = (1 << 20) + 1
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    dx, dy, out = cp.asarray(x), cp.asarray(y), cp.empty(n, np.float32)
    cc.binary_transform(d_in1=dx, d_in2=dy, d_out=out, op=cc.CppOp("[](float a, float b) { return 2.0f * a + b; }"),
                        num_items=n)
    np.testing.assert_array_equal(out.get(), np.float32(2) * x + y)
    try:
        from numba import cuda  # noqa: F401
    except ImportError:
        pytest.skip("numba-cuda is not installed: Python operators cannot be compiled")
    # numba-cuda releases that still register np.row_stack fail to load their
    # CUDA target under NumPy 2.4+, which removed that alias of np.vstack; the
    # test restores it so that cucore's operator path is what gets tested.
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack

    def triple(v):
        return v * 3

    cc.unary_transform(d_in=dx, d_out=out, op=triple, num_items=n)
    np.testing.assert_array_equal(out.get(), x * np.float32(3))


@pytest.mark.gpu
def test_iterators(cp):
    n = 1001
    x = rng.standard_normal(n).astype(np.float32)
    dx, out = cp.asarray(x), cp.empty(n, np.float64)
    z = cc.ZipIterator(cc.ReverseIterator(dx),
                       cc.TransformIterator(cc.CountingIterator(np.int64(0)), cc.CppOp("[](long long i) { return int(i % 3); }"),
                                            np.int32))
    cc.unary_transform(d_in=z, d_out=out, op=cc.CppOp("[](auto v) { return double(v.f0) * v.f1; }"), num_items=n)
    np.testing.assert_array_equal(out.get(), x[::-1].astype(np.float64) * (np.arange(n) % 3))
    r = cp.empty(1, np.int64)
    cc.reduce_into(d_in=cc.ConstantIterator(np.int64(3)), d_out=r, op=cc.OpKind.PLUS, num_items=1000,
                   h_init=np.int64(1))
    assert int(r.get()[0]) == 3001


@pytest.mark.gpu
def test_radix_sort_pairs_stable_and_double_buffer(cp):
    n = (1 << 20) + 1
    k = rng.integers(0, 5000, n, dtype=np.uint32)
    v = np.arange(n, dtype=np.uint32)
    dk, dv, ok, ov = cp.asarray(k), cp.asarray(v), cp.empty(n, np.uint32), cp.empty(n, np.uint32)
    cc.radix_sort(d_in_keys=dk, d_out_keys=ok, d_in_values=dv, d_out_values=ov, num_items=n,
                  order=cc.SortOrder.DESCENDING)
    order = np.argsort(-k.astype(np.int64), kind="stable")
    np.testing.assert_array_equal(ok.get(), k[order])
    np.testing.assert_array_equal(ov.get(), v[order])
    keys = cc.DoubleBuffer(cp.asarray(k), cp.empty(n, np.uint32))
    cc.radix_sort(d_in_keys=keys, d_out_keys=None, num_items=n, order=cc.SortOrder.ASCENDING)
    np.testing.assert_array_equal(keys.current().get(), np.sort(k))


@pytest.mark.gpu
def test_histogram_even(cp):
    h = rng.integers(-20, 1100, (1 << 20) + 1, dtype=np.int32)
    d_hist = cp.empty(256, np.int32)
    cc.histogram_even(d_samples=cp.asarray(h), d_histogram=d_hist, num_output_levels=257, lower_level=np.int32(0),
                      upper_level=np.int32(1024), num_samples=len(h))
    expect, _ = np.histogram(h[(h >= 0) & (h < 1024)], bins=256, range=(0, 1024))
    np.testing.assert_array_equal(d_hist.get(), expect)


@pytest.mark.gpu
def test_struct_reduction(cp):
    Pair = cc.gpu_struct({"key": np.int32, "weight": np.float32}, name="Pair")
    n = 10007
    h = np.zeros(n, Pair.dtype)
    h["key"] = np.arange(n)
    h["weight"] = rng.standard_normal(n).astype(np.float32)
    d_in = cp.asarray(h.view(np.uint8)).view(np.uint8)
    out = cp.empty(Pair.dtype.itemsize, np.uint8)

    class Arr:  # a device array of Pair through the CUDA Array Interface
        def __init__(self, a, count):
            self.__cuda_array_interface__ = {"shape": (count,), "typestr": "|V8", "descr": Pair.dtype.descr,
                                             "data": (a.data.ptr, False), "version": 3, "strides": None}

    cc.reduce_into(d_in=Arr(d_in, n), d_out=Arr(out, 1), num_items=n, h_init=Pair(-1, np.float32(-1e30)),
                   op=cc.CppOp("[](auto a, auto b) { return a.weight < b.weight ? b : a; }"))
    got = out.get().view(Pair.dtype)[0]
    assert got["key"] == h["key"][np.argmax(h["weight"])]


@pytest.mark.gpu
def test_disk_cache_hit_in_a_fresh_process(cp, tmp_path):
    code = """
import numpy as np, cupy as cp, cucore.compute as cc
from cucore.utils import default_program_cache
d_in = cp.asarray(np.arange(100, dtype=np.int32)); d_out = cp.empty(1, np.int32)
cc.reduce_into(d_in=d_in, d_out=d_out, op=cc.OpKind.PLUS, num_items=100, h_init=np.int32(0))
assert int(d_out.get()[0]) == 4950
s = default_program_cache().stats
print(s["hits"], s["misses"])
"""
    env = dict(os.environ, CUCORE_PROGRAM_CACHE_DIR=str(tmp_path))
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(cucore.__file__)), env.get("PYTHONPATH", "")])
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr
    assert first.stdout.split()[-1] != "0", "the first process found kernels in an empty cache"
    hits, misses = map(int, second.stdout.split()[-2:])
    assert (hits, misses) == (1, 0), "the second process compiled instead of reading the disk cache"
