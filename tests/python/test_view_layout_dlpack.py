"""StridedMemoryView's layouts, DLPack export arguments, copies' refusals and tensor maps'
validation, on the CPU: _layout/layout and view(layout=...) on random NumPy data,
__dlpack__'s max_version / dl_device / copy as the DLPack spec and cuda.core take them,
dtypes through numpy.from_dlpack, and as_tensor_map's checks (ValueError before any driver
call) on views of made-up device memory."""
import pytest

import cucore
from cucore import TensorMapDescriptorOptions
from cucore._layout import _StridedLayout
from cucore._tensor_map import TensorMapSwizzle
from cucore.utils import StridedMemoryView

np = pytest.importorskip("numpy")


def test_layouts_of_numpy_views():
    rng = np.random.default_rng(1)
    a = rng.random((6, 8)).astype(np.float32)
    c = StridedMemoryView.from_dlpack(a, -1)
    assert c.layout == c._layout == _StridedLayout((6, 8), None, 4)
    assert c.layout.is_contiguous_c and not c.layout.is_contiguous_f and c.layout.is_dense
    f = StridedMemoryView.from_dlpack(np.asfortranarray(a), -1)
    assert f.layout.strides == (1, 6) and f.layout.is_contiguous_f and not f.layout.is_contiguous_c
    s = StridedMemoryView.from_dlpack(a[:, ::2], -1)
    assert s.layout.strides == (8, 2) and s.layout.strides_in_bytes == (32, 8)
    assert not s.layout.is_contiguous_c and not s.layout.is_contiguous_f and not s.layout.is_dense
    assert s.layout.required_size_in_bytes() == (5 * 8 + 3 * 2 + 1) * 4
    assert _StridedLayout.dense((5, 3, 7), 1, "F") == _StridedLayout((5, 3, 7), (1, 5, 15), 1)
    assert _StridedLayout.dense((5, 3, 7), 1, (2, 0, 1)).strides == (3, 1, 15)
    assert _StridedLayout((4, 8), (64, 8), 8, divide_strides=True).strides == (8, 1)
    with pytest.raises(ValueError, match="power of two"):
        _StridedLayout((2,), None, 3)


def test_view_with_a_layout_reinterprets_every_element():
    rng = np.random.default_rng(2)
    a = rng.random((6, 8)).astype(np.float32)
    v = StridedMemoryView.from_dlpack(a, -1)
    # The same memory as an 8 x 6 F-ordered array is the transpose.
    t = v.view(_StridedLayout.dense((8, 6), 4, "F"))
    assert t.ptr == v.ptr and t.shape == (8, 6) and t.strides == (1, 8)
    assert np.array_equal(np.from_dlpack(t), a.T)
    # A layout and a dtype together: the int32 bits of the same floats, flattened.
    u = v.view(_StridedLayout((48,), None, 4), np.int32)
    assert np.array_equal(np.from_dlpack(u), a.reshape(-1).view(np.int32))
    with pytest.raises(ValueError, match="itemsize"):
        v.view(_StridedLayout((24,), None, 8))


def test_view_with_nothing_to_change_is_the_same_view():
    # cuda.core: view() with neither a layout nor a dtype returns the view itself.
    a = np.random.default_rng(9).random((3, 5)).astype(np.float64)
    v = StridedMemoryView.from_dlpack(a, -1)
    assert v.view() is v
    assert v.view(None, None) is v and v.view(layout=None, dtype=None) is v
    w = v.view(dtype=np.int64)  # a change gives a new view
    assert w is not v and np.array_equal(np.from_dlpack(w), a.view(np.int64))


def test_dlpack_arguments():
    rng = np.random.default_rng(3)
    a = rng.random(10).astype(np.float32)
    v = StridedMemoryView.from_dlpack(a, -1)
    get_name = __import__("ctypes").pythonapi.PyCapsule_GetName
    get_name.restype = __import__("ctypes").c_char_p
    get_name.argtypes = [__import__("ctypes").py_object]
    assert get_name(v.__dlpack__()) == b"dltensor"
    assert get_name(v.__dlpack__(max_version=(1, 0))) == b"dltensor_versioned"
    assert get_name(v.__dlpack__(max_version=(0, 8))) == b"dltensor"
    assert get_name(v.__dlpack__(dl_device=(1, 0), copy=False)) == b"dltensor"
    with pytest.raises(BufferError, match="copy=True"):
        v.__dlpack__(copy=True)
    with pytest.raises(BufferError, match=r"dl_device \(2, 0\) is not where the memory is \(1, 0\)"):
        v.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError, match="max_version"):
        v.__dlpack__(max_version=1)
    assert v.__dlpack_device__() == (1, 0)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.complex64, np.complex128, np.bool_, np.int8, np.uint64])
