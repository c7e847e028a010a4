"""cucore standing in for cuda.core under numba-cuda (issue 26).

tests/python/standin holds a `cuda.core` package that is cucore (the same
objects, __version__ = cucore.cuda_core_api_version). The numba tests run
numba-cuda in a subprocess with that package first on sys.path, so numba-cuda's
`from cuda.core import ...` gets cucore, and check what numba-cuda 0.30.4 does
with it (docs/numba-cuda.md lists every use, file by file).

CPU: the API version, the stand-in's forwarding and namespace handling, the
layout queries numba-cuda types views by, and numba-cuda's import and typing
paths (where numba-cuda is installed). GPU (and numba-cuda): kernels launched
on cucore streams over cucore memory, CUDA Array Interface objects, PyTorch
tensors, a cucore GraphBuilder, an External Memory Management plugin
allocating through cucore, and numba-cuda's own documented examples.
"""
import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import cucore

STANDIN = Path(__file__).resolve().parent / "standin"
HAS_NUMBA_CUDA = importlib.util.find_spec("numba_cuda") is not None
NO_NUMBA_CUDA = "numba-cuda is not installed (pip install numba-cuda[cu13]): nothing to stand in for"


@pytest.fixture
def numba_cuda():
    if not HAS_NUMBA_CUDA:
        pytest.skip(NO_NUMBA_CUDA)


def _cucore_root():
    # The directory cucore is imported from (not resolved: the build tree's
    # package is symlinks next to the built _core module).
    return os.path.dirname(os.path.dirname(os.path.abspath(cucore.__file__)))


