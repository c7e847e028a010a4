"""Value types: numpy dtypes and gpu_struct classes as cucore::compute types."""
from __future__ import annotations

import keyword

try:
    import numpy as np
except ImportError:  # numpy is needed for values and structs; arrays alone work without it
    np = None

from cucore._core import _compute as _c

_BUILTIN = {
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "bool",
}
_C_NAMES = {
    "int8": "::cuda::std::int8_t", "int16": "::cuda::std::int16_t", "int32": "::cuda::std::int32_t",
    "int64": "::cuda::std::int64_t", "uint8": "::cuda::std::uint8_t", "uint16": "::cuda::std::uint16_t",
    "uint32": "::cuda::std::uint32_t", "uint64": "::cuda::std::uint64_t", "float16": "__half",
    "bfloat16": "__nv_bfloat16", "float32": "float", "float64": "double", "bool": "bool",
}


def _need_numpy():
    if np is None:
        raise ImportError("cucore.compute needs numpy for values and struct types")


def struct_definition(dtype, name: str) -> str:
    """The C++ definition of a numpy structured dtype laid out as C lays out the struct."""
    fields = []
    offset, align = 0, 1
    for fname, (fdt, foff, *_) in dtype.fields.items():
        if not fname.isidentifier() or keyword.iskeyword(fname):
            raise ValueError(f"struct field name {fname!r} is not usable in C++")
        if fdt.fields is not None:
            inner = f"{name}_{fname}"
            fields.append((struct_definition(fdt, inner), f"{inner} {fname};"))
            falign = max(f[1].alignment for f in fdt.fields.values())
        else:
            if fdt.name not in _BUILTIN:
                raise TypeError(f"struct field {fname!r} has unsupported dtype {fdt}")
            fields.append(("", f"{_C_NAMES[fdt.name]} {fname};"))
            falign = fdt.alignment
        offset = (offset + falign - 1) // falign * falign
        if foff != offset:
            raise ValueError(
                f"struct dtype {dtype} is not laid out as a C struct (field {fname!r} at offset {foff}, "
                f"C puts it at {offset}): make it with np.dtype(..., align=True) or gpu_struct")
        offset += fdt.itemsize
        align = max(align, falign)
    size = (offset + align - 1) // align * align
    if size != dtype.itemsize:
        raise ValueError(f"struct dtype {dtype} is {dtype.itemsize} bytes; as a C struct it is {size}: use align=True")
    pre = "".join(d + "\n" for d, _ in fields if d)
    return pre + f"struct {name} {{ " + " ".join(m for _, m in fields) + " };"


_struct_names: dict = {}


def to_type(dtype) -> "_c.Type":
    """A cucore::compute Type for a numpy dtype (structured dtypes become user structs)."""
    _need_numpy()
    if isinstance(dtype, type) and hasattr(dtype, "dtype") and hasattr(dtype, "_cucore_struct"):
        dtype = dtype.dtype
    dtype = np.dtype(dtype)
    if dtype.fields is not None:
        # One C++ name per layout (aligned and unaligned dtypes of one layout compare differently).
        layout = (dtype.itemsize, tuple((k, str(v[0]), v[1]) for k, v in dtype.fields.items()))
        name = _struct_names.get(layout)
        if name is None:
            name = f"cucore_struct_{len(_struct_names)}"
            _struct_names[layout] = name
        return _c.Type.user(name, struct_definition(dtype, name), dtype.itemsize,
                            max(f[0].alignment for f in dtype.fields.values()))
    if dtype.name not in _BUILTIN:
        raise TypeError(f"cucore.compute: unsupported dtype {dtype}")
    return _c.Type.builtin(dtype.name)


def to_value(v, dtype=None) -> "_c.Value":
    """A typed value from a numpy scalar, 0-d/1-element array, gpu_struct instance or Python number."""
    _need_numpy()
    if hasattr(v, "_cucore_struct"):
        arr = v._data
    elif isinstance(v, np.ndarray):
        if v.size != 1:
            raise ValueError(f"expected a single value, got an array of {v.size}")
        arr = v.reshape(())
    elif isinstance(v, np.generic):
        arr = np.asarray(v)
    else:
        if dtype is None:
            raise TypeError(f"cannot tell the type of {v!r}: pass a numpy scalar or array")
        arr = np.asarray(v, dtype=dtype)
    if dtype is not None and np.dtype(dtype) != arr.dtype:
        arr = arr.astype(dtype)
    return _c.Value(to_type(arr.dtype), arr.tobytes())


def value_arg(v, dtype):
    """An initial value as a built object's call takes it: a one-element numpy
    array or scalar already of `dtype` as it is (the call reads its bytes),
    anything else converted to a Value."""
    if isinstance(v, (np.ndarray, np.generic)) and v.dtype == dtype and v.size == 1:
        return v
    return to_value(v, dtype)


def dtype_of(v):
    _need_numpy()
    if hasattr(v, "_cucore_struct"):
        return type(v).dtype
    if isinstance(v, (np.ndarray, np.generic)):
        return v.dtype
    return np.asarray(v).dtype


def gpu_struct(field_dict, name: str = "AnonymousStruct"):
    """A struct type for values and arrays (cuda.compute's gpu_struct): from a dict of
    field name -> dtype, a numpy structured dtype, or an annotated class. Instances
    hold one value; `.dtype` is the aligned numpy dtype of arrays of it."""
    _need_numpy()
    if isinstance(field_dict, type) and hasattr(field_dict, "__annotations__"):
        name = field_dict.__name__
        field_dict = dict(field_dict.__annotations__)
    if isinstance(field_dict, np.dtype):
        field_dict = {k: v[0] for k, v in field_dict.fields.items()}
    fields = []
    for k, v in field_dict.items():
        if not isinstance(k, str) or not k.isidentifier():
            raise ValueError(f"gpu_struct field name {k!r} is not a valid identifier")
        if isinstance(v, dict):
            v = gpu_struct(v, name=k).dtype
        elif isinstance(v, type) and hasattr(v, "_cucore_struct"):
            v = v.dtype
        fields.append((k, np.dtype(v)))
    dtype = np.dtype(fields, align=True)

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise TypeError("give the fields positionally or by name, not both")
        values = args if args else tuple(kwargs[f] for f, _ in fields)
        if len(values) != len(fields):
            raise TypeError(f"{name} has {len(fields)} fields, got {len(values)} values")
        self._data = np.array(tuple(values), dtype=dtype)
        for (f, _), v in zip(fields, values):
            setattr(self, f, v)

    cls = type(name, (), {"__init__": __init__, "dtype": dtype, "_cucore_struct": True,
                          "__repr__": lambda self: f"{name}{tuple(self._data.item())}"})
    return cls