def test_dtypes_round_trip_through_numpy(dtype):
    rng = np.random.default_rng(4)
    if dtype == np.bool_:
        a = rng.random((5, 7)) > 0.5
    elif np.issubdtype(dtype, np.complexfloating):
        a = (rng.random((5, 7)) + 1j * rng.random((5, 7))).astype(dtype)
    elif np.issubdtype(dtype, np.integer):
        a = rng.integers(0, 100, size=(5, 7)).astype(dtype)
    else:
        a = rng.random((5, 7)).astype(dtype)
    back = np.from_dlpack(StridedMemoryView.from_dlpack(a[:, 1:], -1))
    assert back.dtype == a.dtype and back.ctypes.data == a[:, 1:].ctypes.data
    assert np.array_equal(back, a[:, 1:])


def test_bfloat16_from_buffer_dtype_is_dlpack_bfloat():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(5)
    a = rng.random(16).astype(ml_dtypes.bfloat16)
    v = StridedMemoryView.from_array_interface(a.view(np.uint16)).view(dtype=ml_dtypes.bfloat16)
    assert v.dtype == np.dtype(ml_dtypes.bfloat16)
    # Exported as DLPack's bfloat16 (code 4): numpy cannot take it, the capsule is made.
    assert type(v.__dlpack__(max_version=(1, 0))).__name__ == "PyCapsule"


def test_copies_refuse_mismatches_before_any_copy():
    rng = np.random.default_rng(6)
    a = rng.random((4, 6)).astype(np.float32)
    b = np.zeros((6, 4), np.float32)
    va, vb = StridedMemoryView.from_dlpack(a, -1), StridedMemoryView.from_dlpack(b, -1)
    with pytest.raises(ValueError, match="shapes differ"):
        vb.copy_from(va, None)
    with pytest.raises(ValueError, match="contiguous in the same order"):
        StridedMemoryView.from_dlpack(np.zeros((4, 3), np.float32), -1).copy_from(
            StridedMemoryView.from_dlpack(a[:, ::2], -1), None)
    ro = a.copy()
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        StridedMemoryView.from_array_interface(ro).copy_from(va, None)
    with pytest.raises(TypeError, match="StridedMemoryView"):
        va.copy_to(a)
    assert not b.any()


class _FakeDeviceArray:
    """CUDA Array Interface v3 over a made-up device address (never dereferenced)."""

    def __init__(self, ptr, shape, strides=None, typestr="<f4"):
        self.__cuda_array_interface__ = {"version": 3, "data": (ptr, False), "shape": shape,
                                         "strides": strides, "typestr": typestr, "stream": None}


def test_tensor_map_rules_are_checked_before_the_driver():
    view = lambda *a, **k: StridedMemoryView.from_cuda_array_interface(_FakeDeviceArray(*a, **k), -1)  # noqa: E731
    good = view(0x100000, (64, 64))
    cases = [
        (view(0x100008, (64, 64)), dict(box_dim=(8, 8)), "not 16-byte aligned"),
        (view(0x100000, (64, 60), (244, 4)), dict(box_dim=(8, 8)), "multiple of 16"),
        (view(0x100000, (64, 64), (4, 256)), dict(box_dim=(8, 8)), "must be contiguous"),
        (good, dict(box_dim=(8, 257)), r"box_dim\[1\] is 257"),
        (good, dict(box_dim=(8,)), "box_dim has 1 entries"),
        (good, dict(box_dim=(8, 6)), "multiple of 16 bytes"),
        (good, dict(box_dim=(8, 32), swizzle=TensorMapSwizzle.SWIZZLE_32B), "32-byte swizzle span"),
        (good, dict(box_dim=(8, 8), element_strides=(1, 9)), r"element_strides\[1\] is 9"),
        (good, dict(box_dim=(8, 8), data_type=np.float64), "8-byte elements"),
        (view(0x100000, (2, 2, 2, 2, 2, 4)), dict(box_dim=(1, 1, 1, 1, 1, 4)), "rank 6"),
        (view(0x100000, (64, 64), typestr="<c8"), dict(box_dim=(8, 8)), "no TMA data type"),
        (StridedMemoryView.from_dlpack(np.zeros((64, 64), np.float32), -1), dict(box_dim=(8, 8)),
         "not device-accessible"),
    ]
    for v, kwargs, expect in cases:
        with pytest.raises(ValueError, match=expect):
            v.as_tensor_map(**kwargs)
    # cuda.core's TypeErrors (test_conformance_errors.py has its texts)
    with pytest.raises(TypeError, match="not both"):
        good.as_tensor_map((8, 8), options=TensorMapDescriptorOptions(box_dim=(8, 8)))
    with pytest.raises(TypeError, match="box_dim is required"):
        good.as_tensor_map()
    with pytest.raises(TypeError, match="swizzle must be a TensorMapSwizzle"):
        TensorMapDescriptorOptions(box_dim=(8, 8), swizzle=9)
    with pytest.raises(ValueError, match="no TMA data type"):
        good.as_tensor_map((8, 8), data_type=np.complex64)
    assert cucore.TensorMapDescriptor is cucore._tensor_map.TensorMapDescriptor


