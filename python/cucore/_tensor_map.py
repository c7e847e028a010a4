"""TMA tensor maps as cuda.core's: TensorMapDescriptor (libcucore's, bound in _core), its option
enums (the driver's CUtensorMap* values), TensorMapDescriptorOptions, and
StridedMemoryView.as_tensor_map. Every rule the driver would refuse is checked by libcucore
before the driver is called (ValueError naming the dimension and the rule)."""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Optional, Tuple

from cucore._core import StridedMemoryView, TensorMapDescriptor

__all__ = ["TensorMapDescriptor", "TensorMapDescriptorOptions"]


class TensorMapDataType(enum.IntEnum):
    UINT8 = 0
    UINT16 = 1
    UINT32 = 2
    INT32 = 3
    UINT64 = 4
    INT64 = 5
    FLOAT16 = 6
    FLOAT32 = 7
    FLOAT64 = 8
    BFLOAT16 = 9
    FLOAT32_FTZ = 10
    TFLOAT32 = 11
    TFLOAT32_FTZ = 12


class TensorMapInterleave(enum.IntEnum):
    NONE = 0
    INTERLEAVE_16B = 1
    INTERLEAVE_32B = 2


class TensorMapSwizzle(enum.IntEnum):
    NONE = 0
    SWIZZLE_32B = 1
    SWIZZLE_64B = 2
    SWIZZLE_128B = 3


class TensorMapL2Promotion(enum.IntEnum):
    NONE = 0
    L2_64B = 1
    L2_128B = 2
    L2_256B = 3


class TensorMapOOBFill(enum.IntEnum):
    NONE = 0
    NAN_REQUEST_ZERO_FMA = 1


# NumPy (and ml_dtypes) dtype names TMA has a type for.
_DTYPE_NAMES = {
    "uint8": TensorMapDataType.UINT8, "uint16": TensorMapDataType.UINT16, "uint32": TensorMapDataType.UINT32,
    "int32": TensorMapDataType.INT32, "uint64": TensorMapDataType.UINT64, "int64": TensorMapDataType.INT64,
    "float16": TensorMapDataType.FLOAT16, "float32": TensorMapDataType.FLOAT32,
    "float64": TensorMapDataType.FLOAT64, "bfloat16": TensorMapDataType.BFLOAT16,
}


@dataclass
class TensorMapDescriptorOptions:
    """Options for StridedMemoryView.as_tensor_map: box_dim (tile extents, in the view's order),
    element_strides (default all 1), data_type (a NumPy/ml_dtypes dtype or TensorMapDataType;
    default from the view), interleave, swizzle, l2_promotion, oob_fill."""

    box_dim: Tuple[int, ...]
    element_strides: Optional[Tuple[int, ...]] = None
    data_type: Any = None
    interleave: TensorMapInterleave = TensorMapInterleave.NONE
    swizzle: TensorMapSwizzle = TensorMapSwizzle.NONE
    l2_promotion: TensorMapL2Promotion = TensorMapL2Promotion.NONE
    oob_fill: TensorMapOOBFill = TensorMapOOBFill.NONE

    def __post_init__(self) -> None:
        self.box_dim = _int_tuple("box_dim", self.box_dim)
        if self.element_strides is not None:
            self.element_strides = _int_tuple("element_strides", self.element_strides)
        self.interleave = _enum("interleave", self.interleave, TensorMapInterleave)
        self.swizzle = _enum("swizzle", self.swizzle, TensorMapSwizzle)
        self.l2_promotion = _enum("l2_promotion", self.l2_promotion, TensorMapL2Promotion)
        self.oob_fill = _enum("oob_fill", self.oob_fill, TensorMapOOBFill)


def _int_tuple(name: str, values: Any) -> Tuple[int, ...]:
    if isinstance(values, int):
        values = (values,)
    try:
        out = tuple(values)
    except TypeError:
        raise TypeError(f"{name} must be a tuple of ints, got {type(values).__name__}") from None
    for v in out:
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name} must be a tuple of ints, got {values!r}")
        if v < 0:
            raise ValueError(f"{name} must be non-negative, got {values!r}")
    return out


def _enum(name: str, value: Any, enum_type: type) -> enum.IntEnum:
    # cucore also takes the enum's int values; anything else is cuda.core's TypeError.
    try:
        return enum_type(value)
    except ValueError:
        raise TypeError(f"{name} must be a {enum_type.__name__}, got {value!r}") from None


def _data_type(data_type: Any) -> Optional[int]:
    if data_type is None:
        return None
    if isinstance(data_type, TensorMapDataType):
        return int(data_type)
    import numpy

    try:
        name = numpy.dtype(data_type).name
    except TypeError:
        raise TypeError(f"data_type must be a NumPy dtype or a TensorMapDataType, got {data_type!r}") from None
    if name not in _DTYPE_NAMES:
        raise ValueError(f"data_type {name} has no TMA data type (TMA takes {', '.join(_DTYPE_NAMES)})")
    return int(_DTYPE_NAMES[name])


def as_tensor_map(self: StridedMemoryView, box_dim: Optional[Tuple[int, ...]] = None, *, options: Any = None,
                  element_strides: Optional[Tuple[int, ...]] = None, data_type: Any = None,
                  interleave: TensorMapInterleave = TensorMapInterleave.NONE,
                  swizzle: TensorMapSwizzle = TensorMapSwizzle.NONE,
                  l2_promotion: TensorMapL2Promotion = TensorMapL2Promotion.NONE,
                  oob_fill: TensorMapOOBFill = TensorMapOOBFill.NONE) -> TensorMapDescriptor:
    """A tiled TensorMapDescriptor of this view (device-accessible, 16-byte aligned, innermost
    dimension contiguous). Pass box_dim and the keywords, or options (a TensorMapDescriptorOptions
    or a mapping of its fields), not both."""
    if options is not None:
        given = box_dim is not None or element_strides is not None or data_type is not None or any(
            v != 0 for v in (interleave, swizzle, l2_promotion, oob_fill))
        if given:
            raise TypeError("Specify either options or the individual tensor map arguments, not both "
                            "(as_tensor_map: options, or box_dim and the option keywords)")
        if not isinstance(options, TensorMapDescriptorOptions):
            if not hasattr(options, "keys"):
                raise TypeError(f"options must be a TensorMapDescriptorOptions or a mapping, got {type(options).__name__}")
            options = TensorMapDescriptorOptions(**options)
    else:
        if box_dim is None:
            raise TypeError("box_dim is required unless options is provided (as_tensor_map)")
        options = TensorMapDescriptorOptions(box_dim, element_strides, data_type, interleave, swizzle,
                                             l2_promotion, oob_fill)
    return TensorMapDescriptor._from_tiled(self, list(options.box_dim), list(options.element_strides or ()),
                                           _data_type(options.data_type), int(options.interleave),
                                           int(options.swizzle), int(options.l2_promotion), int(options.oob_fill))


StridedMemoryView.as_tensor_map = as_tensor_map
