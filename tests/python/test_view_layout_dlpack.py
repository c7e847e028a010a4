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
    with pytest.raises(ValueError, match="not both"):
        good.as_tensor_map((8, 8), options=TensorMapDescriptorOptions(box_dim=(8, 8)))
    with pytest.raises(ValueError, match="box_dim is required"):
        good.as_tensor_map()
    with pytest.raises(ValueError, match="swizzle must be a TensorMapSwizzle"):
        TensorMapDescriptorOptions(box_dim=(8, 8), swizzle=9)
    with pytest.raises(ValueError, match="no TMA data type"):
        good.as_tensor_map((8, 8), data_type=np.complex64)
    assert cucore.TensorMapDescriptor is cucore._tensor_map.TensorMapDescriptor
