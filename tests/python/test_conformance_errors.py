"""Exceptions as cuda.core 1.2's own tests expect them: the same type, and a
message its `match=` pattern finds (re.search), grouped by class. CPU tests
where the check comes before any driver call; GPU tests use the `device`
fixture (conftest.py)."""
import ctypes
import gc

import numpy as np
import pytest

import cucore
from cucore import Buffer, Linker, LinkerOptions, MemoryResource, Program, ProgramOptions
from cucore.utils import StridedMemoryView

KERNEL = 'extern "C" __global__ void my_kernel() {}'


# ---- Linker -----------------------------------------------------------------------
class TestLinker:
    def test_nothing_to_link(self):
        with pytest.raises(ValueError, match="At least one ObjectCode object must be provided"):
            Linker()

    def test_nothing_to_link_with_options(self):
        with pytest.raises(ValueError, match="At least one ObjectCode object must be provided"):
            Linker(options=LinkerOptions(arch="sm_90"))

    def test_as_bytes_backend(self):
        with pytest.raises(ValueError, match=r"as_bytes\(\) only supports 'nvjitlink' backend"):
            LinkerOptions(arch="sm_80").as_bytes("driver")


# ---- Program ----------------------------------------------------------------------
class TestProgram:
    def test_code_type(self):
        with pytest.raises(
            RuntimeError, match=r"^Unsupported code_type='fortran' \(supported_code_types=\('c\+\+', 'ptx', 'nvvm'\)\)$"
        ):
            Program("goto 100", "FORTRAN")

    def test_options_backend(self):
        with pytest.raises(ValueError, match="Unknown backend 'invalid'"):
            ProgramOptions(arch="sm_80").as_bytes("invalid")

    def test_from_handle_backend(self):
        with pytest.raises(ValueError, match="Unsupported backend 'INVALID'"):
            Program.from_handle(0, "INVALID")

    def test_ltoir_has_no_kernels(self):
        ltoir = Program(KERNEL, "c++", ProgramOptions(link_time_optimization=True, arch="sm_90")).compile("ltoir")
        with pytest.raises(RuntimeError, match=r'Unsupported code type "ltoir"'):
            cucore.ObjectCode.from_ltoir(ltoir.code).get_kernel("my_kernel")


# ---- DLPack export (Buffer.__dlpack__ and StridedMemoryView.__dlpack__ share it) ---------
class TestDlpackExport:
    @pytest.fixture
    def view(self):
        return StridedMemoryView.from_any_interface(np.zeros(16, dtype=np.uint8), stream_ptr=-1)

    def test_copy(self, view):
        with pytest.raises(BufferError, match=r"^Sorry, not supported: copy=True$"):
            view.__dlpack__(copy=True)

    def test_dl_device_malformed(self, view):
        with pytest.raises(BufferError, match=r"^Sorry, not supported: dl_device other than None$"):
            view.__dlpack__(dl_device=())

    def test_max_version_empty(self, view):
        with pytest.raises(BufferError, match=r"^Expected max_version tuple\[int, int\], got \(\)$"):
            view.__dlpack__(max_version=())

    def test_max_version_three(self, view):
        with pytest.raises(BufferError, match=r"^Expected max_version tuple\[int, int\], got \(9, 8, 7\)$"):
            view.__dlpack__(max_version=(9, 8, 7))

    def test_own_device_still_taken(self, view):
        # cucore's extension (the DLPack spec's): the memory's own device is no refusal.
        assert "dltensor" in repr(view.__dlpack__(dl_device=(1, 0)))

    def test_buffer(self, device):
        buf = device.allocate(64)
        with pytest.raises(BufferError, match=r"^Sorry, not supported: dl_device other than None$"):
            buf.__dlpack__(dl_device=())
        with pytest.raises(BufferError, match=r"^Sorry, not supported: copy=True$"):
            buf.__dlpack__(copy=True)
        with pytest.raises(BufferError, match=r"^Expected max_version tuple\[int, int\], got \(\)$"):
            buf.__dlpack__(max_version=())
        with pytest.raises(BufferError, match=r"^Expected max_version tuple\[int, int\], got \(9, 8, 7\)$"):
            buf.__dlpack__(max_version=(9, 8, 7))


