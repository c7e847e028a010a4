"""cucore.typing: the enumerations used in option fields (cuda.core.typing's names).

Each is a str enum: a plain string with the value is accepted wherever the
enum is (``"float32"`` for ``ArrayFormatType.FLOAT32``).
"""
from __future__ import annotations

from enum import Enum

__all__ = [
    "AddressModeType",
    "ArrayFormatType",
    "FilterModeType",
    "ManagedMemoryLocationType",
    "ReadModeType",
    "VirtualMemoryAccessType",
    "VirtualMemoryAllocationType",
    "VirtualMemoryGranularityType",
    "VirtualMemoryHandleType",
    "VirtualMemoryLocationType",
]


class _StrEnum(str, Enum):
    def __str__(self) -> str:
        return self.value


class ArrayFormatType(_StrEnum):
    UINT8 = "uint8"
    UINT16 = "uint16"
    UINT32 = "uint32"
    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    FLOAT16 = "float16"
    FLOAT32 = "float32"


class AddressModeType(_StrEnum):
    WRAP = "wrap"
    CLAMP = "clamp"
    MIRROR = "mirror"
    BORDER = "border"


class FilterModeType(_StrEnum):
    POINT = "point"
    LINEAR = "linear"


class ReadModeType(_StrEnum):
    ELEMENT_TYPE = "element_type"
    NORMALIZED_FLOAT = "normalized_float"


class ManagedMemoryLocationType(_StrEnum):
    DEVICE = "device"
    HOST = "host"
    HOST_NUMA = "host_numa"


class VirtualMemoryHandleType(_StrEnum):
    POSIX_FD = "posix_fd"
    WIN32_KMT = "win32_kmt"
    FABRIC = "fabric"


class VirtualMemoryLocationType(_StrEnum):
    DEVICE = "device"
    HOST = "host"
    HOST_NUMA = "host_numa"
    HOST_NUMA_CURRENT = "host_numa_current"


class VirtualMemoryGranularityType(_StrEnum):
    MINIMUM = "minimum"
    RECOMMENDED = "recommended"


class VirtualMemoryAccessType(_StrEnum):
    READ_WRITE = "rw"
    READ = "r"


class VirtualMemoryAllocationType(_StrEnum):
    PINNED = "pinned"
    MANAGED = "managed"


def _coerce(enum_type, value, field: str):
    try:
        return enum_type(value.value if isinstance(value, Enum) else value)
    except ValueError:
        allowed = ", ".join(m.value for m in enum_type)
        raise ValueError(f"invalid {field}: {value!r} (expected one of {allowed})") from None


def _array_format_name(value) -> str:
    """An ArrayFormatType, its string, or a NumPy dtype (or anything numpy.dtype
    takes) naming one of the eight formats, as its name."""
    if isinstance(value, ArrayFormatType):
        return value.value
    if isinstance(value, str) and value in ArrayFormatType._value2member_map_:
        return value
    try:
        import numpy

        name = numpy.dtype(value).name
    except Exception:
        name = None
    if name in ArrayFormatType._value2member_map_:
        return name
    raise ValueError(f"invalid array format {value!r}: expected an ArrayFormatType, one of "
                     + ", ".join(m.value for m in ArrayFormatType) + ", or the matching numpy dtype")