def _run(*parts, extra_path=(), timeout=600):
    """Runs the script made of `parts` (each dedented) in a fresh interpreter
    with the stand-in first on sys.path (then `extra_path`, then cucore's
    directory); returns its stdout."""
    script = "\n".join(textwrap.dedent(p) for p in parts)
    env = dict(os.environ)
    path = [str(STANDIN), *map(str, extra_path), _cucore_root()]
    if env.get("PYTHONPATH"):
        path.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(path)
    env["CUCORE_STANDIN"] = str(STANDIN)
    r = subprocess.run([sys.executable, "-X", "faulthandler", "-c", script], env=env,
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"exit {r.returncode}\n--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}"
    return r.stdout


# What every numba subprocess does first.
NUMBA_PRELUDE = """
import os, sys
import numpy as np
# numba-cuda 0.30.4 registers an overload of np.row_stack, which NumPy 2.5 no
# longer has: numba-cuda's bug, not cucore's. Only this test puts the alias back.
if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack
import cucore
import cuda.core
assert cuda.core.__file__.startswith(os.environ["CUCORE_STANDIN"]), cuda.core.__file__
from numba import cuda
"""


# ---- CPU ---------------------------------------------------------------------------


def test_cuda_core_api_version():
    # What a cuda.core stand-in reports as cuda.core.__version__ (numba-cuda
    # parses it to choose between cuda.core's 0.x and 1.x APIs).
    assert cucore.cuda_core_api_version == "1.2.0"
    assert cucore.cuda_core_api_version != cucore.__version__  # cucore's own release is another number


@pytest.mark.parametrize("site_cuda_is_regular", [False, True], ids=["namespace", "regular"])
def test_standin_is_cucore_and_leaves_the_rest_of_cuda_alone(tmp_path, site_cuda_is_regular):
    # An installation's cuda/ (a namespace package as cuda-bindings ships it,
    # or an old regular one) with cuda.bindings and cuda.pathfinder in it, after
    # the stand-in on sys.path: both must still import from there.
    site = tmp_path / "site"
    for sub in ("bindings", "pathfinder"):
        (site / "cuda" / sub).mkdir(parents=True)
        (site / "cuda" / sub / "__init__.py").write_text(f"WHERE = 'site {sub}'\n")
    if site_cuda_is_regular:
        (site / "cuda" / "__init__.py").write_text("")
    out = _run("""
        import os
        import cucore
        import cuda.core
        from cuda.core import (Buffer, Device, LaunchConfig, Linker, LinkerOptions, ObjectCode, Program,
                               ProgramOptions, Stream, launch)
        from cuda.core.graph import GraphBuilder
        from cuda.core.utils import StridedMemoryView
        import cuda.bindings, cuda.pathfinder
        assert cuda.core.__version__ == cucore.cuda_core_api_version == "1.2.0", cuda.core.__version__
        assert cuda.core.__file__.startswith(os.environ["CUCORE_STANDIN"]), cuda.core.__file__
        # The very objects: isinstance checks and type registries keyed on them see cucore's.
        assert (Buffer, Device, LaunchConfig, Linker, LinkerOptions, ObjectCode, Program, ProgramOptions, Stream,
                launch) == (cucore.Buffer, cucore.Device, cucore.LaunchConfig, cucore.Linker, cucore.LinkerOptions,
                            cucore.ObjectCode, cucore.Program, cucore.ProgramOptions, cucore.Stream, cucore.launch)
        assert GraphBuilder is cucore.graph.GraphBuilder
        assert StridedMemoryView is cucore.utils.StridedMemoryView
        import cuda.core.graph, cuda.core.utils, cuda.core.system, cuda.core.typing
        assert cuda.core.graph is cucore.graph and cuda.core.utils is cucore.utils
        assert cuda.core.GraphMemoryResource is cucore.GraphMemoryResource  # not in __all__, still cucore's
        try:
            cuda.core.no_such_name
        except AttributeError as e:
            assert "no_such_name" in str(e)
        else:
            raise AssertionError("cuda.core.no_such_name resolved")
        print(cuda.bindings.WHERE, "|", cuda.pathfinder.WHERE)
    """, extra_path=[site])
    assert out.strip() == "site bindings | site pathfinder"


def _layout(a):
    return cucore.utils.StridedMemoryView.from_any_interface(a, stream_ptr=-1)._layout


def test_layout_contiguity_as_numba_reads_it():
    # numba-cuda types a view "C", "F" or "A" from _layout.is_contiguous_c/_f/_any
    # and refuses any other layout; kernel arguments take strides_in_bytes
    # (None: C-contiguous, strides from the shape).
    from cucore._layout import _StridedLayout

    a = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    cases = [
        # array, (is_contiguous_c, is_contiguous_f, is_contiguous_any), strides_in_bytes
        (a, (True, False, True), None),
        (np.asfortranarray(a), (False, True, True), (4, 8, 24)),
        (a.transpose(1, 2, 0), (False, False, True), (16, 4, 48)),  # contiguous in another axis order
        (a[:, :, :3], (False, False, False), (48, 16, 4)),  # a gap after every row
        (a[:, ::-1, :], (False, False, False), (48, -16, 4)),  # negative stride
        (np.broadcast_to(np.arange(4, dtype=np.float32), (3, 4)), (False, False, False), (0, 4)),  # stride 0
        (a.reshape(6, 4)[::6], (True, True, True), None),  # an extent-1 axis's stride does not count
    ]
    for arr, flags, sib in cases:
        lay = _layout(arr)
        assert (lay.is_contiguous_c, lay.is_contiguous_f, lay.is_contiguous_any) == flags, (arr.strides, lay)
        assert lay.strides_in_bytes == sib, (arr.strides, lay.strides_in_bytes)
        assert lay.is_dense == flags[2]
    # The layout class itself, as cuda.core documents is_contiguous_any.
    dense = _StridedLayout.dense((5, 3, 7), 1)
    assert dense.is_contiguous_any and dense.is_contiguous_c and not dense.is_contiguous_f
    permuted = _StridedLayout.dense((5, 3, 7), 1, stride_order=(2, 0, 1))
    assert permuted.is_contiguous_any and not permuted.is_contiguous_c and not permuted.is_contiguous_f
    assert not _StridedLayout((5, 3, 7), (21, 7, 2), 4).is_contiguous_any  # every other element
    assert _StridedLayout((5, 3, 7), None, 4).is_contiguous_any


def test_numba_cuda_imports_and_types_cucore_objects(numba_cuda):
    # Import-time uses (cuda.core.__version__, the names numba-cuda imports),
    # then numba-cuda's typing of cucore views and of DLPack objects, and its
    # compile-and-link path where NVVM and nvJitLink are found (no GPU needed).
    out = _run(NUMBA_PRELUDE, """
        from numba.cuda import _compat
        from numba.cuda.cudadrv import driver as drv, devicearray, nvrtc
        from numba.cuda import dispatcher
        from numba.cuda.typing.typeof import typeof
        assert _compat.CUDA_CORE_GE_1_0 and _compat.CUDA_CORE_GT_0_6
        assert drv.ExperimentalDevice is cucore.Device and drv.ExperimentalStream is cucore.Stream
        assert drv.GraphBuilder is cucore.graph.GraphBuilder and drv.Linker is cucore.Linker
        assert dispatcher.launch is cucore.launch and dispatcher.LaunchConfig is cucore.LaunchConfig
        assert devicearray.StridedMemoryView is cucore.utils.StridedMemoryView
        assert nvrtc.Program is cucore.Program

        # Launch streams: the default stream, a numba Stream (a cuda.bindings
        # CUstream inside) and a cucore Stream, as numba hands them to launch().
        from cuda.bindings import driver as cu
        st = drv._to_core_stream(0)
        assert isinstance(st, cucore.Stream) and int(st.handle) == 0, st
        st = drv._to_core_stream(drv.Stream(cu.CUstream(0x1234)))
        assert isinstance(st, cucore.Stream) and int(st.handle) == 0x1234, st
        assert drv._to_core_stream(st) is st and drv._stream_handle(st) == 0x1234
        lc = cucore.LaunchConfig(grid=(3, 2, 1), block=(128, 1, 1), shmem_size=0, is_cooperative=True)
        assert (lc.grid, lc.block, lc.shmem_size, lc.is_cooperative) == ((3, 2, 1), (128, 1, 1), 0, True)

        S = cucore.utils.StridedMemoryView
        a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
        print("C", typeof(S.from_any_interface(a, stream_ptr=-1)))
        print("F", typeof(S.from_any_interface(np.asfortranarray(a), stream_ptr=-1)))
        print("A", typeof(S.from_any_interface(a.transpose(1, 2, 0), stream_ptr=-1)))
        ro = a.copy(); ro.flags.writeable = False
        print("RO", typeof(S.from_any_interface(ro, stream_ptr=-1)))
        try:
            typeof(S.from_any_interface(a[:, :, :3], stream_ptr=-1))
        except ValueError as e:
            print("gap", "must be contiguous" in str(e))

        class DLPackOnly:  # an array library's tensor numba knows only by __dlpack__
            def __init__(self, a): self.a = a
            def __dlpack__(self, **kw): return self.a.__dlpack__(**kw)
            def __dlpack_device__(self): return self.a.__dlpack_device__()
        print("DL", typeof(DLPackOnly(np.ones((3, 5), dtype=np.int16))))

        sig = "void(float32[::1], float32, float32[::1], float32[::1])"
        def saxpy(out, a, x, y):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = a * x[i] + y[i]
        try:
            ptx, _ = cuda.compile_ptx(saxpy, sig, cc=(9, 0))
        except Exception as e:  # no libNVVM here
            print("no NVVM:", type(e).__name__, str(e).splitlines()[0])
        else:
            link = drv._Linker(max_registers=None, cc=(9, 0), lto=False)
            link.add_ptx(ptx.encode())
            cubin = link.complete()  # cucore's Linker, LinkerOptions and ObjectCode
            assert isinstance(cubin, cucore.ObjectCode) and cubin.code_type == "cubin", cubin
            assert len(cubin.code) > 0 and isinstance(link.info_log, str) and isinstance(link.error_log, str)
            print("linked", cubin.code_type)
    """)
    lines = out.splitlines()
    assert "C array(float32, 3d, C)" in lines, out
    assert "F array(float32, 3d, F)" in lines, out
    assert "A array(float32, 3d, A)" in lines, out
    assert "RO readonly array(float32, 3d, C)" in lines, out
    assert "gap True" in lines, out
    assert "DL array(int16, 2d, C)" in lines, out
    assert "linked cubin" in lines or any(ln.startswith("no NVVM:") for ln in lines), out


# ---- GPU ---------------------------------------------------------------------------


@pytest.mark.gpu
def test_context_handle_is_the_current_cucontext(device):
    # numba-cuda compares Device(n).context.handle with the CUcontext
    # cuCtxGetCurrent returns (`ctx.handle != ac.context_handle`) and refuses
    # to run ("non-primary CUDA context") when they differ: cuda.core's handle
    # is a cuda.bindings CUcontext, which compares by value with another.
    driver = pytest.importorskip("cuda.bindings.driver", reason="cuda.bindings is not installed")
    err, current = driver.cuCtxGetCurrent()
    assert err == driver.CUresult.CUDA_SUCCESS
    handle = device.context.handle
    assert int(handle) == int(current) != 0
    assert handle == current and not (handle != current), (type(handle), handle, current)


SAXPY_SETUP = """
dev = cucore.Device(0)
dev.set_current()
s = dev.create_stream()
rng = np.random.default_rng(26)
n = 10_007
# Integers below 2**11: a * x + y is exact in float32, with or without FMA.
x = rng.integers(0, 2048, n).astype(np.float32)
y = rng.integers(0, 2048, n).astype(np.float32)
a = np.float32(3)
expected = a * x + y
blocks = (n + 255) // 256
S = cucore.utils.StridedMemoryView

@cuda.jit
def saxpy(out, a, x, y):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]

def device_view(host):
    # cucore memory (the device's pool, ordered on s) holding a copy of host.
    v = S.from_buffer(dev.allocate(host.nbytes, stream=s), host.shape, dtype=host.dtype)
    v.copy_from(S.from_any_interface(host, stream_ptr=-1), s)
    s.sync()  # host may be a temporary
    return v

def zeros_view(n, dtype):
    return device_view(np.zeros(n, dtype=dtype))

def to_host(v):
    h = np.empty(v.shape, dtype=v.dtype)
    v.copy_to(S.from_any_interface(h, stream_ptr=-1), s)
    s.sync()
    return h

def check(name, got, want):
    assert got.shape == want.shape and got.dtype == want.dtype, (name, got.shape, got.dtype)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, f"{name}: {bad.size} of {want.size} elements differ, first at {bad[:5]}: {got[bad[:5]]} != {want[bad[:5]]}"
    print("ok", name)

class CAI:
    # Any library's device array over cucore memory, known to numba only by the
    # CUDA Array Interface (v3, with the stream the data is ready on).
    def __init__(self, view, stream):
        self.view = view  # keeps the memory alive
        self.__cuda_array_interface__ = {
            "shape": view.shape, "strides": None, "typestr": view.dtype.str,
            "data": (view.ptr, False), "version": 3, "stream": stream,
        }
"""


@pytest.mark.gpu
def test_numba_kernels_on_cucore_streams_over_cucore_memory(device, numba_cuda):
    out = _run(NUMBA_PRELUDE, SAXPY_SETUP, """
        vx, vy = device_view(x), device_view(y)

        # cucore views as kernel arguments, launched on a cucore Stream.
        vout = zeros_view(n, np.float32)
        saxpy[blocks, 256, s](vout, a, vx, vy)
        check("views on a cucore stream", to_host(vout), expected)
        # numba works in the device's primary context, the one cucore uses.
        assert int(cuda.current_context().handle) == int(dev.context.handle)

        # CUDA Array Interface objects over cucore memory, on numba's wrapper of
        # the cucore stream (cuda.external_stream, Stream.from_handle inside numba).
        vout = zeros_view(n, np.float32)
        ns = cuda.external_stream(int(s.handle))
        saxpy[blocks, 256, ns](CAI(vout, int(s.handle)), a, CAI(vx, int(s.handle)), CAI(vy, int(s.handle)))
        check("CUDA Array Interface on an external stream", to_host(vout), expected)

        # numba's own device arrays over cucore memory (cuda.as_cuda_array), on
        # the default stream.
        s.sync()
        vout = zeros_view(n, np.float32)
        s.sync()
        d_out = cuda.as_cuda_array(CAI(vout, None))
        saxpy[blocks, 256](d_out, a, cuda.as_cuda_array(CAI(vx, None)), cuda.as_cuda_array(CAI(vy, None)))
        check("as_cuda_array on the default stream", d_out.copy_to_host(), expected)

        # A cucore Buffer itself: numba types it as bytes (uint8[::1]).
        @cuda.jit
        def add_one(b):
            i = cuda.grid(1)
            if i < b.size:
                b[i] += 1
        raw = rng.integers(0, 256, 4099).astype(np.uint8)
        vb = device_view(raw)
        buf = vb.exporting_obj
        assert isinstance(buf, cucore.Buffer)
        add_one[(raw.size + 255) // 256, 256, s](buf)
        check("a cucore Buffer", to_host(vb), (raw + np.uint8(1)).astype(np.uint8))

        # Host arrays: numba allocates through Device.allocate on the launch's
        # stream, views the Buffer with StridedMemoryView.from_buffer and copies
        # back after the launch.
        for name, stream in (("cucore stream", s), ("default stream", 0)):
            h_out = np.zeros(n, dtype=np.float32)
            saxpy[blocks, 256, stream](h_out, a, x, y)
            s.sync(); cuda.synchronize()
            check(f"host arrays on the {name}", h_out, expected)
        # Empty host arrays (numba makes a size-0 Buffer with Buffer.from_handle(ptr=0, size=0, mr=...)).
        e = np.zeros(0, dtype=np.float32)
        saxpy[1, 32, s](e, a, e.copy(), e.copy())
        s.sync()
        print("ok empty arrays")

        # 2-D, F-ordered and strided device views keep their layout.
        @cuda.jit
        def scale2d(out, m, k):
            i, j = cuda.grid(2)
            if i < m.shape[0] and j < m.shape[1]:
                out[i, j] = m[i, j] * k
        m = rng.integers(0, 1000, (37, 61)).astype(np.int32)
        for order in "CF":
            hm = np.asarray(m, order=order)
            vm = S.from_buffer(dev.allocate(hm.nbytes, stream=s), hm.shape, strides=None if order == "C" else (1, 37),
                               dtype=hm.dtype)
            vm.copy_from(S.from_any_interface(hm, stream_ptr=-1), s)
            vo = S.from_buffer(dev.allocate(hm.nbytes, stream=s), hm.shape, dtype=hm.dtype)
            scale2d[(3, 4), (16, 16), s](vo, vm, np.int32(-7))
            check(f"2-D {order}-ordered view", to_host(vo), m * np.int32(-7))
        print("done")
    """)
    assert out.splitlines()[-1] == "done", out


@pytest.mark.gpu
def test_numba_kernel_attributes_and_forall(device, numba_cuda):
    # numba-cuda (cuda.core >= 1.0) reads Kernel.attributes.num_regs,
    # const_size_bytes, local_size_bytes, shared_size_bytes and
    # max_threads_per_block as properties; forall sizes its blocks from
    # max_threads_per_block.
    out = _run(NUMBA_PRELUDE, SAXPY_SETUP, """
        sig = "void(float32[::1], float32, float32[::1], float32[::1])"
        k = cuda.jit(sig)(saxpy.py_func)
        regs = k.get_regs_per_thread()
        maxt = k.get_max_threads_per_block()
        for name, v in (("regs", regs), ("const", k.get_const_mem_size()), ("shared", k.get_shared_mem_per_block()),
                        ("local", k.get_local_mem_per_thread()), ("max_threads", maxt)):
            assert type(v) is int, (name, type(v), v)
        assert 0 < regs <= 255 and 0 < maxt <= 1024, (regs, maxt)
        h_out = np.zeros(n, dtype=np.float32)
        k.forall(n)(h_out, a, x, y)
        cuda.synchronize()
        check("forall", h_out, expected)
        print("done")
    """)
    assert out.splitlines()[-1] == "done", out


@pytest.mark.gpu
def test_numba_kernel_captured_by_a_cucore_graph_builder(device, numba_cuda):
    # numba-cuda takes a GraphBuilder as a launch's stream (its .stream).
    out = _run(NUMBA_PRELUDE, SAXPY_SETUP, """
        vx, vy = device_view(x), device_view(y)
        vout = zeros_view(n, np.float32)
        saxpy[blocks, 256, s](zeros_view(n, np.float32), a, vx, vy)  # compiled and loaded outside the capture
        s.sync()
        gb = s.create_graph_builder()
        gb.begin_building()
        saxpy[blocks, 256, gb](vout, a, vx, vy)
        graph = gb.end_building().complete()
        check("nothing runs while capturing", to_host(vout), np.zeros(n, dtype=np.float32))
        graph.launch(s)
        check("the captured launch", to_host(vout), expected)
        print("done")
    """)
    assert out.splitlines()[-1] == "done", out


@pytest.mark.gpu
def test_numba_kernel_over_pytorch_tensors(device, numba_cuda):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA device")
    # numba-cuda reads tensors through StridedMemoryView.from_dlpack: with
    # stream_ptr=-1 to type them, with the launch stream's handle to launch.
    out = _run(NUMBA_PRELUDE, SAXPY_SETUP, """
        import torch
        tx = torch.from_numpy(x).cuda()
        ty = torch.from_numpy(y).cuda()
        tout = torch.zeros(n, dtype=torch.float32, device="cuda")
        saxpy[blocks, 256, s](tout, a, tx, ty)
        s.sync()
        check("torch tensors on a cucore stream", tout.cpu().numpy(), expected)
        # A non-contiguous tensor: every other element of a 2n vector.
        t2 = torch.zeros(2 * n, dtype=torch.float32, device="cuda")
        torch.cuda.synchronize()
        saxpy[blocks, 256, s](t2[::2], a, tx, ty)
        s.sync()
        got = t2.cpu().numpy()
        check("a strided torch tensor", got[::2], expected)
        check("the elements between", got[1::2], np.zeros(n, dtype=np.float32))
        print("done")
    """)
    assert out.splitlines()[-1] == "done", out


@pytest.mark.gpu
def test_numba_external_memory_manager_allocating_with_cucore(device, numba_cuda):
    # numba-cuda's External Memory Management plugin interface: every numba
    # allocation (cuda.to_device, device_array_like, ...) is cucore memory,
    # and the vector addition of numba-cuda's examples runs on it.
    out = _run(NUMBA_PRELUDE, """
        from cuda.bindings import driver as cu

        class CucoreMemoryManager(cuda.GetIpcHandleMixin, cuda.HostOnlyCUDAMemoryManager):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                self.dev = cucore.Device(0)
                self.stream = self.dev.default_stream
                self.live = {}  # pointer -> the cucore Buffer behind it

            def initialize(self):  # called on every use of the context
                pass

            def memalloc(self, size):
                buf = self.dev.allocate(size, stream=self.stream)
                self.stream.sync()  # numba copies with the synchronous driver calls
                ptr = int(buf.handle)
                self.live[ptr] = buf

                def free(live=self.live, ptr=ptr):
                    live.pop(ptr).close()
                return cuda.MemoryPointer(self.context, cu.CUdeviceptr(ptr), size, finalizer=free)

            def get_memory_info(self):
                err, free, total = cu.cuMemGetInfo()
                assert err == cu.CUresult.CUDA_SUCCESS, err
                return cuda.MemoryInfo(free=free, total=total)

            @property
            def interface_version(self):
                return 1

        cuda.set_memory_manager(CucoreMemoryManager)

        @cuda.jit
        def f(a, b, c):
            tid = cuda.grid(1)
            if tid < len(c):
                c[tid] = a[tid] + b[tid]

        rng = np.random.default_rng(1)
        N = 100_000
        ha, hb = rng.random(N), rng.random(N)
        a = cuda.to_device(ha)
        b = cuda.to_device(hb)
        c = cuda.device_array_like(a)
        mm = cuda.current_context().memory_manager
        assert isinstance(mm, CucoreMemoryManager) and len(mm.live) >= 3, mm.live
        nthreads = 256
        f[(N // nthreads) + 1, nthreads](a, b, c)
        assert np.array_equal(c.copy_to_host(), ha + hb)
        c[:] = 0  # numba's own assignment kernel
        assert not c.copy_to_host().any()
        del a, b, c
        import gc; gc.collect()
        assert len(mm.live) == 0, mm.live  # each MemoryPointer's finalizer gave its Buffer back
        print("done")
    """)
    assert out.splitlines()[-1] == "done", out


# numba-cuda's documented examples (numba/cuda/tests/doc_examples: unittest
# cases and plain test functions, imported by module name); these must pass,
# the others may skip (e.g. without cffi or the cudadevrt library).
DOC_EXAMPLES = ("cg", "cpointer", "cpu_gpu_compat", "ffi", "globals", "laplace", "matmul", "montecarlo", "random",
                "reduction", "sessionize", "ufunc", "vecadd")
MUST_PASS = ("test_ex_vecadd", "test_matmul", "test_ex_reduction", "test_ex_globals_constant_capture",
             "test_ex_cuda_ufunc_call")

DOC_EXAMPLES_SCRIPT = f"""
import importlib, inspect, traceback, types, unittest
import pytest

# numba.cuda.testing imports filecheck (numba-cuda's test extra) for FileCheck
# assertions, which the documented examples never make: stand-ins when absent.
try:
    import filecheck  # noqa: F401
except ImportError:
    for mod, names in (("filecheck", ()), ("filecheck.matcher", ("Matcher",)), ("filecheck.options", ("Options",)),
                       ("filecheck.parser", ("Parser", "pattern_for_opts")), ("filecheck.finput", ("FInput",))):
        sys.modules[mod] = types.ModuleType(mod)
        for n in names:
            setattr(sys.modules[mod], n, None)

outcomes = {{}}

class Result(unittest.TextTestResult):
    def addSuccess(self, test):
        super().addSuccess(test); outcomes[test.id().split(".")[-1]] = "passed"
    def addFailure(self, test, err):
        super().addFailure(test, err); outcomes[test.id().split(".")[-1]] = "failed"
    def addError(self, test, err):
        super().addError(test, err); outcomes[test.id().split(".")[-1]] = "failed"
    def addSkip(self, test, reason):
        super().addSkip(test, reason); outcomes[test.id().split(".")[-1]] = "skipped: " + reason

for m in {DOC_EXAMPLES!r}:
    try:
        mod = importlib.import_module("numba.cuda.tests.doc_examples.test_" + m)
    except Exception:  # some decorators ask numba for the device at import
        traceback.print_exc(file=sys.stdout)
        outcomes["import test_" + m] = "failed"
        continue
    unittest.TextTestRunner(stream=sys.stdout, verbosity=2, resultclass=Result).run(
        unittest.defaultTestLoader.loadTestsFromModule(mod))
    for name, fn in vars(mod).items():
        if name.startswith("test_") and inspect.isfunction(fn):
            try:
                fn()
                outcomes[name] = "passed"
            except (unittest.SkipTest, pytest.skip.Exception) as e:
                outcomes[name] = f"skipped: {{e}}"
            except Exception:
                traceback.print_exc(file=sys.stdout)
                outcomes[name] = "failed"
for name, outcome in sorted(outcomes.items()):
    print("outcome", name, outcome)
failed = sorted(n for n, o in outcomes.items() if o == "failed")
missing = [t for t in {MUST_PASS!r} if outcomes.get(t) != "passed"]
print("failed:", failed)
print("must pass but did not:", missing)
sys.exit(0 if not failed and not missing else 1)
"""


@pytest.mark.gpu
def test_numba_documented_examples(device, numba_cuda):
    out = _run(NUMBA_PRELUDE, DOC_EXAMPLES_SCRIPT)
    assert "failed: []" in out and "must pass but did not: []" in out, out