# A resource in Python whose memory neither side can reach (cuda.core's NullMemoryResource).
_HOST = (ctypes.c_byte * 1024)()


class _NullResource(MemoryResource):
    def __init__(self):
        self.freed = 0

    def allocate(self, size, stream=None):
        return Buffer.from_handle(ctypes.addressof(_HOST), size, mr=self)

    def deallocate(self, ptr, size, stream=None):
        self.freed += 1

    @property
    def is_device_accessible(self):
        return False

    @property
    def is_host_accessible(self):
        return False

    @property
    def device_id(self):
        return -1


class TestBufferUnreachable:
    def test_dlpack_device(self):
        buf = _NullResource().allocate(1024)
        with pytest.raises(BufferError, match=r"^buffer is neither device-accessible nor host-accessible$"):
            buf.__dlpack_device__()

    def test_dlpack(self):
        buf = _NullResource().allocate(1024)
        with pytest.raises(BufferError, match="invalid buffer"):
            buf.__dlpack__()

    def test_error_survives_the_buffer_freed_while_it_propagates(self):
        # The temporary Buffer dies (calling the resource's deallocate in
        # Python) while its error propagates: the error is still the one seen.
        mr = _NullResource()
        with pytest.raises(BufferError, match="neither device-accessible nor host-accessible"):
            mr.allocate(1024).__dlpack_device__()
        gc.collect()
        assert mr.freed == 1


# ---- ProgramOptions.define_macro: cuda.core's RuntimeError texts --------------------------------
class TestDefineMacro:
    @staticmethod
    def _program(macro):
        return Program(KERNEL, "c++", ProgramOptions(arch="sm_90", define_macro=macro))

    @pytest.mark.parametrize("macro, shown", [
        (("A", "B", "C"), r"\('A', 'B', 'C'\)"),  # one macro, not three
        (("N", 4), r"\('N', 4\)"),
        ([("N", "4"), ("M",)], r"\('M',\)"),
    ])
    def test_tuple_not_two_str(self, macro, shown):
        with pytest.raises(RuntimeError, match=rf"^Expected define_macro tuple\[str, str\], got {shown}$"):
            self._program(macro)

    def test_not_a_macro(self):
        with pytest.raises(RuntimeError, match=r"^Expected define_macro Union\[str, tuple\[str, str\]\], "
                                               r"list\[Union\[str, tuple\[str, str\]\]\], got 5$"):
            self._program(5)

    def test_item_not_a_macro(self):
        with pytest.raises(RuntimeError, match=r"^Expected define_macro Union\[str, tuple\[str, str\]\], got 5$"):
            self._program(["A", 5])

    def test_good_forms_still_render(self):
        flags = ProgramOptions(arch="sm_90", define_macro=["A", ("B", "1")]).as_bytes("nvrtc")
        assert b"--define-macro=A" in flags and b"--define-macro=B=1" in flags
        assert b"--define-macro=N=4" in ProgramOptions(arch="sm_90", define_macro=("N", "4")).as_bytes("nvrtc")


# ---- ProgramOptions.extra_sources ----------------------------------------------------------
def _require_nvvm():
    try:
        cucore._core.nvvm_ir_version()
    except Exception as e:  # no libNVVM here
        pytest.skip(f"libNVVM not available ({e})")


class TestExtraSources:
    # Outside NVVM any value is refused as unsupported, before it is looked at.
    @pytest.mark.parametrize("value", [5, "not a sequence", [("m", "ir")]])
    def test_cpp_refuses_any_value(self, value):
        with pytest.raises(ValueError, match=r"^extra_sources is not supported by the NVRTC backend \(C\+\+ code_type\)$"):
            Program(KERNEL, "c++", ProgramOptions(arch="sm_90", extra_sources=value))
        with pytest.raises(ValueError, match="extra_sources is not supported by the NVRTC backend"):
            Program(KERNEL, "c++", {"arch": "sm_90", "extra_sources": value})

    def test_ptx_refuses_any_value(self):
        with pytest.raises(ValueError, match=r"^extra_sources is not supported by the PTX backend\.$"):
            Program(".version 8.0", "ptx", ProgramOptions(arch="sm_90", extra_sources=5))

    def test_nvvm_non_sequence(self):
        _require_nvvm()
        with pytest.raises(TypeError, match=r"^extra_sources must be a sequence of 2-tuples"):
            Program("x", "nvvm", ProgramOptions(arch="sm_90", extra_sources=5))

    def test_nvvm_str_is_a_sequence_of_non_tuples(self):
        # cuda.core's is_sequence is collections.abc.Sequence: a str passes it, its items do not.
        _require_nvvm()
        with pytest.raises(TypeError, match=r"^Each extra module must be a 2-tuple \(name, source\), got str at index 0$"):
            Program("x", "nvvm", ProgramOptions(arch="sm_90", extra_sources="ab"))


