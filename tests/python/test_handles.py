"""Handles as cuda.core gives and takes them, cuda.core 1.3's top-level errors,
and CUDAWarning.

cuda.core's .handle is a cuda.bindings object (CUstream, CUevent, CUcontext,
CUkernel, CUlibrary, nvrtcProgram, CUgraph, CUgraphExec, CUgraphNode,
CUmemoryPool): cucore returns those where cuda.bindings imports, plain ints
where it does not (it is not a dependency). int() of either is the driver's
handle, and from_handle takes both. Release failures in destructors, which
nothing can raise, are CUDAWarning."""
import ctypes
import gc
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import cucore
from cucore import Kernel, Program, ProgramOptions, Stream

from test_conformance_program import _nvvm_ir

KERNEL = 'extern "C" __global__ void k(unsigned long long* out, unsigned long long v) { *out = v; }'


@pytest.fixture
def drv():
    return pytest.importorskip("cuda.bindings.driver", reason="cuda.bindings is not installed")


def _run(script):
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout


# ---- without a GPU ----------------------------------------------------------------------
def test_cuda_bindings_is_imported_on_first_use_not_with_cucore(drv):
    out = _run("""
        import sys
        import cucore
        print("cuda.bindings.driver" in sys.modules)
        h = cucore.Stream.from_handle(0x1234).handle
        print("cuda.bindings.driver" in sys.modules, type(h).__name__)
    """)
    assert out.split() == ["False", "True", "CUstream"]


def test_stream_handles_are_custreams(drv):
    s = Stream.from_handle(0x5A5A50)
    h = s.handle
    assert type(h) is drv.CUstream and int(h) == 0x5A5A50 and h == drv.CUstream(0x5A5A50)
    assert s.__cuda_stream__() == (0, 0x5A5A50)  # the protocol stays ints
    assert type(cucore.LEGACY_DEFAULT_STREAM.handle) is drv.CUstream and int(cucore.LEGACY_DEFAULT_STREAM.handle) == 1
    assert int(cucore.PER_THREAD_DEFAULT_STREAM.handle) == 2
    s.close()
    assert type(s.handle) is drv.CUstream and int(s.handle) == 0  # as cuda.core: the null CUstream


def test_program_handles_by_backend(drv):
    nvrtc = pytest.importorskip("cuda.bindings.nvrtc")
    p = Program(KERNEL, "c++", ProgramOptions(arch="sm_90"))
    h = p.handle
    assert type(h) is nvrtc.nvrtcProgram and int(h) != 0 and p.handle == h  # made once
    p.close()
    assert type(p.handle) is nvrtc.nvrtcProgram and int(p.handle) == 0
    ptx = Program(KERNEL, "c++", ProgramOptions(arch="sm_90")).compile("ptx").code.decode()
    assert type(Program(ptx, "ptx", ProgramOptions(arch="sm_90")).handle) is int  # its linker's (nvJitLink here)
    q = Program(_nvvm_ir(), "nvvm", ProgramOptions(arch="sm_90"))
    assert type(q.handle) is int and q.handle != 0  # cuda.core: NVVM handles are ints


def _nvjitlink():
    """The nvJitLink cucore loaded (the same library: a handle means nothing to another copy)."""
    lib = ctypes.CDLL(cucore.pathfinder.find("nvjitlink").path)
    lib.nvJitLinkComplete.argtypes = [ctypes.c_void_p]
    lib.nvJitLinkGetLinkedCubinSize.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
    return lib


def _linked_cubin_size(lib, handle):
    size = ctypes.c_size_t(0)
    assert lib.nvJitLinkGetLinkedCubinSize(handle, ctypes.byref(size)) == 0  # NVJITLINK_SUCCESS
    return size.value


def test_linker_handle_is_the_nvjitlink_state_link_completes():
    # cuda.core: the nvJitLinkHandle as an int (cuda.bindings.nvjitlink takes ints), made with the Linker.
    code = Program(KERNEL, "c++", ProgramOptions(arch="sm_90", relocatable_device_code=True)).compile("ptx")
    linker = cucore.Linker(code, options=cucore.LinkerOptions(arch="sm_90"))
    assert linker.backend == "nvJitLink"
    h = linker.handle
    assert type(h) is int and h != 0 and linker.handle == h  # made once
    cubin = linker.link("cubin")
    assert cubin.code_type == "cubin" and linker.handle == h  # the state link() completed
    assert _linked_cubin_size(_nvjitlink(), h) == len(cubin.code)
    linker.close()
    assert linker.handle == 0


def test_ptx_program_handle_is_its_linkers_state():
    ptx = Program(KERNEL, "c++", ProgramOptions(arch="sm_90")).compile("ptx").code.decode()
    p = Program(ptx, "ptx", ProgramOptions(arch="sm_90"))
    assert p.backend == "nvJitLink"
    h = p.handle
    assert type(h) is int and h != 0 and p.handle == h
    lib = _nvjitlink()
    assert lib.nvJitLinkComplete(h) == 0  # a live state with the PTX added
    assert _linked_cubin_size(lib, h) > 0
    assert p.compile("cubin").code[:4] == b"\x7fELF"  # compile() links on its own
    p.close()
    assert p.handle == 0


