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