# ---- make_program_cache_key ---------------------------------------------------------------------
class TestProgramCacheKey:
    @staticmethod
    def _key(code_type="c++", target_type="cubin", extra_digest=None, **options):
        from cucore.utils import make_program_cache_key

        return make_program_cache_key(code=KERNEL, code_type=code_type, options=ProgramOptions(arch="sm_90", **options),
                                      target_type=target_type, extra_digest=extra_digest)

    @pytest.mark.parametrize("field", ["use_pch", "pch_dir"])
    def test_external_content_empty_string_needs_digest(self, field):
        # Any value but None is external content to cuda.core, "" included.
        with pytest.raises(ValueError, match=rf"\({field}\).*extra_digest"):
            self._key(**{field: ""})
        assert len(self._key(extra_digest=b"headers", **{field: ""})) == 32

    def test_external_content_needs_digest(self):
        with pytest.raises(ValueError, match=r"\(include_path, pre_include\).*extra_digest"):
            self._key(include_path="/opt/inc", pre_include="a.h")
        assert len(self._key(extra_digest=b"headers", include_path="/opt/inc", pre_include="a.h")) == 32

    @pytest.mark.parametrize("field", ["create_pch", "time", "fdevice_time_trace"])
    def test_side_effect_empty_string_refused(self, field):
        with pytest.raises(ValueError, match=rf"{field} writes a file as a side effect"):
            self._key(extra_digest=b"d", **{field: ""})

    @pytest.mark.parametrize("code_type, target", [("c++", "cubin"), ("ptx", "cubin")])
    def test_extra_sources_outside_nvvm_whatever_its_value(self, code_type, target):
        with pytest.raises(ValueError, match=r"extra_sources is only .*nvvm"):
            self._key(code_type=code_type, target_type=target, extra_sources=5)

    def test_nvvm_unsupported_option_is_cuda_error(self):
        # cuda.core renders the key's flags with as_bytes("nvvm"), which raises CUDAError.
        with pytest.raises(cucore.CUDAError, match="not supported by NVVM backend: include_path"):
            self._key(code_type="nvvm", target_type="ptx", include_path="/opt/inc")


# ---- graphs ---------------------------------------------------------------------------------------
class TestGraphBuilderJoin:
    def test_join_needs_two(self):
        from cucore.graph import GraphBuilder

        with pytest.raises(ValueError, match=r"^Must join with at least two graph builders$"):
            GraphBuilder.join()

    def test_join_types_first(self):
        from cucore.graph import GraphBuilder

        with pytest.raises(TypeError, match=r"^All arguments must be GraphBuilder instances$"):
            GraphBuilder.join(1, 2)
        with pytest.raises(TypeError, match=r"^All arguments must be GraphBuilder instances$"):
            GraphBuilder.join("builder")


