"""Option dataclasses and small records, with cuda.core 1.x's names and fields.

These are plain data: libcucore validates them when they are used (an invalid
value raises ValueError naming the field).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, NamedTuple, Optional, Sequence, Tuple, Union

__all__ = [
    "ComputeCapability",
    "DeviceMemoryResourceOptions",
    "EventOptions",
    "LinkerOptions",
    "ManagedMemoryResourceOptions",
    "MemPoolAttributes",
    "MaxPotentialBlockSizeOccupancyResult",
    "ParamInfo",
    "PinnedMemoryResourceOptions",
    "ProgramOptions",
    "StreamOptions",
]


class ComputeCapability(NamedTuple):
    major: int
    minor: int


class ParamInfo(NamedTuple):
    """A kernel parameter's offset and size in bytes."""

    offset: int
    size: int


class MaxPotentialBlockSizeOccupancyResult(NamedTuple):
    min_grid_size: int
    max_block_size: int


@dataclass
class StreamOptions:
    """Options for Device.create_stream: nonblocking (no implicit synchronization
    with the legacy default stream) and priority (lower is higher)."""

    nonblocking: bool = True
    priority: Optional[int] = None


@dataclass
class EventOptions:
    """Options for Device.create_event / Stream.record."""

    timing_enabled: Optional[bool] = False
    blocking_sync: Optional[bool] = False
    ipc_enabled: Optional[bool] = False


@dataclass(frozen=True)
class MemPoolAttributes:
    """A memory pool's attributes (cuda.core's pool attributes object); item
    access (attrs["used_mem_current"]) works too."""

    reuse_follow_event_dependencies: bool
    reuse_allow_opportunistic: bool
    reuse_allow_internal_dependencies: bool
    release_threshold: int
    reserved_mem_current: int
    reserved_mem_high: int
    used_mem_current: int
    used_mem_high: int

    def __getitem__(self, name: str):
        return getattr(self, name)


@dataclass
class DeviceMemoryResourceOptions:
    """Options for a DeviceMemoryResource with a pool of its own."""

    ipc_enabled: bool = False
    max_size: int = 0


@dataclass
class PinnedMemoryResourceOptions:
    """Options for a PinnedMemoryResource with a pool of its own. numa_id: the host
    NUMA node the memory lives on (None: the OS places it; with ipc_enabled, the
    current device's host NUMA node)."""

    ipc_enabled: bool = False
    max_size: int = 0
    numa_id: Optional[int] = None


@dataclass
class ManagedMemoryResourceOptions:
    """Options for a ManagedMemoryResource: where its memory prefers to live.
    preferred_location_type None reads preferred_location as a device ordinal, -1
    for the host, or None for no preference; "device" takes an ordinal, "host"
    None, "host_numa" a NUMA node (or None: the current device's)."""

    preferred_location: Optional[int] = None
    preferred_location_type: Optional[str] = None
    attach_global: bool = True  # cucore extra: CU_MEM_ATTACH_GLOBAL, else CU_MEM_ATTACH_HOST


_StrList = Union[str, Sequence[str], None]


