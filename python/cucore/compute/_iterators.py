"""Iterators (cuda.compute's): lazily evaluated sequences that algorithms read
from or write to, and device arrays as pointer iterators."""
from __future__ import annotations

from cucore._core import _compute as _c

from cucore.compute._types import dtype_of, np, to_type, to_value


def array_info(a):
    """(device pointer, numpy dtype, element count) of a device array: the CUDA Array
    Interface first (CuPy, PyTorch, Numba), else DLPack through StridedMemoryView."""
    cai = getattr(a, "__cuda_array_interface__", None)
    if cai is not None:
        shape = tuple(cai["shape"])
        dt = np.dtype(cai["descr"]) if cai.get("descr") and len(cai["descr"]) > 1 else np.dtype(cai["typestr"])
        strides = cai.get("strides")
        n = 1
        for s in shape:
            n *= s
        if strides is not None and n > 1:
            expect = dt.itemsize
            for dim, st in zip(reversed(shape), reversed(strides)):
                if dim > 1 and st != expect:
                    raise ValueError("cucore.compute: arrays must be C-contiguous")
                expect *= dim
        return int(cai["data"][0]), dt, n
    from cucore.utils import StridedMemoryView

    try:
        v = StridedMemoryView.from_any_interface(a, stream_ptr=-1)
    except Exception as e:
        raise TypeError(f"cucore.compute: {type(a).__name__} is neither an iterator nor a device array "
                        f"(no __cuda_array_interface__ or __dlpack__)") from e
    if not v.is_device_accessible:
        raise ValueError("cucore.compute: the array is not in device memory")
    n = 1
    for s in v.shape:
        n *= s
    return int(v.ptr), np.dtype(v.dtype), n


class IteratorBase:
    """Base of cucore.compute's iterators; `value_type` is the numpy dtype read."""

    def _cxx(self) -> "_c.Iterator":
        raise NotImplementedError

    @property
    def value_type(self):
        return self._dtype

    def _kind(self):
        return self._cxx().signature


def to_iterator(x):
    """The C++ iterator for an iterator or a device array."""
    if isinstance(x, IteratorBase):
        return x._cxx()
    ptr, dt, _ = array_info(x)
    return _c.Iterator.pointer(to_type(dt), ptr)


def value_dtype(x):
    return x.value_type if isinstance(x, IteratorBase) else array_info(x)[1]


class CountingIterator(IteratorBase):
    """start, start + 1, start + 2, ... (thrust::counting_iterator)."""

    def __init__(self, start):
        if not isinstance(start, np.generic):
            start = np.array(start).flatten()[0]
        self._start, self._dtype = start, start.dtype

    def _cxx(self):
        return _c.Iterator.counting(to_value(self._start))


class ConstantIterator(IteratorBase):
    """value, value, ... (thrust::constant_iterator)."""

    def __init__(self, value):
        if not isinstance(value, np.generic) and not hasattr(value, "_cucore_struct"):
            value = np.array(value).flatten()[0]
        self._value, self._dtype = value, dtype_of(value)

    def _cxx(self):
        return _c.Iterator.constant(to_value(self._value))


class TransformIterator(IteratorBase):
    """op(underlying[i]) (thrust::transform_iterator); the op is an OpKind, a CppOp,
    a RawOp or a Python callable (numba-cuda). value_type defaults to the input's."""

    def __init__(self, underlying, transform_op, value_type=None):
        from cucore.compute._ops import to_op

        self._under = underlying
        in_dt = value_dtype(underlying)
        self._dtype = np.dtype(value_type) if value_type is not None else in_dt
        self._op = to_op(transform_op, (in_dt,), self._dtype)

    def _cxx(self):
        return _c.Iterator.transform(to_iterator(self._under), self._op, to_type(self._dtype))


class DiscardIterator(IteratorBase):
    """Writes vanish (thrust::discard_iterator)."""

    def __init__(self, reference_iterator=None):
        self._dtype = np.dtype("uint8") if reference_iterator is None else value_dtype(reference_iterator)

    def _cxx(self):
        return _c.Iterator.discard(to_type(self._dtype))


class ZipIterator(IteratorBase):
    """(its[0][i], its[1][i], ...) as a struct with fields f0, f1, ... (thrust::zip_iterator)."""

    def __init__(self, *args):
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            args = tuple(args[0])
        if len(args) < 2:
            raise ValueError("ZipIterator zips two or more iterators or arrays")
        self._its = args
        self._dtype = np.dtype([(f"f{i}", value_dtype(a)) for i, a in enumerate(args)], align=True)

    def _cxx(self):
        return _c.Iterator.zip([to_iterator(a) for a in self._its])


class ReverseIterator(IteratorBase):
    """underlying read (or written) back to front. For an array, from its last element."""

    def __init__(self, underlying, size=None):
        if size is None:
            if isinstance(underlying, IteratorBase):
                raise ValueError("ReverseIterator over an iterator needs its size")
            size = array_info(underlying)[2]
        self._under, self._size, self._dtype = underlying, int(size), value_dtype(underlying)

    def _cxx(self):
        return _c.Iterator.reverse(to_iterator(self._under), self._size)


__all__ = [
    "IteratorBase", "CountingIterator", "ConstantIterator", "TransformIterator", "DiscardIterator",
    "ZipIterator", "ReverseIterator", "array_info", "to_iterator", "value_dtype",
]
