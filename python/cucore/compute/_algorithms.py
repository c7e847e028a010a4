"""The algorithms, with cuda.compute's names and keyword arguments: one-shot
functions (temporary storage from the device's pool on the stream, built
objects kept per process) and make_* objects (two-phase temporary storage)."""
from __future__ import annotations

import enum
import threading

from cucore._core import _compute as _c

from cucore.compute._iterators import IteratorBase, array_info, to_iterator, value_dtype
from cucore.compute._ops import OpKind, op_key, to_op
from cucore.compute._types import dtype_of, np, to_type, to_value, value_arg


class Determinism(enum.IntEnum):
    NOT_GUARANTEED = 0
    RUN_TO_RUN = 1
    GPU_TO_GPU = 2


class SortOrder(enum.Enum):
    ASCENDING = 0
    DESCENDING = 1


class DoubleBuffer:
    """Two device arrays; `selector` names the current one (after a sort: the sorted one)."""

    def __init__(self, d_current, d_alternate):
        self.d_buffers = [d_current, d_alternate]
        self.selector = 0

    def current(self):
        return self.d_buffers[self.selector]

    def alternate(self):
        return self.d_buffers[1 - self.selector]


_lock = threading.Lock()
_objects: dict = {}


def _cached(key, build):
    with _lock:
        obj = _objects.get(key)
    if obj is None:
        obj = build()
        with _lock:
            obj = _objects.setdefault(key, obj)
    return obj


def clear_all_caches():
    """Forgets built algorithm objects (Python's and the one-shot functions')."""
    with _lock:
        _objects.clear()
    _c.clear_build_cache()


def _arch(compute_capability):
    """cuda.compute's compute_capability (90, "9.0", (9, 0), or a list: the first) as "sm_90"."""
    c = compute_capability
    if c is None:
        return None
    if isinstance(c, list):
        c = c[0]
    if isinstance(c, tuple):
        c = c[0] * 10 + c[1]
    if isinstance(c, str):
        major, _, minor = c.partition(".")
        c = int(major) * 10 + int(minor or 0)
    return f"sm_{int(c)}"


def _temp(temp_storage):
    """(address, bytes) of temporary storage: what the calls' C++ side does not read itself."""
    if temp_storage is None:
        return 0, 0
    if hasattr(temp_storage, "handle") and hasattr(temp_storage, "size") and not hasattr(temp_storage, "dtype"):
        return int(temp_storage.handle), int(temp_storage.size)  # a cucore.Buffer
    ptr, dt, n = array_info(temp_storage)
    return ptr, n * dt.itemsize


_IDENTITIES = {
    OpKind.PLUS: lambda dt: 0, OpKind.BIT_OR: lambda dt: 0, OpKind.BIT_XOR: lambda dt: 0,
    OpKind.MULTIPLIES: lambda dt: 1, OpKind.BIT_AND: lambda dt: -1 if dt.kind == "i" else np.iinfo(dt).max,
    OpKind.LOGICAL_AND: lambda dt: True, OpKind.LOGICAL_OR: lambda dt: False,
    OpKind.MINIMUM: lambda dt: np.finfo(dt).max if dt.kind == "f" else np.iinfo(dt).max,
    OpKind.MAXIMUM: lambda dt: np.finfo(dt).min if dt.kind == "f" else np.iinfo(dt).min,
}


def _init_or_identity(h_init, op, d_in):
    if h_init is not None:
        return h_init
    dt = np.dtype(value_dtype(d_in))
    if isinstance(op, OpKind) and op in _IDENTITIES and dt.fields is None:
        return np.array(_IDENTITIES[op](dt), dtype=dt)
    raise TypeError("reduce_into: h_init=None needs a well-known operator with an identity "
                    "(PLUS, MINIMUM, ...); give h_init")


# ---------------------------------------------------------------- reduce

# The built objects' calls hand their arguments to C++ as they are (arrays,
# iterators, temporary storage, numpy initial values of the built type): a
# call's Python time is GPU idle time when it starts the stream's work.