def test_stream_from_handle_takes_ints_and_custreams(drv):
    a = Stream.from_handle(0x7070)
    assert Stream.from_handle(drv.CUstream(0x7070)) == a
    assert Stream.from_handle(a.handle) == a  # a round trip through .handle
    assert Stream.from_handle(np.uint64(0x7070)) == a  # anything with __index__
    with pytest.raises(TypeError, match=r"handle: expected an int or a cuda\.bindings\.driver\.CUstream, got "
                                        r"cuda\.bindings\.driver\.CUevent"):
        Stream.from_handle(drv.CUevent(0x7070))  # another kind of handle is a mistake
    with pytest.raises(TypeError, match="got float"):
        Stream.from_handle(1.5)


def test_other_from_handles_refuse_the_wrong_kind(drv):
    with pytest.raises(TypeError, match=r"expected an int or a cuda\.bindings\.driver\.CUcontext, got "
                                        r"cuda\.bindings\.driver\.CUstream"):
        cucore.Context.from_handle(drv.CUstream(1))
    with pytest.raises(TypeError, match=r"expected an int or a cuda\.bindings\.driver\.CUmemoryPool"):
        cucore.DeviceMemoryResource.from_handle(drv.CUstream(1), 0)
    with pytest.raises(TypeError, match="handle must be an integer, got cuda.bindings.driver.CUstream"):
        Kernel.from_handle(drv.CUstream(1))
    with pytest.raises(TypeError, match="handle must be an integer, got str"):
        Kernel.from_handle("0x1234")


BLOCKED = """
    import sys

    attempts = []

    class NoBindings:
        # A machine without cuda.bindings: importing it fails as a missing package does.
        def find_spec(self, name, path=None, target=None):
            if name == "cuda.bindings" or name.startswith("cuda.bindings."):
                attempts.append(name)
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NoBindings())
    for m in [m for m in sys.modules if m == "cuda.bindings" or m.startswith("cuda.bindings.")]:
        del sys.modules[m]
"""


def test_handles_are_ints_without_cuda_bindings():
    out = _run(BLOCKED + """
    import cucore
    from cucore import Program, ProgramOptions, Stream
    s = Stream.from_handle(0x1234)
    h = s.handle
    assert type(h) is int and h == 0x1234, repr(h)
    # The branch without cuda.bindings ran: cuda.bindings.driver's import failed at its package.
    assert attempts == ["cuda.bindings"], attempts
    assert type(cucore.LEGACY_DEFAULT_STREAM.handle) is int and cucore.LEGACY_DEFAULT_STREAM.handle == 1
    assert attempts == ["cuda.bindings"], attempts  # a failed import is not retried
    assert Stream.from_handle(h) == s
    s.close()
    assert s.handle == 0
    p = Program('extern "C" __global__ void k() {}', "c++", ProgramOptions(arch="sm_90"))
    assert type(p.handle) is int and p.handle != 0
    assert attempts == ["cuda.bindings"] * 2, attempts  # cuda.bindings.nvrtc's, tried once
    assert type(p.handle) is int and attempts == ["cuda.bindings"] * 2, attempts
    print("ok", "cuda.bindings" in sys.modules)
    """)
    assert out.split() == ["ok", "False"]


def test_cuda_core_1_3_errors_at_the_top_level():
    from cucore import CUDAError, CUDAWarning, NVRTCError

    assert CUDAError is cucore.CudaError and NVRTCError is cucore.CompileError
    assert issubclass(NVRTCError, CUDAError) and issubclass(CUDAError, Exception)  # as cuda.core's
    assert issubclass(CUDAWarning, RuntimeWarning) and not issubclass(CUDAWarning, CUDAError)
    assert {"CUDAError", "NVRTCError", "CUDAWarning"} <= set(cucore.__all__)
    with pytest.raises(NVRTCError):
        Program("this is not C++", "c++", ProgramOptions(arch="sm_90")).compile("ptx")


class FailingResource:
    """A memory resource (as Buffer.from_handle takes one) whose deallocate fails."""

    def __init__(self):
        self.calls = 0

    def deallocate(self, ptr, size, *, stream):
        self.calls += 1
        raise cucore.CUDAError("CUDA_ERROR_LAUNCH_FAILED: the free failed")

    is_device_accessible = False
    is_host_accessible = True
    device_id = -1


def test_a_failed_free_in_a_destructor_is_a_cuda_warning():
    host = np.zeros(64, np.uint8)
    mr = FailingResource()
    b = cucore.Buffer.from_handle(host.ctypes.data, host.nbytes, mr=mr)
    with pytest.warns(cucore.CUDAWarning, match=r"freeing a Buffer's memory(.|\n)*the free failed"):
        del b
        gc.collect()
    assert mr.calls == 1
    # Where it can be raised (close()), it is raised.
    b = cucore.Buffer.from_handle(host.ctypes.data, host.nbytes, mr=mr)
    with pytest.raises(cucore.CUDAError, match="the free failed"), warnings.catch_warnings():
        warnings.simplefilter("error", cucore.CUDAWarning)
        b.close()
    with pytest.warns(cucore.CUDAWarning, match="the free failed"):
        del b  # close() left it open: the destructor tries again, and warns
        gc.collect()
    assert mr.calls == 3