class TestGraphGpu:
    def test_split_count(self, device):
        gb = device.create_graph_builder().begin_building()
        try:
            for count in (1, 0, -3):
                with pytest.raises(ValueError, match=rf"^Invalid split count: expecting >= 2, got {count}$"):
                    gb.split(count)
            with pytest.raises(ValueError, match="Must join with at least two graph builders"):
                type(gb).join(gb)
        finally:
            gb.end_building()

    def test_end_building_with_an_unjoined_fork_is_cuda_error(self, device):
        from cucore.graph import GraphBuilder

        gb = device.create_graph_builder().begin_building()
        first, second = gb.split(2)
        assert first is gb
        with pytest.raises(cucore.CUDAError) as ei:  # the driver's verdict, as cuda.core gets it
            gb.end_building()
        assert ei.value.name == "CUDA_ERROR_STREAM_CAPTURE_UNJOINED"
        assert gb.is_building  # nothing ended: joining still works
        assert GraphBuilder.join(first, second) is gb
        gb.end_building().complete()

    def test_debug_dot_print_options(self, device, tmp_path):
        from cucore.graph import GraphDebugPrintOptions

        gb = device.create_graph_builder().begin_building().end_building()
        definition = gb.graph_definition
        path = str(tmp_path / "g.dot")
        for bad in ({"verbose": True}, {}, "verbose"):
            with pytest.raises(TypeError, match=r"^options must be a GraphDebugPrintOptions instance$"):
                definition.debug_dot_print(path, bad)
        definition.debug_dot_print(path, GraphDebugPrintOptions(verbose=True))
        # The builder reads truthy options through the dataclass, as cuda.core's does: another object has no
        # _to_flags, and falsy ones are no flags.
        with pytest.raises(AttributeError, match="_to_flags"):
            gb.debug_dot_print(path, {"verbose": True})
        gb.debug_dot_print(path, {})
        gb.debug_dot_print(path, None)
        gb.debug_dot_print(path, GraphDebugPrintOptions(handles=True))

    def test_capture_of_an_unsupported_call(self, device):
        gb = device.create_graph_builder().begin_building()
        with pytest.raises(cucore.CUDAError) as ei:
            gb.stream.sync()  # cuStreamSynchronize is not capturable
        assert ei.value.name == "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"
        with pytest.raises(RuntimeError, match=r"^Build process encountered an error and has been invalidated\. "
                                               r"Build process must now be ended\.$"):
            gb.is_building
        with pytest.raises(RuntimeError):
            gb.end_building()
        assert not gb.is_building

    def test_pool_allocation_on_a_capturing_stream(self, device):
        gb = device.create_graph_builder().begin_building()
        try:
            for mr in (device.memory_resource, cucore.PinnedMemoryResource()):
                with pytest.raises(RuntimeError, match=r"^_MemPool cannot perform memory operations on a capturing "
                                                       r"stream \(consider using GraphMemoryResource\)\.$"):
                    mr.allocate(256, stream=gb)
            assert gb.is_building  # refused before the driver saw it
            cucore.GraphMemoryResource(device.device_id).allocate(256, stream=gb).close(stream=gb)
        finally:
            gb.end_building()


# ---- green contexts -------------------------------------------------------------------------------
class TestContextStream:
    def test_create_stream_only_in_green_contexts(self, device):
        with pytest.raises(RuntimeError, match=r"^Context\.create_stream\(\) is only supported on green contexts\. "
                                               r"Use Device\.create_stream\(\) for primary contexts\.$"):
            device.context.create_stream()


class TestGreenOptions:
    def test_split_takes_a_dict_of_the_fields(self, device):
        sm = device.resources.sm
        groups, _ = sm.split({"count": sm.min_partition_size}, dry_run=True)
        assert len(groups) == 1
        with pytest.raises(TypeError):  # a key the dataclass does not have
            sm.split({"cuont": sm.min_partition_size}, dry_run=True)

    def test_count_past_unsigned_int_is_overflow(self, device):
        with pytest.raises(OverflowError, match="count"):
            device.resources.sm.split(cucore.SMResourceOptions(count=2**32), dry_run=True)
        with pytest.raises(ValueError, match=r"count must be non-negative"):
            device.resources.sm.split(cucore.SMResourceOptions(count=-1), dry_run=True)


# ---- StridedMemoryView.as_tensor_map / TensorMapDescriptorOptions -------------------------------
class TestTensorMapOptions:
    @pytest.fixture
    def view(self):
        return StridedMemoryView.from_any_interface(np.zeros((64, 64), dtype=np.float32), stream_ptr=-1)

    def test_options_and_arguments(self, view):
        from cucore._tensor_map import TensorMapDescriptorOptions

        with pytest.raises(TypeError, match=r"^Specify either options or the individual tensor map arguments, not both"):
            view.as_tensor_map((8, 8), options=TensorMapDescriptorOptions(box_dim=(8, 8)))

    def test_box_dim_required(self, view):
        with pytest.raises(TypeError, match=r"^box_dim is required unless options is provided"):
            view.as_tensor_map()

    @pytest.mark.parametrize("field, enum_name", [("interleave", "TensorMapInterleave"), ("swizzle", "TensorMapSwizzle"),
                                                  ("l2_promotion", "TensorMapL2Promotion"),
                                                  ("oob_fill", "TensorMapOOBFill")])
    def test_enum_fields(self, field, enum_name):
        from cucore._tensor_map import TensorMapDescriptorOptions

        with pytest.raises(TypeError, match=rf"^{field} must be a {enum_name}"):
            TensorMapDescriptorOptions(box_dim=(8, 8), **{field: 99})