class _Reduce:
    def __init__(self, it_in, it_out, op, init_dt, determinism, arch):
        self._init_dt = init_dt
        self._init_t = to_type(init_dt)
        self._obj = _c.Reduce(it_in, it_out, to_op(op, (init_dt, init_dt), init_dt), self._init_t, int(determinism),
                              arch)
        self._op = op

    def __call__(self, *, temp_storage, d_in, d_out, num_items: int, op=None, h_init=None, stream=None):
        if h_init is None:
            h_init = _init_or_identity(None, self._op, d_in)
        return self._obj(temp_storage, d_in, d_out, num_items, value_arg(h_init, self._init_dt), self._init_t,
                         stream)


def make_reduce_into(*, d_in, d_out, op, h_init=None, **kwargs):
    """A reduction object for these kinds of arrays/iterators, operator and initial value."""
    determinism = Determinism(kwargs.get("determinism", Determinism.RUN_TO_RUN))
    init_dt = dtype_of(_init_or_identity(h_init, op, d_in))
    arch = _arch(kwargs.get("compute_capability"))
    it_in, it_out = to_iterator(d_in), to_iterator(d_out)
    key = ("reduce", it_in.signature, it_out.signature, op_key(op, (init_dt, init_dt), init_dt), str(init_dt),
           int(determinism), arch)
    return _cached(key, lambda: _Reduce(it_in, it_out, op, init_dt, determinism, arch))


def reduce_into(*, d_in, d_out, num_items: int, op, h_init=None, stream=None, **kwargs):
    """Device-wide reduction into d_out[0] (temporary storage handled here)."""
    if h_init is None and num_items == 0:
        return  # nothing to reduce and no initial value: d_out is left as it is
    determinism = Determinism(kwargs.get("determinism", Determinism.RUN_TO_RUN))
    init = _init_or_identity(h_init, op, d_in)
    dt = dtype_of(init)
    _c.reduce(to_iterator(d_in), to_iterator(d_out), num_items, to_op(op, (dt, dt), dt), to_value(init, dt),
              int(determinism), stream)


# ---------------------------------------------------------------- scans

class _Scan:
    def __init__(self, it_in, it_out, op, acc, with_init, inclusive, arch):
        self._acc = acc
        self._init_t = to_type(acc) if with_init else None
        op_c = to_op(op, (acc, acc), acc)
        if inclusive:
            self._obj = _c.InclusiveScan(it_in, it_out, op_c, self._init_t, arch)
        else:
            self._obj = _c.ExclusiveScan(it_in, it_out, op_c, self._init_t, arch)

    def __call__(self, *, temp_storage, d_in, d_out, op=None, init_value=None, num_items: int, stream=None):
        init = value_arg(init_value, self._acc) if init_value is not None else None
        return self._obj(temp_storage, d_in, d_out, num_items, init, self._init_t, stream)


def _make_scan(inclusive, d_in, d_out, op, init_value, compute_capability):
    arch = _arch(compute_capability)
    acc = dtype_of(init_value) if init_value is not None else value_dtype(d_in)
    it_in, it_out = to_iterator(d_in), to_iterator(d_out)
    key = ("inclusive" if inclusive else "exclusive", it_in.signature, it_out.signature, op_key(op, (acc, acc), acc),
           None if init_value is None else str(acc), arch)
    return _cached(key, lambda: _Scan(it_in, it_out, op, acc, init_value is not None, inclusive, arch))


def make_inclusive_scan(*, d_in, d_out, op, init_value=None, compute_capability=None):
    return _make_scan(True, d_in, d_out, op, init_value, compute_capability)


def make_exclusive_scan(*, d_in, d_out, op, init_value, compute_capability=None):
    return _make_scan(False, d_in, d_out, op, init_value, compute_capability)


def inclusive_scan(*, d_in, d_out, op, init_value=None, num_items: int, stream=None):
    acc = dtype_of(init_value) if init_value is not None else value_dtype(d_in)
    init = to_value(init_value, acc) if init_value is not None else None
    _c.inclusive_scan(to_iterator(d_in), to_iterator(d_out), num_items, to_op(op, (acc, acc), acc), init, stream)


def exclusive_scan(*, d_in, d_out, op, init_value, num_items: int, stream=None):
    acc = dtype_of(init_value)
    _c.exclusive_scan(to_iterator(d_in), to_iterator(d_out), num_items, to_op(op, (acc, acc), acc),
                      to_value(init_value, acc), stream)