@dataclass
class ProgramOptions:
    """Compiler options (cuda.core's field names and order; src/options/option_fields.inc
    is the table they follow). Unset (None) fields are not passed; arch=None means
    the current device's; name=None means "default_program"."""

    name: Optional[str] = "default_program"
    arch: Optional[str] = None
    relocatable_device_code: Optional[bool] = None
    extensible_whole_program: Optional[bool] = None
    debug: Optional[bool] = None
    lineinfo: Optional[bool] = None
    device_code_optimize: Optional[bool] = None
    ptxas_options: _StrList = None
    max_register_count: Optional[int] = None
    ftz: Optional[bool] = None
    prec_sqrt: Optional[bool] = None
    prec_div: Optional[bool] = None
    fma: Optional[bool] = None
    use_fast_math: Optional[bool] = None
    extra_device_vectorization: Optional[bool] = None
    link_time_optimization: Optional[bool] = None
    gen_opt_lto: Optional[bool] = None
    define_macro: Union[str, Tuple[str, str], Sequence[Union[str, Tuple[str, str]]], None] = None
    undefine_macro: _StrList = None
    include_path: _StrList = None
    pre_include: _StrList = None
    no_source_include: Optional[bool] = None
    std: Optional[str] = None
    builtin_move_forward: Optional[bool] = None
    builtin_initializer_list: Optional[bool] = None
    disable_warnings: Optional[bool] = None
    restrict: Optional[bool] = None
    device_as_default_execution_space: Optional[bool] = None
    device_int128: Optional[bool] = None
    optimization_info: Optional[str] = None
    no_display_error_number: Optional[bool] = None
    diag_error: Union[int, Sequence[int], None] = None
    diag_suppress: Union[int, Sequence[int], None] = None
    diag_warn: Union[int, Sequence[int], None] = None
    brief_diagnostics: Optional[bool] = None
    time: Optional[str] = None
    split_compile: Optional[int] = None
    fdevice_syntax_only: Optional[bool] = None
    minimal: Optional[bool] = None
    no_cache: Optional[bool] = None
    fdevice_time_trace: Optional[str] = None
    device_float128: Optional[bool] = None
    frandom_seed: Optional[str] = None
    ofast_compile: Optional[str] = None
    pch: Optional[bool] = None
    create_pch: Optional[str] = None
    use_pch: Optional[str] = None
    pch_dir: Optional[str] = None
    pch_verbose: Optional[bool] = None
    pch_messages: Optional[bool] = None
    instantiate_templates_in_pch: Optional[bool] = None
    extra_sources: Optional[Sequence[Tuple[str, Union[str, bytes, bytearray]]]] = None
    use_libdevice: Optional[bool] = None
    numba_debug: Optional[bool] = None
    use_toolkit_headers: Optional[bool] = None  # cucore extra: CCCL/CUDA headers on the include path (default on)

    def __post_init__(self) -> None:
        if self.name is None:
            self.name = "default_program"

    def as_bytes(self, backend: str, target_type: Optional[str] = None) -> List[bytes]:
        """The flags `backend` ("nvrtc" or "nvvm") gets, as bytes. ValueError for an
        unknown backend; CUDAError for options libNVVM does not support."""
        from cucore._core import _program_options_as_bytes

        return _program_options_as_bytes(self, backend, target_type)

    def __repr__(self) -> str:
        return f"ProgramOptions(name={self.name!r}, arch={self.arch!r})"


@dataclass
class LinkerOptions:
    """nvJitLink options (cuda.core's field names and order; src/options/option_fields.inc)."""

    name: Optional[str] = "<default linker>"
    arch: Optional[str] = None
    max_register_count: Optional[int] = None
    time: Optional[bool] = None
    verbose: Optional[bool] = None
    link_time_optimization: Optional[bool] = None
    ptx: Optional[bool] = None
    optimization_level: Optional[int] = None
    debug: Optional[bool] = None
    lineinfo: Optional[bool] = None
    ftz: Optional[bool] = None
    prec_div: Optional[bool] = None
    prec_sqrt: Optional[bool] = None
    fma: Optional[bool] = None
    kernels_used: _StrList = None
    variables_used: _StrList = None
    optimize_unused_variables: Optional[bool] = None
    ptxas_options: _StrList = None
    split_compile: Optional[int] = None
    split_compile_extended: Optional[int] = None
    no_cache: Optional[bool] = None
    numba_debug: Optional[bool] = None

    def __post_init__(self) -> None:
        if self.name is None:
            self.name = "<default linker>"

    def as_bytes(self, backend: str = "nvjitlink") -> List[bytes]:
        """nvJitLink's flags, as bytes (ValueError for any other backend)."""
        from cucore._core import _linker_options_as_bytes

        return _linker_options_as_bytes(self, backend)


def _object_code_from_bytes(module, code_type, name, symbol_mapping):
    """Unpickles an ObjectCode: its bytes, or the path it reads (a module-level
    function, so pickle can name it)."""
    from cucore._core import _object_code_from_bytes as make

    return make(module, code_type, name, symbol_mapping)