# ---- Empty sources, zero-size allocations -----------------------------------------------
class TestEmptySource:
    def test_empty_cpp_and_nvvm_are_the_compilers_to_judge(self):
        # As cuda.core: NVRTC takes an empty translation unit (and makes PTX of nothing); libNVVM
        # takes an empty module when the Program is made and refuses it at compile.
        assert Program("", "c++", ProgramOptions(arch="sm_90")).compile("ptx").code_type == "ptx"
        p = Program("", "nvvm", ProgramOptions(arch="sm_90"))
        assert p.backend == "NVVM"
        with pytest.raises(cucore.CompileError):
            p.compile("ptx")

    def test_empty_ptx_is_refused_when_the_program_is_made(self):
        # cuda.core hands the PTX to its linker when the Program is made: empty input is refused then.
        with pytest.raises(ValueError, match="PTX source is empty"):
            Program("", "ptx", ProgramOptions(arch="sm_90"))


class TestZeroSizeAllocation:
    def test_every_resource_gives_a_zero_size_buffer(self, device):
        # A zero-size Buffer at address 0, as cuda.core's resources give one (no driver allocation).
        s = device.create_stream()
        resources = [device.memory_resource, cucore.LegacyPinnedMemoryResource(),
                     cucore.DeviceMemoryResource(device.device_id, cucore.DeviceMemoryResourceOptions())]
        try:
            resources.append(cucore.PinnedMemoryResource())
        except (cucore.FeatureUnavailableError, NotImplementedError):
            pass
        if device.properties.concurrent_managed_access:
            resources.append(cucore.ManagedMemoryResource())
        for mr in resources:
            b = mr.allocate(0, stream=s)
            assert isinstance(b, Buffer) and b.size == 0 and int(b.handle) == 0, type(mr).__name__
            b.close(s)
            assert b.is_closed
        b = device.allocate(0, stream=s)
        assert b.size == 0
        s.sync()


# ---- Textures and surfaces (cucore.texture as cuda.core.texture) ------------------------
from cucore.texture import (  # noqa: E402
    MipmappedArrayOptions,
    OpaqueArrayOptions,
    ResourceDescriptor,
    TextureObjectOptions,
)
from cucore.typing import AddressModeType, ArrayFormatType, FilterModeType, ReadModeType  # noqa: E402

_FORMATS = r"\{'uint8', 'uint16', 'uint32', 'int8', 'int16', 'int32', 'float16', 'float32'\}"


class TestTextureOptions:
    def test_defaults_are_the_enum_members(self):
        import dataclasses

        # The signature cuda.core documents: address_mode=AddressModeType.CLAMP, and so on.
        d = {f.name: f.default for f in dataclasses.fields(TextureObjectOptions)}
        assert d["address_mode"] is AddressModeType.CLAMP and d["filter_mode"] is FilterModeType.POINT
        assert d["read_mode"] is ReadModeType.ELEMENT_TYPE and d["mipmap_filter_mode"] is FilterModeType.POINT
        assert (d["max_anisotropy"], d["border_color"], d["normalized_coords"]) == (0, None, False)

    @pytest.mark.parametrize("field, enum, valid", [
        ("filter_mode", "FilterModeType", "'point', 'linear'"),
        ("read_mode", "ReadModeType", "'element_type', 'normalized_float'"),
        ("mipmap_filter_mode", "FilterModeType", "'point', 'linear'"),
    ])
    def test_enum_fields_are_checked_when_made(self, field, enum, valid):
        with pytest.raises(ValueError, match=rf"^{field} must be a {enum} or one of \{{{valid}\}}, got 0$"):
            TextureObjectOptions(**{field: 0})
        with pytest.raises(ValueError, match=rf"^{field} must be a {enum} .* got 'sideways'$"):
            TextureObjectOptions(**{field: "sideways"})

    def test_address_mode_border_color_and_anisotropy_are_checked_by_the_texture(self):
        # cuda.core keeps them as given; create_texture_object checks them (TestTextureGpu).
        o = TextureObjectOptions(address_mode=42, border_color=(0.0, 0.0), max_anisotropy=-1)
        assert (o.address_mode, o.border_color, o.max_anisotropy) == (42, (0.0, 0.0), -1)

    def test_enums_are_in_typing(self):
        for name in ("AddressModeType", "ArrayFormatType", "FilterModeType", "ReadModeType"):
            assert name in cucore.typing.__all__