# ---------------------------------------------------------------- transforms

def _out_dtype(d_out, fallback):
    if isinstance(d_out, IteratorBase):
        return d_out.value_type if d_out.value_type is not None else fallback
    return array_info(d_out)[1]


class _UnaryTransform:
    def __init__(self, it_in, it_out, op_c, arch):
        self._obj = _c.UnaryTransform(it_in, it_out, op_c, arch)

    def __call__(self, *, d_in, d_out, op=None, num_items: int, stream=None):
        self._obj(d_in, d_out, num_items, stream)


class _BinaryTransform:
    def __init__(self, it_in1, it_in2, it_out, op_c, arch):
        self._obj = _c.BinaryTransform(it_in1, it_in2, it_out, op_c, arch)

    def __call__(self, *, d_in1, d_in2, d_out, op=None, num_items: int, stream=None):
        self._obj(d_in1, d_in2, d_out, num_items, stream)


def make_unary_transform(*, d_in, d_out, op, compute_capability=None):
    arch = _arch(compute_capability)
    it_in, it_out = to_iterator(d_in), to_iterator(d_out)
    types = ((value_dtype(d_in),), _out_dtype(d_out, value_dtype(d_in)))
    key = ("unary", it_in.signature, it_out.signature, op_key(op, *types), arch)
    return _cached(key, lambda: _UnaryTransform(it_in, it_out, to_op(op, *types), arch))


def make_binary_transform(*, d_in1, d_in2, d_out, op, compute_capability=None):
    arch = _arch(compute_capability)
    it_in1, it_in2, it_out = to_iterator(d_in1), to_iterator(d_in2), to_iterator(d_out)
    types = ((value_dtype(d_in1), value_dtype(d_in2)), _out_dtype(d_out, value_dtype(d_in1)))
    key = ("binary", it_in1.signature, it_in2.signature, it_out.signature, op_key(op, *types), arch)
    return _cached(key, lambda: _BinaryTransform(it_in1, it_in2, it_out, to_op(op, *types), arch))


def unary_transform(*, d_in, d_out, op, num_items: int, stream=None):
    op_c = to_op(op, (value_dtype(d_in),), _out_dtype(d_out, value_dtype(d_in)))
    _c.unary_transform(to_iterator(d_in), to_iterator(d_out), num_items, op_c, stream)


def binary_transform(*, d_in1, d_in2, d_out, op, num_items: int, stream=None):
    op_c = to_op(op, (value_dtype(d_in1), value_dtype(d_in2)), _out_dtype(d_out, value_dtype(d_in1)))
    _c.binary_transform(to_iterator(d_in1), to_iterator(d_in2), to_iterator(d_out), num_items, op_c, stream)


# ---------------------------------------------------------------- radix sort

def _sort_arrays(d_in_keys, d_out_keys, d_in_values, d_out_values):
    if isinstance(d_in_keys, DoubleBuffer):
        if d_in_values is not None and not isinstance(d_in_values, DoubleBuffer):
            raise TypeError("radix_sort: with DoubleBuffer keys, values are a DoubleBuffer too")
        vals = (d_in_values.d_buffers if d_in_values is not None else (None, None))
        return True, d_in_keys.d_buffers, vals, d_in_keys.selector
    if d_out_keys is None:
        raise TypeError("radix_sort: d_out_keys is required (or pass DoubleBuffers)")
    if (d_in_values is None) != (d_out_values is None):
        raise TypeError("radix_sort: give both d_in_values and d_out_values, or neither")
    return False, (d_in_keys, d_out_keys), (d_in_values, d_out_values), 0


class _RadixSort:
    def __init__(self, d_in_keys, d_out_keys, d_in_values, d_out_values, order, arch):
        _, keys, values, _ = _sort_arrays(d_in_keys, d_out_keys, d_in_values, d_out_values)
        self._key_dt = array_info(keys[0])[1]
        value_t = to_type(array_info(values[0])[1]) if values[0] is not None else None
        self._obj = _c.RadixSort(to_type(self._key_dt), value_t, SortOrder(order) is SortOrder.DESCENDING, arch)

    def __call__(self, *, temp_storage, d_in_keys, d_out_keys, d_in_values, d_out_values, num_items: int,
                 begin_bit=None, end_bit=None, stream=None):
        db, keys, values, selector = _sort_arrays(d_in_keys, d_out_keys, d_in_values, d_out_values)
        begin = 0 if begin_bit is None else int(begin_bit)
        end = self._key_dt.itemsize * 8 if end_bit is None else int(end_bit)
        nbytes_out, sel = self._obj(temp_storage, keys[0], keys[1], values[0], values[1], num_items, begin, end, db,
                                    selector, stream)
        if db and temp_storage is not None:
            d_in_keys.selector = sel
            if d_in_values is not None:
                d_in_values.selector = sel
        return nbytes_out


