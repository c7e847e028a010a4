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