class TestArrayOptions:
    REFUSALS = [
        (dict(shape=8), TypeError, r"^shape must be a tuple of ints, got int$"),
        (dict(shape=(2, 2, 2, 2)), ValueError, r"^shape rank must be 1, 2, or 3, got 4$"),
        (dict(shape=()), ValueError, r"^shape rank must be 1, 2, or 3, got 0$"),
        (dict(shape=(8, 0)), ValueError, r"^shape\[1\] must be >= 1, got 0$"),
        (dict(num_channels=3), ValueError, r"^num_channels must be 1, 2, or 4, got 3$"),
        (dict(num_channels=True), ValueError, r"^num_channels must be 1, 2, or 4, got True$"),
        (dict(format=0), ValueError, r"^format must be an ArrayFormatType, str, or NumPy dtype, got 0$"),
        (dict(format="float64"), ValueError, rf"^format must be an ArrayFormatType or one of {_FORMATS}, got 'float64'$"),
        (dict(format=np.float64), ValueError,
         rf"^NumPy dtype dtype\('float64'\) has no ArrayFormatType equivalent; supported formats: {_FORMATS}$"),
        (dict(shape=8, format=0), ValueError, "^format must be"),  # the format first, as cuda.core
    ]

    @pytest.mark.parametrize("kw, exc, msg", REFUSALS)
    def test_refusals(self, kw, exc, msg):
        base = dict(shape=(8, 4), format="uint8", num_channels=1)
        with pytest.raises(exc, match=msg):
            OpaqueArrayOptions(**{**base, **kw})
        with pytest.raises(exc, match=msg):
            MipmappedArrayOptions(**{**base, "num_levels": 1, **kw})

    def test_accepted_forms(self):
        o = OpaqueArrayOptions(shape=[np.int64(8), 4], format=np.dtype("i4"), num_channels=np.int32(2))
        assert o.shape == (8, 4) and all(type(e) is int for e in o.shape) and o.format is ArrayFormatType.INT32
        assert OpaqueArrayOptions(shape=(8,), format=np.uint8, num_channels=1).format is ArrayFormatType.UINT8
        assert OpaqueArrayOptions(shape=(8,), format="float16", num_channels=4).format is ArrayFormatType.FLOAT16

    def test_num_levels(self):
        with pytest.raises(ValueError, match=r"^num_levels must be >= 1, got 0$"):
            MipmappedArrayOptions(shape=(8, 8), format="uint8", num_channels=1, num_levels=0)
        m = MipmappedArrayOptions(shape=(8, 8), format="uint8", num_channels=1, num_levels=np.int64(3))
        assert m.num_levels == 3 and type(m.num_levels) is int


