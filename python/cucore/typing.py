"""cucore.typing: the type aliases, protocols and enumerations in cuda.core's
signatures, with cuda.core.typing's names and values.

The enumerations are StrEnums: each member is a str equal to its value
(``SourceCodeType.CXX == "c++"``), so cucore accepts a member wherever it takes
the string, and what cucore returns (``Program.backend``, ``Program.pch_status``)
compares equal to the plain strings.
"""
from __future__ import annotations

import sys
from enum import Enum
from typing import Literal, Protocol, Tuple, Union, runtime_checkable

from cucore._core import SMResource, WorkqueueResource

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # Python 3.10: the same behaviour, spelled out
    from enum import Enum

    class StrEnum(str, Enum):
        def __str__(self) -> str:
            return str(self.value)

        def __format__(self, spec: str) -> str:
            return format(str(self.value), spec)


__all__ = [
    "AddressModeType",
    "ArrayFormatType",
    "CompilerBackendType",
    "DevicePointerType",
    "DeviceResourcesType",
    "FilterModeType",
    "GraphConditionalType",
    "GraphMemoryType",
    "IsStreamType",
    "ManagedMemoryLocationType",
    "ObjectCodeFormatType",
    "PCHStatusType",
    "ProcessStateType",
    "ReadModeType",
    "SourceCodeType",
    "VirtualMemoryAccessType",
    "VirtualMemoryAllocationType",
    "VirtualMemoryGranularityType",
    "VirtualMemoryHandleType",
    "VirtualMemoryLocationType",
]

# A device pointer as cucore takes one: an int (cucore has no cuda.bindings
# CUdeviceptr; objects with __int__ are accepted too), or None.
DevicePointerType = Union[int, None]

# What ContextOptions.resources holds: the resources a green context is made of.
DeviceResourcesType = Union[SMResource, WorkqueueResource]

ProcessStateType = Literal["running", "locked", "checkpointed", "failed"]


@runtime_checkable
class IsStreamType(Protocol):
    """Anything that speaks the CUDA stream protocol: ``__cuda_stream__()``
    returns ``(0, the CUstream as an int)``."""

    def __cuda_stream__(self) -> Tuple[int, int]: ...


class SourceCodeType(StrEnum):
    """Source languages a Program takes."""

    CXX = "c++"
    PTX = "ptx"
    NVVM = "nvvm"


class ObjectCodeFormatType(StrEnum):
    """Kinds of compiled code (Program.compile, Linker.link, ObjectCode.code_type)."""

    PTX = "ptx"
    CUBIN = "cubin"
    LTOIR = "ltoir"
    FATBIN = "fatbin"
    OBJECT = "object"
    LIBRARY = "library"


class CompilerBackendType(StrEnum):
    """The compiler behind a Program (Program.backend) or a Linker."""

    NVRTC = "NVRTC"
    NVVM = "NVVM"
    NVJITLINK = "nvJitLink"
    DRIVER = "driver"


class PCHStatusType(StrEnum):
    """What became of a precompiled header a compile was asked to create."""

    CREATED = "created"
    NOT_ATTEMPTED = "not_attempted"
    FAILED = "failed"


class GraphConditionalType(StrEnum):
    """Conditional graph node kinds."""

    IF = "if"
    WHILE = "while"
    SWITCH = "switch"


class GraphMemoryType(StrEnum):
    """Memory kinds of graph allocation nodes."""

    DEVICE = "device"
    HOST = "host"
    MANAGED = "managed"


class ManagedMemoryLocationType(StrEnum):
    """Where managed memory prefers to live (ManagedMemoryResourceOptions)."""

    DEVICE = "device"
    HOST = "host"
    HOST_NUMA = "host_numa"


class VirtualMemoryHandleType(StrEnum):
    POSIX_FD = "posix_fd"
    WIN32_KMT = "win32_kmt"
    FABRIC = "fabric"


class VirtualMemoryLocationType(StrEnum):
    DEVICE = "device"
    HOST = "host"
    HOST_NUMA = "host_numa"
    HOST_NUMA_CURRENT = "host_numa_current"


class VirtualMemoryGranularityType(StrEnum):
    MINIMUM = "minimum"
    RECOMMENDED = "recommended"


class VirtualMemoryAccessType(StrEnum):
    READ_WRITE = "rw"
    READ = "r"


class VirtualMemoryAllocationType(StrEnum):
    PINNED = "pinned"
    MANAGED = "managed"


# Texture enumerations (the option types of cucore.texture, in cuda.core.typing as here).
class ArrayFormatType(StrEnum):
    UINT8 = "uint8"
    UINT16 = "uint16"
    UINT32 = "uint32"
    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    FLOAT16 = "float16"
    FLOAT32 = "float32"


class AddressModeType(StrEnum):
    WRAP = "wrap"
    CLAMP = "clamp"
    MIRROR = "mirror"
    BORDER = "border"


class FilterModeType(StrEnum):
    POINT = "point"
    LINEAR = "linear"


class ReadModeType(StrEnum):
    ELEMENT_TYPE = "element_type"
    NORMALIZED_FLOAT = "normalized_float"


def _coerce(enum_type, value, field: str):
    try:
        return enum_type(value.value if isinstance(value, Enum) else value)
    except ValueError:
        allowed = ", ".join(m.value for m in enum_type)
        raise ValueError(f"invalid {field}: {value!r} (expected one of {allowed})") from None


def _normalize_enum(name: str, value, enum_type):
    """`value` as a member of `enum_type` (a member, or its string); else the
    ValueError cuda.core raises, naming the field and the accepted strings."""
    if isinstance(value, enum_type):
        return value
    try:
        return enum_type(value)
    except ValueError:
        valid = ", ".join(repr(m.value) for m in enum_type)
        raise ValueError(f"{name} must be a {enum_type.__name__} or one of {{{valid}}}, got {value!r}") from None


def _normalize_array_format(value) -> ArrayFormatType:
    """An ArrayFormatType, its string, or a NumPy dtype (or anything numpy.dtype
    takes) naming one of the eight formats, as the member; ValueError (with
    cuda.core's messages) for anything else."""
    if isinstance(value, ArrayFormatType):
        return value
    valid = ", ".join(repr(f.value) for f in ArrayFormatType)
    if isinstance(value, str):
        if value in ArrayFormatType._value2member_map_:
            return ArrayFormatType(value)
        raise ValueError(f"format must be an ArrayFormatType or one of {{{valid}}}, got {value!r}")
    import numpy

    try:
        dt = numpy.dtype(value)
    except TypeError:
        raise ValueError(f"format must be an ArrayFormatType, str, or NumPy dtype, got {value!r}") from None
    if dt.name in ArrayFormatType._value2member_map_ and dt == numpy.dtype(dt.name):
        return ArrayFormatType(dt.name)
    raise ValueError(f"NumPy dtype {dt!r} has no ArrayFormatType equivalent; supported formats: {{{valid}}}")


def _array_format_name(value) -> str:
    """The format's name (see _normalize_array_format)."""
    return _normalize_array_format(value).value
