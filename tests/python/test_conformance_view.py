"""StridedMemoryView as cuda.core 1.2 documents it: the deprecated
constructor warns, views of NumPy arrays through every host protocol agree
(strides in elements, None when C-contiguous), the array interface's strides
must be whole elements, structured dtypes keep their fields, the CUDA Array
Interface needs v3 and no mask, view(dtype=...) reinterprets, bfloat16 comes
from ml_dtypes (NotImplementedError without it); a view's pointer, shape,
strides, dtype and readonly flag over NumPy arrays, the
args_viewable_as_strided_memory decorator, and BufferError for what is no
array. CPU only."""
import random
import sys

import pytest

from cucore.utils import StridedMemoryView, args_viewable_as_strided_memory

np = pytest.importorskip("numpy")


def _samples():
    rng = np.random.default_rng(5)
    return [
        rng.integers(-1000, 1000, size=7, dtype=np.int32),
        rng.random((6, 6))[::2, ::2],
        np.asfortranarray(rng.random((3, 4))),
        np.array(rng.random(), dtype=np.float16),
        rng.integers(0, 255, size=(4, 5, 3), dtype=np.uint8)[:, ::-1, 1:],
    ]


def _check(view, a):
    assert view.ptr == a.ctypes.data
    assert view.shape == a.shape and view.size == a.size
    if a.flags.c_contiguous:
        assert view.strides is None
    else:
        assert view.strides == tuple(s // a.itemsize for s in a.strides)
    assert view.dtype == a.dtype
    assert view.device_id == -1 and view.is_device_accessible is False
    assert view.exporting_obj is a and view.readonly is (not a.flags.writeable)


@pytest.mark.parametrize("how", ["any", "dlpack", "array_interface", "decorator"])
def test_views_of_numpy_arrays(how):
    for a in _samples():
        if how == "any":
            v = StridedMemoryView.from_any_interface(a, stream_ptr=-1)
        elif how == "dlpack":
            if a.strides and any(s < 0 for s in a.strides):
                continue  # NumPy exports no negative strides through DLPack
            v = StridedMemoryView.from_dlpack(a, -1)
        elif how == "array_interface":
            v = StridedMemoryView.from_array_interface(a)
        else:
            got = []

            @args_viewable_as_strided_memory((0,))
            def f(x):
                got.append(x.view(-1))

            f(a)
            v = got[0]
        _check(v, a)
        # The numbers behind the view are the array's, element by element.
        if a.flags.c_contiguous and a.ndim:
            back = np.from_dlpack(v)
            assert back.shape == a.shape and (back == a).all()


def test_the_constructor_is_deprecated():
    a = np.arange(12, dtype=np.int64)
    with pytest.deprecated_call(match="deprecated"):
        v = StridedMemoryView(a, stream_ptr=-1)
    _check(v, a)


class _Interface:
    def __init__(self, cuda, **d):
        base = {"shape": (4,), "typestr": "<i4", "data": (0, False), "version": 3}
        base.update(d)
        setattr(self, "__cuda_array_interface__" if cuda else "__array_interface__", base)


def test_interface_rules():
    with pytest.raises(BufferError, match="only CUDA Array Interface v3 or above is supported"):
        StridedMemoryView.from_cuda_array_interface(_Interface(True, version=2), -1)
    no_version = _Interface(True)
    del no_version.__cuda_array_interface__["version"]
    with pytest.raises(BufferError, match="only CUDA Array Interface v3"):
        StridedMemoryView.from_cuda_array_interface(no_version, -1)
    with pytest.raises(BufferError, match="mask is not supported"):
        StridedMemoryView.from_cuda_array_interface(_Interface(True, mask=object()), -1)
    with pytest.raises(ValueError, match="not a multiple of the itemsize"):
        StridedMemoryView.from_array_interface(_Interface(False, strides=(6,)))
    with pytest.raises(ValueError, match="strides"):
        StridedMemoryView.from_array_interface(_Interface(False, strides=(4, 4)))
    v = StridedMemoryView.from_array_interface(_Interface(False, shape=(2, 3), strides=(4, 8)))
    assert v.shape == (2, 3) and v.strides == (1, 2)


def test_structured_dtypes_keep_their_fields():
    rng = random.Random(9)
    dt = np.dtype([("x", np.int32), ("y", np.float64), ("z", np.uint8)], align=True)
    a = np.zeros(5, dtype=dt)
    for i in range(5):
        a[i] = (rng.randrange(1000), rng.random(), rng.randrange(256))
    for v in (StridedMemoryView.from_array_interface(a), StridedMemoryView.from_any_interface(a, -1)):
        assert v.dtype == a.dtype and v.dtype.names == ("x", "y", "z") and v.shape == (5,) and v.strides is None
        assert v.ptr == a.ctypes.data
    with pytest.raises(BufferError):  # no DLPack type for a structured dtype
        StridedMemoryView.from_array_interface(a).__dlpack__()


def test_view_reinterprets_the_dtype():
    a = np.arange(8, dtype=np.float32) * 1.5
    v = StridedMemoryView.from_any_interface(a, -1)
    u = v.view(dtype=np.uint32)
    assert u.dtype == np.uint32 and u.ptr == v.ptr and u.shape == v.shape and u.exporting_obj is a
    assert (np.from_dlpack(u) == a.view(np.uint32)).all()
    assert v.view().dtype == np.float32
    with pytest.raises(ValueError, match="itemsize"):
        v.view(dtype=np.float64)
    with pytest.raises(TypeError):
        v.view(layout=object())


def test_bfloat16_through_ml_dtypes(monkeypatch):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    # A producer that speaks DLPack with a bfloat16 type: NumPy may not; PyTorch does.
    a = np.arange(6, dtype=np.float32).astype(ml_dtypes.bfloat16)
    try:
        v = StridedMemoryView.from_dlpack(a, -1)
    except BufferError:
        torch = pytest.importorskip("torch", reason="no DLPack producer of bfloat16 here")
        a = torch.arange(6, dtype=torch.float32).to(torch.bfloat16)
        v = StridedMemoryView.from_dlpack(a, -1)
    assert v.dtype == np.dtype(ml_dtypes.bfloat16) and v.shape == (6,)
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # as if not installed
    w = StridedMemoryView.from_dlpack(a, -1)
    with pytest.raises(NotImplementedError, match="ml_dtypes"):
        w.dtype


# ---- views over NumPy arrays -------------------------------------------------------------
def test_view_numpy_contiguous():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = StridedMemoryView(a, stream_ptr=-1)
    assert v.ptr == a.ctypes.data
    assert v.shape == (3, 4)
    assert v.strides in (None, (4, 1))
    assert v.dtype == np.float32
    assert v.device_id == -1 and not v.is_device_accessible
    assert not v.readonly
    assert v.exporting_obj is a
    assert v.size == 12


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int32, np.int64, np.float16, np.float64, np.complex64,
                                   np.bool_])
def test_view_numpy_dtypes(dtype):
    a = np.zeros((5,), dtype=dtype)
    v = StridedMemoryView(a, -1)
    assert v.dtype == np.dtype(dtype)
    assert v.shape == (5,)


def test_view_numpy_strided_and_readonly():
    a = np.arange(24, dtype=np.int32).reshape(4, 6)
    v = StridedMemoryView(a[::2, 1::3], -1)
    assert v.shape == (2, 2)
    assert v.strides == (12, 3)  # in elements, as cuda.core
    assert v.ptr == a[::2, 1::3].ctypes.data
    r = a.copy()
    r.flags.writeable = False
    assert StridedMemoryView(r, -1).readonly
    t = StridedMemoryView.from_array_interface(a.T)
    assert t.shape == (6, 4) and t.strides == (1, 6)


def test_view_decorator():
    seen = {}

    @args_viewable_as_strided_memory((0,))
    def f(arr, n):
        v = arr.view(-1)
        seen["v"] = v
        return n

    a = np.ones(8, dtype=np.float32)
    assert f(a, 3) == 3
    assert seen["v"].ptr == a.ctypes.data


def test_view_rejects_non_arrays():
    with pytest.raises(BufferError):
        StridedMemoryView(object(), -1)