class TestResourceDescriptor:
    @pytest.fixture
    def buf(self):
        return Buffer.from_handle(ctypes.addressof(_HOST), 1024, mr=_NullResource())

    def test_linear(self, buf):
        r = ResourceDescriptor.from_linear(buf, format="float32", num_channels=1)
        assert r.kind == "linear" and r.source is buf and r.format is ArrayFormatType.FLOAT32
        assert (r.num_channels, r.size_bytes, r.width, r.height, r.pitch_bytes) == (1, 1024, None, None, None)
        assert repr(r) == "ResourceDescriptor(kind='linear', format=FLOAT32, num_channels=1, size_bytes=1024)"
        assert ResourceDescriptor.from_linear(buf, format="uint32", num_channels=2, size_bytes=64).size_bytes == 64

    @pytest.mark.parametrize("kw, msg", [
        (dict(size_bytes=2048), r"size_bytes \(2048\) exceeds buffer.size \(1024\)"),
        (dict(size_bytes=0), r"size_bytes \(0\) must be at least one element \(4 bytes\)"),
        (dict(size_bytes=10), r"size_bytes \(10\) must be a multiple of element size \(4 bytes for UINT32 x 1\)"),
        (dict(num_channels=3), r"num_channels must be 1, 2, or 4, got 3"),
        (dict(format="float64"), r"^format must be an ArrayFormatType or one of"),
    ])
    def test_linear_refusals(self, buf, kw, msg):
        with pytest.raises(ValueError, match=msg):
            ResourceDescriptor.from_linear(buf, **{**dict(format="uint32", num_channels=1), **kw})

    def test_pitch2d(self, buf):
        r = ResourceDescriptor.from_pitch2d(buf, format="uint8", num_channels=4, width=8, height=16, pitch_bytes=64)
        assert r.kind == "pitch2d" and r.source is buf and (r.width, r.height, r.pitch_bytes) == (8, 16, 64)
        assert r.size_bytes is None
        assert repr(r) == ("ResourceDescriptor(kind='pitch2d', format=UINT8, num_channels=4, width=8, height=16, "
                           "pitch_bytes=64)")

    @pytest.mark.parametrize("kw, msg", [
        (dict(width=0), r"width must be >= 1, got 0"),
        (dict(height=0), r"height must be >= 1, got 0"),
        (dict(pitch_bytes=16), r"pitch_bytes \(16\) must be >= width \* element_bytes \(32\)"),
        # cuda.core counts every row whole: 64 * 17 > 1024 even though the last row's 32 bytes would fit.
        (dict(height=17), r"pitch_bytes \* height \(1088\) exceeds buffer.size \(1024\)"),
    ])
    def test_pitch2d_refusals(self, buf, kw, msg):
        with pytest.raises(ValueError, match=msg):
            ResourceDescriptor.from_pitch2d(buf, **{**dict(format="uint8", num_channels=4, width=8, height=8,
                                                           pitch_bytes=64), **kw})

    def test_wrong_types(self):
        with pytest.raises(TypeError, match=r"^buffer must be a Buffer, got object$"):
            ResourceDescriptor.from_linear(object(), format="uint8", num_channels=1)
        with pytest.raises(TypeError, match=r"^buffer must be a Buffer, got object$"):
            ResourceDescriptor.from_pitch2d(object(), format="uint8", num_channels=1, width=8, height=8, pitch_bytes=8)
        with pytest.raises(TypeError, match=r"^array must be an OpaqueArray, got int$"):
            ResourceDescriptor.from_opaque_array(1)
        with pytest.raises(TypeError, match=r"^mipmapped_array must be a MipmappedArray, got NoneType$"):
            ResourceDescriptor.from_mipmapped_array(None)
        with pytest.raises(RuntimeError, match=r"^ResourceDescriptor cannot be instantiated"):
            ResourceDescriptor()


