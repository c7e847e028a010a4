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


class _FakeArray:
    """A device array as the CUDA Array Interface describes it (never dereferenced here)."""

    def __init__(self, n, typestr, strides=None, ptr=0x7f0000000000):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": typestr, "data": (ptr, False), "version": 3,
                                         "strides": strides}


def test_calls_read_arrays_and_refuse_mismatches_before_running():
    # A built object's call reads its arrays in C++: their element type, and
    # whether they are C-contiguous, are checked before anything runs.
    i32 = _FakeArray(1000, "<i4")
    red = cc.make_reduce_into(d_in=i32, d_out=_FakeArray(1, "<i4"), op=cc.OpKind.PLUS,
                              h_init=np.array([0], np.int32), compute_capability=90)

    def call(**kw):
        args = dict(temp_storage=None, d_in=i32, d_out=_FakeArray(1, "<i4"), num_items=1000,
                    h_init=np.array([0], np.int32))
        args.update(kw)
        return red(**args)

    with pytest.raises(ValueError, match=r"in is a ptr<float32> iterator, but the object was built for ptr<int32>"):
        call(d_in=_FakeArray(1000, "<f4"))
    with pytest.raises(ValueError, match=r"out is a ptr<uint64> iterator, but the object was built for ptr<int32>"):
        call(d_out=_FakeArray(1, "<u8"))
    with pytest.raises(ValueError, match="C-contiguous"):
        call(d_in=_FakeArray(1000, "<i4", strides=(8,)))
    with pytest.raises(ValueError, match="in is a count<int32> iterator"):
        call(d_in=cc.CountingIterator(np.int32(0)))
    with pytest.raises(ValueError, match="single value"):
        call(h_init=np.array([1, 2], np.int32))
    with pytest.raises(TypeError, match="neither an iterator nor a device array"):
        call(d_in=object())
    scan = cc.make_exclusive_scan(d_in=i32, d_out=i32, op=cc.OpKind.PLUS, init_value=np.int32(0),
                                  compute_capability=90)
    with pytest.raises(ValueError, match=r"in is a ptr<int16> iterator"):
        scan(temp_storage=None, d_in=_FakeArray(10, "<i2"), d_out=i32, init_value=np.int32(0), num_items=10)


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


@pytest.mark.gpu
def test_make_reduce_into_calls_take_every_array_and_value_form(cp):
    # The call reads CuPy arrays (CUDA Array Interface), PyTorch tensors (the
    # DLPack exchange API), cucore Buffers and CuPy arrays as temporary storage,
    # and initial values as numpy arrays, numpy scalars, Python numbers or
    # values of another dtype (converted), each on random data.
    n = 100003
    h = rng.integers(-1000, 1000, n, dtype=np.int64)
    d_in, d_out = cp.asarray(h), cp.empty(1, np.int64)
    red = cc.make_reduce_into(d_in=d_in, d_out=d_out, op=cc.OpKind.PLUS, h_init=np.array([0], np.int64))
    nbytes = red(temp_storage=None, d_in=d_in, d_out=d_out, num_items=n, h_init=np.array([0], np.int64))
    buf = cucore.Device(0).memory_resource.allocate(nbytes)
    temps = [cp.empty(nbytes, np.uint8), buf]
    inits = [np.array([7], np.int64), np.int64(-9), 11, np.int32(5), np.array(3.0)]
    for i, init in enumerate(inits):
        red(temp_storage=temps[i % 2], d_in=d_in, d_out=d_out, num_items=n, h_init=init)
        assert int(d_out.get()[0]) == int(h.sum()) + int(init if np.ndim(init) == 0 else init[0]), repr(init)
    m = n // 3  # a prefix
    red(temp_storage=temps[0], d_in=d_in, d_out=d_out, num_items=m, h_init=np.int64(0))
    assert int(d_out.get()[0]) == int(h[:m].sum())
    with pytest.raises(ValueError, match="too small"):
        red(temp_storage=cp.empty(nbytes - 1, np.uint8), d_in=d_in, d_out=d_out, num_items=n, h_init=np.int64(0))
    with pytest.raises(ValueError, match="C-contiguous"):
        red(temp_storage=temps[0], d_in=cp.asarray(np.repeat(h, 2))[::2], d_out=d_out, num_items=n,
            h_init=np.int64(0))
    buf.close()
    with pytest.raises(cucore.ClosedError):
        red(temp_storage=buf, d_in=d_in, d_out=d_out, num_items=n, h_init=np.int64(0))
    torch = pytest.importorskip("torch")
    t_in = torch.as_tensor(d_in, device="cuda")
    t_out = torch.empty(1, dtype=torch.int64, device="cuda")
    red(temp_storage=torch.empty(nbytes, dtype=torch.uint8, device="cuda"), d_in=t_in, d_out=t_out, num_items=n,
        h_init=np.int64(1))
    assert int(t_out.item()) == int(h.sum()) + 1
    with pytest.raises(ValueError, match="ptr<float32> iterator"):
        red(temp_storage=temps[0], d_in=t_in.float(), d_out=t_out, num_items=n, h_init=np.int64(0))


@pytest.mark.gpu
def test_built_scans_sorts_and_histograms_take_torch_and_cupy_arrays(cp):
    torch = pytest.importorskip("torch")
    n = 4099
    h = rng.integers(0, 1 << 16, n, dtype=np.int32)
    t_in, c_out = torch.as_tensor(h, device="cuda"), cp.empty(n, np.int32)
    scan = cc.make_exclusive_scan(d_in=t_in, d_out=c_out, op=cc.OpKind.PLUS, init_value=np.int32(3))
    temp = cp.empty(scan(temp_storage=None, d_in=t_in, d_out=c_out, init_value=np.int32(3), num_items=n), np.uint8)
    scan(temp_storage=temp, d_in=t_in, d_out=c_out, init_value=np.int32(3), num_items=n)
    np.testing.assert_array_equal(c_out.get(), (3 + np.concatenate([[0], np.cumsum(h)[:-1]])).astype(np.int32))
    keys_out = torch.empty(n, dtype=torch.int32, device="cuda")
    sort = cc.make_radix_sort(d_in_keys=t_in, d_out_keys=keys_out, d_in_values=None, d_out_values=None,
                              order=cc.SortOrder.ASCENDING)
    nb = sort(temp_storage=None, d_in_keys=t_in, d_out_keys=keys_out, d_in_values=None, d_out_values=None,
              num_items=n)
    sort(temp_storage=torch.empty(nb, dtype=torch.uint8, device="cuda"), d_in_keys=t_in, d_out_keys=keys_out,
         d_in_values=None, d_out_values=None, num_items=n)
    np.testing.assert_array_equal(keys_out.cpu().numpy(), np.sort(h))
    hist = torch.empty(64, dtype=torch.int32, device="cuda")
    lv, lo, hi = np.array([65], np.int32), np.array([0], np.int32), np.array([1 << 16], np.int32)
    he = cc.make_histogram_even(d_samples=t_in, d_histogram=hist, h_num_output_levels=lv, h_lower_level=lo,
                                h_upper_level=hi, num_samples=n)
    tb = he(temp_storage=None, d_samples=t_in, d_histogram=hist, h_num_output_levels=lv, h_lower_level=lo,
            h_upper_level=hi, num_samples=n)
    he(temp_storage=cp.empty(max(tb, 1), np.uint8), d_samples=t_in, d_histogram=hist, h_num_output_levels=lv,
       h_lower_level=lo, h_upper_level=hi, num_samples=n)
    np.testing.assert_array_equal(hist.cpu().numpy(), np.histogram(h, bins=64, range=(0, 1 << 16))[0])