def test_fast_call_arguments_as_a_python_signature_takes_them():
    """from_dlpack and from_any_interface (fast C calls) take (obj, stream_ptr=None) positionally or by
    keyword, and refuse what a Python function with that signature refuses, with TypeError."""
    rng = np.random.default_rng(7)
    a = rng.random((3, 5)).astype(np.float32)
    for f in (StridedMemoryView.from_dlpack, StridedMemoryView.from_any_interface):
        for v in (f(a), f(a, -1), f(a, stream_ptr=-1), f(obj=a, stream_ptr=-1), f(stream_ptr=-1, obj=a)):
            assert v.ptr == a.ctypes.data and v.shape == (3, 5) and v.exporting_obj is a
            assert np.array_equal(np.from_dlpack(v), a)
        name = f.__name__
        with pytest.raises(TypeError, match=f"{name}\\(\\) missing required argument 'obj'"):
            f()
        with pytest.raises(TypeError, match="missing required argument 'obj'"):
            f(stream_ptr=-1)
        with pytest.raises(TypeError, match="at most 2 arguments"):
            f(a, -1, None)
        with pytest.raises(TypeError, match="multiple values for argument 'obj'"):
            f(a, obj=a)
        with pytest.raises(TypeError, match="multiple values for argument 'stream_ptr'"):
            f(a, -1, stream_ptr=-1)
        with pytest.raises(TypeError, match="unexpected keyword argument 'stream'"):
            f(a, stream=-1)
    with pytest.raises(TypeError, match="StridedMemoryView\\(\\) got multiple values for argument 'obj'"):
        StridedMemoryView(a, obj=a)
    # What DLPack cannot describe is still BufferError, not a crash in the fast path.
    with pytest.raises(BufferError):
        StridedMemoryView.from_any_interface(object())


def test_dlpack_methods_take_keywords_only():
    """__dlpack__ is keyword-only (the DLPack spec), __dlpack_device__ takes nothing; both are plain
    C methods now, with the keyword names and errors a Python method would have."""
    a = np.random.default_rng(8).random(6).astype(np.float64)
    v = StridedMemoryView.from_dlpack(a, -1)
    with pytest.raises(TypeError, match="no positional arguments"):
        v.__dlpack__(None)
    with pytest.raises(TypeError, match="unexpected keyword argument 'streams'"):
        v.__dlpack__(streams=None)
    with pytest.raises(TypeError):
        v.__dlpack_device__(0)
    # Keywords from a dict (as torch.from_dlpack passes them), whatever their string objects.
    kw = {"".join(["max_", "version"]): (1, 0), "dl_device": (1, 0), "copy": None, "stream": None}
    assert np.array_equal(np.from_dlpack(v), a)
    assert type(v.__dlpack__(**kw)).__name__ == "PyCapsule"
    assert type(v).__dlpack__.__text_signature__.startswith("($self, /, *, stream=None")


def test_views_hold_what_they_describe_until_they_go():
    """Views made in place (pooled instances) keep their exporter alive and release it when they
    go: many views of many arrays, dropped in a random order, each still reads its own data."""
    import gc
    import sys
    import weakref

    rng = np.random.default_rng(9)

    class Exporter:  # a NumPy array behind the array interface only, weakly referenceable
        def __init__(self, a):
            self.a = a
            self.__array_interface__ = a.__array_interface__

    arrays = [rng.random(int(rng.integers(1, 50))).astype(np.float32) for _ in range(200)]
    owners = [Exporter(a) for a in arrays]
    refs = [weakref.ref(o) for o in owners]
    views = [StridedMemoryView.from_any_interface(o, -1) for o in owners]
    del owners
    gc.collect()
    assert all(r() is not None for r in refs)  # held by their views
    for i in rng.permutation(len(views)):
        assert np.array_equal(np.from_dlpack(views[i]), arrays[i])
    for i in rng.permutation(len(views)):
        views[i] = None
        gc.collect()
        assert refs[i]() is None
    # Views over the DLPack path (a consumed capsule each) go the same way.
    a0 = arrays[0]
    before = sys.getrefcount(a0)  # (outside the asserts: pytest's rewriting holds what they name)
    vs = [StridedMemoryView.from_dlpack(a0, -1) for _ in range(100)]
    held = sys.getrefcount(a0)
    del vs
    gc.collect()
    after = sys.getrefcount(a0)
    assert held >= before + 100 and after == before


class _CudaProducer:
    """A CUDA DLPack producer that records the stream it is asked for, then refuses."""

    def __init__(self):
        self.streams = []

    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA, device 0

    def __dlpack__(self, stream=None, max_version=None, **kwargs):
        self.streams.append(stream)
        raise BufferError("refused on purpose")


@pytest.mark.parametrize("stream_ptr, asked", [(0, None), (None, -1), (7, 7), (2**64 - 1, 2**64 - 1)])
def test_from_dlpack_passes_the_stream_as_cuda_core_does(stream_ptr, asked):
    # 0 is no stream the DLPack protocol lets a consumer name: it goes as None
    # (as cuda.core passes it); None means "no synchronization" (-1).
    p = _CudaProducer()
    with pytest.raises(BufferError, match="refused on purpose"):
        StridedMemoryView.from_dlpack(p, stream_ptr=stream_ptr)
    assert p.streams == [asked]