class TestTextureGpu:
    @pytest.fixture
    def arr(self, device):
        return device.create_opaque_array(OpaqueArrayOptions(shape=(32, 16), format="float32", num_channels=1,
                                                             is_surface_load_store=True))

    def test_reprs_and_kinds(self, device, arr):
        assert repr(arr) == "OpaqueArray(shape=(32, 16), format=FLOAT32, num_channels=1)"
        m = device.create_mipmapped_array(MipmappedArrayOptions(shape=(64,), format="uint8", num_channels=4,
                                                                num_levels=3))
        assert repr(m) == "MipmappedArray(shape=(64,), format=UINT8, num_channels=4, num_levels=3)"
        r = ResourceDescriptor.from_opaque_array(arr)
        assert r.kind == "array" and r.source is arr and r.format is None and r.num_channels is None
        assert repr(r) == "ResourceDescriptor(kind='array')"
        assert ResourceDescriptor.from_mipmapped_array(m).kind == "mipmapped_array"
        opts = TextureObjectOptions()
        t = device.create_texture_object(resource=r, options=opts)
        assert t.resource is r and t.options is opts
        assert repr(t) == f"TextureObject(handle={t.handle:#x})"
        s = device.create_surface_object(resource=r)
        assert repr(s) == f"SurfaceObject(handle={s.handle:#x})"

    def test_get_level_out_of_range_is_value_error(self, device):
        m = device.create_mipmapped_array(MipmappedArrayOptions(shape=(16, 16), format="uint8", num_channels=1,
                                                                num_levels=2))
        with pytest.raises(ValueError, match=r"level \(2\) must be < num_levels \(2\)"):
            m.get_level(2)
        with pytest.raises(ValueError, match=r"^level must be >= 0, got -1$"):
            m.get_level(-1)
        assert m.get_level(1).shape == (8, 8)

    @pytest.mark.parametrize("kw, exc, msg", [
        (dict(address_mode=42), TypeError, r"^address_mode must be an AddressModeType or a tuple of AddressModeType$"),
        (dict(address_mode=()), ValueError, r"^address_mode tuple must have 1-3 entries, got 0$"),
        (dict(address_mode=("wrap",) * 4), ValueError, r"^address_mode tuple must have 1-3 entries, got 4$"),
        (dict(address_mode="sideways"), ValueError, r"^address_mode must be a AddressModeType or one of"),
        (dict(address_mode=("wrap", "bad")), ValueError, r"^address_mode\[1\] must be a AddressModeType or one of"),
        (dict(border_color=(0.0, 0.0)), ValueError, r"^border_color must have 4 elements, got 2$"),
        (dict(max_anisotropy=-1), ValueError, r"^max_anisotropy must be >= 0$"),
    ])
    def test_sampling_state_is_checked_when_the_texture_is_made(self, device, arr, kw, exc, msg):
        opts = TextureObjectOptions(**kw)  # taken as given
        with pytest.raises(exc, match=msg):
            device.create_texture_object(resource=ResourceDescriptor.from_opaque_array(arr), options=opts)

    def test_what_cuda_core_passes_to_the_driver(self, device, arr):
        # An anisotropy past 16 is the driver's to clamp; modes are taken as strings, and per axis.
        r = ResourceDescriptor.from_opaque_array(arr)
        device.create_texture_object(resource=r, options=TextureObjectOptions(max_anisotropy=32))
        device.create_texture_object(resource=r, options=TextureObjectOptions(address_mode=("wrap", "clamp")))
        device.create_texture_object(resource=r, options={"address_mode": "border", "border_color": [1, 0, 0, 1]})

    def test_resource_types(self, device):
        with pytest.raises(TypeError, match=r"^resource must be a ResourceDescriptor, got object$"):
            device.create_texture_object(resource=object())
        with pytest.raises(TypeError, match=r"^resource must be a ResourceDescriptor, got NoneType$"):
            device.create_surface_object(resource=None)

    def test_surface_refusals(self, device):
        lin = ResourceDescriptor.from_linear(device.allocate(1024), format="uint32", num_channels=1)
        with pytest.raises(ValueError, match=r"requires an array-backed ResourceDescriptor, got kind='linear'"):
            device.create_surface_object(resource=lin)
        m = device.create_mipmapped_array(MipmappedArrayOptions(shape=(16, 16), format="uint8", num_channels=4,
                                                                num_levels=2, is_surface_load_store=True))
        with pytest.raises(ValueError, match=r"array-backed ResourceDescriptor, got kind='mipmapped_array'"):
            device.create_surface_object(resource=ResourceDescriptor.from_mipmapped_array(m))
        plain = device.create_opaque_array(OpaqueArrayOptions(shape=(8, 8), format="uint8", num_channels=4))
        with pytest.raises(ValueError, match=r"must be created with is_surface_load_store=True to be bound as a "
                                             r"SurfaceObject"):
            device.create_surface_object(resource=ResourceDescriptor.from_opaque_array(plain))


class TestStreamWait:
    def test_what_cannot_be_waited(self):
        # cuda.core's ValueError and text; refused before the driver is asked (CPU).
        with pytest.raises(ValueError, match=r"^only an Event, Stream, or object supporting __cuda_stream__ can be "
                                             r"waited, got <class 'str'>$"):
            cucore.LEGACY_DEFAULT_STREAM.wait("invalid_event")
