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


# ---- textures, virtual memory, batched copies --------------------------------------

def _texture_enums():
    from cucore import typing as t

    return t


@dataclass
class OpaqueArrayOptions:
    """Options for Device.create_opaque_array: shape ((w,), (w, h) or (w, h, d)
    elements), format (ArrayFormatType, its string, or a numpy dtype),
    num_channels (1, 2 or 4), is_surface_load_store (can back a SurfaceObject)."""

    shape: Tuple[int, ...]
    format: object
    num_channels: int
    is_surface_load_store: bool = False

    def __post_init__(self):
        _normalize_array_fields(self)


@dataclass
class MipmappedArrayOptions:
    """Options for Device.create_mipmapped_array: as OpaqueArrayOptions (shape
    of level 0) plus num_levels (>= 1)."""

    shape: Tuple[int, ...]
    format: object
    num_channels: int
    num_levels: int
    is_surface_load_store: bool = False

    def __post_init__(self):
        _normalize_array_fields(self)
        if isinstance(self.num_levels, bool) or not isinstance(self.num_levels, int) or self.num_levels < 1:
            raise ValueError(f"num_levels must be an int >= 1, got {self.num_levels!r}")


def _normalize_array_fields(o) -> None:
    t = _texture_enums()
    o.shape = _array_shape(o.shape)
    o.format = t.ArrayFormatType(t._array_format_name(o.format))
    _check_channels(o.num_channels)


def _array_shape(shape) -> Tuple[int, ...]:
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(shape)
    if not 1 <= len(shape) <= 3:
        raise ValueError(f"shape must have 1, 2 or 3 extents, got {shape!r}")
    for e in shape:
        if isinstance(e, bool) or not isinstance(e, int) or e < 1:
            raise ValueError(f"shape extents must be ints >= 1, got {shape!r}")
    return shape


def _check_channels(n) -> None:
    if n not in (1, 2, 4) or isinstance(n, bool):
        raise ValueError(f"num_channels must be 1, 2 or 4, got {n!r}")


@dataclass
class TextureObjectOptions:
    """Sampling state for Device.create_texture_object (CUDA_TEXTURE_DESC)."""

    address_mode: object = "clamp"
    filter_mode: object = "point"
    read_mode: object = "element_type"
    normalized_coords: bool = False
    srgb: bool = False
    disable_trilinear_optimization: bool = False
    seamless_cubemap: bool = False
    max_anisotropy: int = 0
    mipmap_filter_mode: object = "point"
    mipmap_level_bias: float = 0.0
    min_mipmap_level_clamp: float = 0.0
    max_mipmap_level_clamp: float = 0.0
    border_color: Optional[Tuple[float, ...]] = None

    def __post_init__(self):
        t = _texture_enums()
        if isinstance(self.address_mode, (str, t.AddressModeType)):
            self.address_mode = t._coerce(t.AddressModeType, self.address_mode, "address_mode")
        else:
            modes = tuple(t._coerce(t.AddressModeType, m, "address_mode") for m in self.address_mode)
            if not 1 <= len(modes) <= 3:
                raise ValueError("address_mode takes 1 to 3 entries")
            self.address_mode = modes
        self.filter_mode = t._coerce(t.FilterModeType, self.filter_mode, "filter_mode")
        self.read_mode = t._coerce(t.ReadModeType, self.read_mode, "read_mode")
        self.mipmap_filter_mode = t._coerce(t.FilterModeType, self.mipmap_filter_mode, "mipmap_filter_mode")
        if self.border_color is not None:
            self.border_color = tuple(float(c) for c in self.border_color)
            if len(self.border_color) != 4:
                raise ValueError("border_color takes 4 floats")


@dataclass
class VirtualMemoryResourceOptions:
    """Configuration of a VirtualMemoryResource (cuda.core's fields)."""

    allocation_type: object = "pinned"
    location_type: object = "device"
    handle_type: object = "posix_fd"
    granularity: object = "recommended"
    gpu_direct_rdma: bool = False
    addr_hint: Optional[int] = 0
    addr_align: Optional[int] = None
    peers: Sequence[int] = ()
    self_access: object = "rw"
    peer_access: object = "rw"


@dataclass(frozen=True)
class CopyOptions:
    """Per-copy hints for copy_batch: src_access_order ("stream",
    "during_api_call", "any"), src/dst_location_hint (Device, Host or None),
    overlap_mode ("default", "prefer_overlap_with_compute")."""

    src_access_order: object = "stream"
    src_location_hint: object = None
    dst_location_hint: object = None
    overlap_mode: object = "default"

    def __post_init__(self):
        from cucore.utils import MemcpyOverlapMode, MemcpySrcAccessOrder

        try:
            object.__setattr__(self, "src_access_order", MemcpySrcAccessOrder(_value(self.src_access_order)))
        except ValueError:
            raise ValueError(f"invalid src_access_order: {self.src_access_order!r}") from None
        try:
            object.__setattr__(self, "overlap_mode", MemcpyOverlapMode(_value(self.overlap_mode)))
        except ValueError:
            raise ValueError(f"invalid overlap_mode: {self.overlap_mode!r}") from None


def _value(v):
    return getattr(v, "value", v)