def test_an_escalated_cuda_warning_reaches_the_unraisable_hook(monkeypatch):
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_value))
    host = np.zeros(16, np.uint8)
    b = cucore.Buffer.from_handle(host.ctypes.data, host.nbytes, mr=FailingResource())
    with warnings.catch_warnings():
        warnings.simplefilter("error", cucore.CUDAWarning)
        del b  # raises nowhere: a destructor
        gc.collect()
    assert len(seen) == 1 and isinstance(seen[0], cucore.CUDAWarning), seen
    assert "the free failed" in str(seen[0])


# ---- with a GPU ---------------------------------------------------------------------------
@pytest.fixture
def kernel(device):
    code = Program(KERNEL, "c++", ProgramOptions(arch="sm_" + device.arch)).compile("cubin")
    return code, code.get_kernel("k")


def test_gpu_handles_are_cuda_bindings_objects_of_the_drivers_values(device, drv, kernel):
    s = device.create_stream()
    assert type(s.handle) is drv.CUstream and int(s.handle) == s.__cuda_stream__()[1] != 0
    err, flags = drv.cuStreamGetFlags(s.handle)  # usable as cuda.bindings takes it
    assert err == drv.CUresult.CUDA_SUCCESS

    e = s.record()
    assert type(e.handle) is drv.CUevent and int(e.handle) != 0
    s.sync()
    assert drv.cuEventQuery(e.handle)[0] == drv.CUresult.CUDA_SUCCESS
    e.close()
    assert type(e.handle) is drv.CUevent and int(e.handle) == 0

    err, current = drv.cuCtxGetCurrent()
    ctx = device.context
    assert type(ctx.handle) is drv.CUcontext and ctx.handle == current and int(ctx.handle) == int(current) != 0
    assert s.context.handle == current

    code, k = kernel
    assert type(k.handle) is drv.CUkernel and int(k.handle) != 0
    assert type(code.handle) is drv.CUlibrary and int(code.handle) != 0
    err, lib = drv.cuKernelGetLibrary(k.handle)
    assert err == drv.CUresult.CUDA_SUCCESS and lib == code.handle

    mr = cucore.DeviceMemoryResource(device)
    err, pool = drv.cuDeviceGetMemPool(device.device_id)
    assert err == drv.CUresult.CUDA_SUCCESS
    assert type(mr.handle) is drv.CUmemoryPool and mr.handle == pool
    assert type(cucore.PinnedMemoryResource().handle) is drv.CUmemoryPool
    s.close()


def test_gpu_graph_handles(device, drv):
    from cucore.graph import GraphDefinition

    g = GraphDefinition()
    n = g.empty()
    assert type(g.handle) is drv.CUgraph and int(g.handle) != 0
    assert type(n.handle) is drv.CUgraphNode and int(n.handle) != 0
    err, nodes, count = drv.cuGraphGetNodes(g.handle, 1)
    assert err == drv.CUresult.CUDA_SUCCESS and count == 1 and nodes[0] == n.handle
    exe = g.instantiate()
    assert type(exe.handle) is drv.CUgraphExec and int(exe.handle) != 0
    exe.launch(device.default_stream)
    device.sync()


def test_gpu_from_handle_round_trips(device, drv, kernel):
    code, k = kernel
    assert Kernel.from_handle(int(k.handle)) == k  # as cuda.core
    assert Kernel.from_handle(k.handle) == k  # cucore also takes the CUkernel
    ctx = device.context
    assert cucore.Context.from_handle(ctx.handle) == ctx
    assert cucore.Context.from_handle(int(ctx.handle)) == ctx
    s = device.create_stream()
    assert Stream.from_handle(s.handle) == s and Stream.from_handle(int(s.handle)) == s
    mr = cucore.DeviceMemoryResource(device)
    adopted = cucore.DeviceMemoryResource.from_handle(mr.handle, device.device_id)
    assert adopted.handle == mr.handle and not adopted.is_handle_owned
    assert cucore.DeviceMemoryResource.from_handle(int(mr.handle), device.device_id).handle == mr.handle


def test_gpu_kernel_argument_takes_a_cuda_bindings_conditional_handle(device, drv, kernel):
    _, k = kernel
    s = device.create_stream()
    out = device.allocate(8, stream=s)
    value = int(np.random.default_rng().integers(1, 1 << 62))
    cucore.launch(s, cucore.LaunchConfig(grid=1, block=1), k, out, drv.CUgraphConditionalHandle(value))
    host = np.zeros(1, np.uint64)
    out.copy_to(host, stream=s)
    s.sync()
    assert int(host[0]) == value
