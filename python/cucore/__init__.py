"""cucore: NVIDIA cuda.core's object model over a C++20 core (libcucore).

Port code from cuda.core by changing the import lines only::

    from cucore import Device, Program, ProgramOptions, LaunchConfig, launch
    from cucore.utils import InMemoryProgramCache

Errors are cucore.Error subclasses (CudaError / CUDAError, CompileError /
NVRTCError, LibraryNotFoundError, FeatureUnavailableError, ClosedError for a
closed object, also a ValueError) or ValueError / TypeError / IndexError for
bad arguments. A release that fails where nothing can raise (a destructor) is
a CUDAWarning.
"""
import sys as _sys

from cucore import _core
from cucore._core import (
    LEGACY_DEFAULT_STREAM,
    PER_THREAD_DEFAULT_STREAM,
    Buffer,
    ClosedError,
    CompileError,
    Context,
    CudaError,
    CUDAError,
    CUDAWarning,
    Device,
    DeviceMemoryResource,
    DeviceProperties,
    DeviceResources,
    Error,
    Event,
    FeatureUnavailableError,
    GraphicsResource,
    IPCAllocationHandle,
    IPCBufferDescriptor,
    IPCEventDescriptor,
    Kernel,
    KernelAttributes,
    KernelOccupancy,
    LaunchConfig,
    LegacyPinnedMemoryResource,
    LibraryNotFoundError,
    LimitingResourceAdaptor,
    Linker,
    ManagedBuffer,
    ManagedMemoryResource,
    MemoryResource,
    NVRTCError,
    ObjectCode,
    PinnedMemoryResource,
    Program,
    SMResource,
    StatisticsResourceAdaptor,
    Stream,
    VirtualMemoryResource,
    WorkqueueResource,
    __version__,
    default_stream,
    launch,
    pathfinder,
)
from cucore._options import (
    ComputeCapability,
    DeviceMemoryResourceOptions,
    EventOptions,
    LinkerOptions,
    ManagedMemoryResourceOptions,
    VirtualMemoryResourceOptions,
    PinnedMemoryResourceOptions,
    ProgramOptions,
    StreamOptions,
)
from cucore._resources import ContextOptions, SMResourceOptions, WorkqueueResourceOptions
from cucore._host import Host

# The cuda.core API implemented (a cuda.core stand-in reports it as its __version__).
cuda_core_api_version = "1.2.0"

from cucore._core import checkpoint  # process checkpointing, as cuda.core.checkpoint

_sys.modules[f"{__name__}.checkpoint"] = checkpoint  # `import cucore.checkpoint` works too

from cucore import _ipc  # noqa: E402,F401  (allocation handles cached, IPC objects pickled as in cuda.core)

from cucore._tensor_map import TensorMapDescriptor, TensorMapDescriptorOptions  # noqa: E402
from cucore import utils  # noqa: E402  (cuda.core exposes utils as an attribute too)
from cucore import system  # noqa: E402  (NVML monitoring, as cuda.core.system)
from cucore import graph  # noqa: E402  (CUDA graphs, as cuda.core.graph)
from cucore.graph import GraphMemoryResource  # noqa: E402  (top-level in cuda.core too)
from cucore import texture  # noqa: E402  (textures and surfaces, as cuda.core.texture)
from cucore import typing  # noqa: E402  (option enums, as cuda.core.typing)


def __getattr__(name):  # cucore.compute (the parallel algorithms) loads on first use
    if name == "compute":
        import importlib

        return importlib.import_module("cucore.compute")
    raise AttributeError(f"module 'cucore' has no attribute {name!r}")


def _set_site_packages() -> None:
    # NVIDIA's pip wheels (site-packages/nvidia/*/lib) are one of the places the
    # pathfinder searches for NVRTC / nvJitLink.
    dirs = [p for p in _sys.path if p.endswith(("site-packages", "dist-packages"))]
    if dirs:
        pathfinder.set_python_site_packages(dirs)


_set_site_packages()
del _set_site_packages

__all__ = [
    "LEGACY_DEFAULT_STREAM",
    "PER_THREAD_DEFAULT_STREAM",
    "Buffer",
    "ClosedError",
    "CompileError",
    "ComputeCapability",
    "Context",
    "ContextOptions",
    "CudaError",
    "CUDAError",
    "CUDAWarning",
    "Device",
    "DeviceMemoryResource",
    "DeviceMemoryResourceOptions",
    "DeviceProperties",
    "DeviceResources",
    "Error",
    "Event",
    "EventOptions",
    "FeatureUnavailableError",
    "GraphicsResource",
    "IPCAllocationHandle",
    "IPCBufferDescriptor",
    "IPCEventDescriptor",
    "Host",
    "Kernel",
    "LaunchConfig",
    "LegacyPinnedMemoryResource",
    "LibraryNotFoundError",
    "Linker",
    "LinkerOptions",
    "ManagedBuffer",
    "ManagedMemoryResource",
    "ManagedMemoryResourceOptions",
    "MemoryResource",
    "NVRTCError",
    "ObjectCode",
    "PinnedMemoryResource",
    "PinnedMemoryResourceOptions",
    "Program",
    "ProgramOptions",
    "SMResource",
    "SMResourceOptions",
    "Stream",
    "StreamOptions",
    "VirtualMemoryResource",
    "VirtualMemoryResourceOptions",
    "WorkqueueResource",
    "WorkqueueResourceOptions",
    "checkpoint",
    "launch",
    "TensorMapDescriptor",
    "TensorMapDescriptorOptions",
    "system",
    "texture",
    "typing",
    "utils",
]