def make_radix_sort(*, d_in_keys, d_out_keys, d_in_values, d_out_values, order, compute_capability=None):
    _, keys, values, _ = _sort_arrays(d_in_keys, d_out_keys, d_in_values, d_out_values)
    arch = _arch(compute_capability)
    key = ("radix_sort", str(array_info(keys[0])[1]),
           None if values[0] is None else str(array_info(values[0])[1]), SortOrder(order).value, arch)
    return _cached(key, lambda: _RadixSort(d_in_keys, d_out_keys, d_in_values, d_out_values, order, arch))


def radix_sort(*, d_in_keys, d_out_keys, d_in_values=None, d_out_values=None, num_items: int, order,
               begin_bit=None, end_bit=None, stream=None):
    sorter = make_radix_sort(d_in_keys=d_in_keys, d_out_keys=d_out_keys, d_in_values=d_in_values,
                             d_out_values=d_out_values, order=order)
    db, keys, values, selector = _sort_arrays(d_in_keys, d_out_keys, d_in_values, d_out_values)
    sel = sorter._obj.run(keys[0], keys[1], values[0], values[1], num_items, 0 if begin_bit is None else int(begin_bit),
                          sorter._key_dt.itemsize * 8 if end_bit is None else int(end_bit), db, selector, stream)
    if db:
        d_in_keys.selector = sel
        if d_in_values is not None:
            d_in_values.selector = sel


# ---------------------------------------------------------------- histogram

class _Histogram:
    def __init__(self, d_samples, d_histogram, h_num_output_levels, h_lower_level, num_samples, arch):
        counter = array_info(d_histogram)[1]
        levels = int(np.asarray(h_num_output_levels).flatten()[0])
        self._level_dt = dtype_of(np.asarray(h_lower_level).flatten()[0])
        self._obj = _c.HistogramEven(to_iterator(d_samples), to_type(counter), to_type(self._level_dt), levels, arch)

    def __call__(self, *, temp_storage, d_samples, d_histogram, h_num_output_levels, h_lower_level, h_upper_level,
                 num_samples: int, stream=None):
        levels = int(np.asarray(h_num_output_levels).flatten()[0])
        lo = to_value(np.asarray(h_lower_level).flatten()[0], self._level_dt)
        hi = to_value(np.asarray(h_upper_level).flatten()[0], self._level_dt)
        return self._obj(temp_storage, d_samples, d_histogram, levels, lo, hi, num_samples, stream)


def make_histogram_even(*, d_samples, d_histogram, h_num_output_levels, h_lower_level, h_upper_level, num_samples,
                        compute_capability=None):
    levels = int(np.asarray(h_num_output_levels).flatten()[0])
    arch = _arch(compute_capability)
    key = ("histogram", to_iterator(d_samples).signature, str(array_info(d_histogram)[1]),
           str(np.asarray(h_lower_level).dtype), levels - 1 <= 256, arch)
    return _cached(key, lambda: _Histogram(d_samples, d_histogram, h_num_output_levels, h_lower_level, num_samples,
                                           arch))


def histogram_even(*, d_samples, d_histogram, num_output_levels: int, lower_level, upper_level, num_samples: int,
                   stream=None):
    level_dt = dtype_of(lower_level) if isinstance(lower_level, (np.generic, np.ndarray)) else \
        np.asarray(lower_level).dtype
    _c.histogram_even(to_iterator(d_samples), to_type(array_info(d_histogram)[1]), array_info(d_histogram)[0],
                      int(num_output_levels), to_value(lower_level, level_dt), to_value(upper_level, level_dt),
                      num_samples, stream)
