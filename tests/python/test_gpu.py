"""GPU tests: skipped with a reason when no GPU is usable, failed instead under
CUCORE_REQUIRE_GPU=1. The mission's four example programs, devices, streams,
events, memory, launch (and its argument validation), threads, interop."""
import ctypes
import gc
import os
import pathlib
import subprocess
import sys
import threading
import weakref

import pytest

import cucore
from cucore import (
    Buffer,
    Device,
    DeviceMemoryResource,
    DeviceMemoryResourceOptions,
    EventOptions,
    LaunchConfig,
    ObjectCode,
    Program,
    ProgramOptions,
    Stream,
    StreamOptions,
    launch,
)
from cucore.utils import StridedMemoryView

from conftest import SAXPY_SRC, TEMPLATE_SRC, require_gpu

np = pytest.importorskip("numpy")
pytestmark = pytest.mark.gpu

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "python"


@pytest.fixture(scope="module")
def saxpy_cubin():
    require_gpu()
    d = Device(0)
    d.set_current()
    arch = f"sm_{d.compute_capability.major}{d.compute_capability.minor}"
    return Program(SAXPY_SRC, "c++", ProgramOptions(arch=arch)).compile("cubin").code


@pytest.fixture(scope="module")
def saxpy(saxpy_cubin):
    return ObjectCode.from_cubin(saxpy_cubin).get_kernel("saxpy")


def run_example(name):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(cucore.__file__)), env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


# ---- the mission's example programs --------------------------------------------------
def test_example1_cached_compile(gpu):
    out = run_example("example1_cached_compile.py")
    assert "saxpy" in out


def test_example2_green_contexts(gpu):
    pytest.importorskip("cuda.bindings")
    out = run_example("example2_green_contexts.py")
    assert "result=7.0" in out and "result=22.0" in out


def test_example3_nvml(gpu):
    if not hasattr(cucore, "system"):
        pytest.skip("NVML not implemented yet")
    out = run_example("example3_nvml.py")
    assert "Devices:" in out and "Memory:" in out


def test_example4_saxpy(gpu):
    pytest.importorskip("cuda.bindings")
    out = run_example("example4_saxpy.py")
    assert "SAXPY OK: 7.0" in out


# ---- Device ----------------------------------------------------------------------------
def test_device_singleton_per_thread(device):
    assert Device(0) is Device(0)
    assert Device() is Device(0)
    assert Device(device_id=0) is Device(0)
    assert Device(Device(0)) is Device(0)
    other = {}
    t = threading.Thread(target=lambda: other.setdefault("d", Device(0)))
    t.start()
    t.join()
    assert other["d"] is not Device(0) and other["d"] == Device(0)
    with pytest.raises(ValueError):
        Device(Device.count() + 7)
    with pytest.raises((ValueError, TypeError)):
        Device(-1)


def test_device_facts(device):
    cc = device.compute_capability
    assert cc.major >= 3 and (cc.major, cc.minor) == tuple(cc)
    assert device.arch == f"{cc.major}{cc.minor}"
    assert device.properties.multiprocessor_count > 0
    assert device.properties.warp_size == 32
    assert isinstance(device.properties.cooperative_launch, bool)
    assert len(device.uuid) == 36 and device.uuid.count("-") == 4
    assert ":" in device.pci_bus_id
    assert device.name
    assert device.device_id == 0 and int(device) == 0
    assert device.context.handle != 0
    assert isinstance(device.memory_resource, DeviceMemoryResource)
    assert device.default_stream is cucore.LEGACY_DEFAULT_STREAM
    assert len(Device.get_all_devices()) == Device.count()
    device.sync()


# ---- streams and events -------------------------------------------------------------------
def test_streams_and_events(device):
    s = device.create_stream()
    assert s.handle != 0 and s.is_nonblocking
    assert s.__cuda_stream__() == (0, s.handle)
    assert s.device is device
    s2 = device.create_stream(options=StreamOptions(nonblocking=False))
    assert not s2.is_nonblocking
    e1 = s.record(options=EventOptions(timing_enabled=True))
    e2 = device.create_event(EventOptions(timing_enabled=True))
    s.record(e2)
    s.sync()
    ms = e2 - e1
    assert isinstance(ms, float) and ms >= 0
    assert e2.is_done
    s2.wait(e2)
    s2.wait(s)
    wrapped = Stream.from_handle(s.handle)
    assert wrapped == s
    foreign = device.create_stream(s)  # any object with __cuda_stream__
    assert foreign.handle == s.handle
    s.close()
    assert s.is_closed
    s.close()  # idempotent
    s2.close()


def test_event_without_timing_raises(device):
    s = device.create_stream()
    a, b = s.record(), s.record()
    s.sync()
    with pytest.raises(RuntimeError, match="timing enabled"):  # cuda.core's type and text
        b - a


# ---- memory ----------------------------------------------------------------------------------
def test_allocate_copy_round_trip(device):
    s = device.create_stream()
    rng = np.random.default_rng(1)
    host = rng.standard_normal(1 << 16).astype(np.float32)
    buf = device.allocate(host.nbytes, stream=s)
    assert buf.size == host.nbytes and buf.device_id == 0
    assert buf.is_device_accessible and not buf.is_host_accessible
    buf.copy_from(host, stream=s)
    buf2 = buf.copy_to(stream=s)
    out = np.empty_like(host)
    buf2.copy_to(out, stream=s)
    s.sync()
    assert np.array_equal(out, host)
    buf.fill(7, stream=s)
    buf.copy_to(out, stream=s)
    s.sync()
    assert (out.view(np.uint8) == 7).all()
    buf.fill(np.uint32(0x3F800000), stream=s)
    buf.copy_to(out, stream=s)
    s.sync()
    assert (out == 1.0).all()
    with pytest.raises(ValueError):
        buf.copy_from(np.zeros(3, dtype=np.float32), stream=s)
    buf.close()
    buf.close()
    assert buf.is_closed
    buf2.close(s)


def test_memory_resources(device):
    s = device.create_stream()
    mr = DeviceMemoryResource(0, DeviceMemoryResourceOptions())
    with mr.allocate(1 << 20, stream=s) as b:
        assert b.memory_resource is mr
        assert b.handle != 0
    assert b.is_closed
    assert DeviceMemoryResource(device).device_id == 0
    for r in (cucore.LegacyPinnedMemoryResource(), cucore.ManagedMemoryResource()):
        b = r.allocate(4096, stream=s)
        assert b.is_host_accessible
        b.close()
    try:
        pinned = cucore.PinnedMemoryResource()
    except cucore.FeatureUnavailableError:
        pinned = None
    if pinned is not None:
        b = pinned.allocate(4096, stream=s)
        assert b.is_host_accessible and b.is_device_accessible
        b.close()
    device.memory_resource = mr
    assert device.memory_resource is mr
    device.allocate(64, stream=s).close()
    device.memory_resource = DeviceMemoryResource(0)
    s.sync()


def test_out_of_memory_then_next_allocation_works(device):
    s = device.create_stream()
    mr = DeviceMemoryResource(0, DeviceMemoryResourceOptions())
    with pytest.raises(cucore.CudaError) as ei:
        mr.allocate(1 << 50, stream=s)
    assert "OUT_OF_MEMORY" in ei.value.name
    mr.allocate(1 << 20, stream=s).close()


def test_buffer_from_handle(device):
    s = device.create_stream()
    owner = device.allocate(256, stream=s)
    view = Buffer.from_handle(owner.handle, 256, owner=owner)
    assert view.handle == owner.handle and view.owner is owner
    view.close()  # not freed: not owned
    owner.close()


# ---- launch ------------------------------------------------------------------------------------
def run_saxpy(kernel, stream, n=100_000, alpha=2.5, pack="buffers"):
    rng = np.random.default_rng(2)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    dev = Device()
    bx, by, bo = (dev.allocate(x.nbytes, stream=stream) for _ in range(3))
    bx.copy_from(x, stream=stream)
    by.copy_from(y, stream=stream)
    cfg = LaunchConfig(grid=(n + 255) // 256, block=256)
    if pack == "buffers":
        launch(stream, cfg, kernel, np.float32(alpha), bx, by, bo, n)
    elif pack == "handles":
        launch(stream, cfg, kernel, ctypes.c_float(alpha), bx.handle, by.handle, bo.handle, ctypes.c_int(n))
    elif pack == "mixed":  # a Buffer, a Python int and a numpy.uint64 for the three pointers
        launch(stream, cfg, kernel, np.float32(alpha), bx, int(by.handle), np.uint64(bo.handle), n)
    else:
        launch(stream, cfg, kernel, np.float32(alpha), bx, by, bo, np.int32(n))
    out = np.empty_like(x)
    bo.copy_to(out, stream=stream)
    stream.sync()
    for b in (bx, by, bo):
        b.close()
    assert np.allclose(out, np.float32(alpha) * x + y, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("pack", ["buffers", "handles", "numpy", "mixed"])
def test_launch_saxpy(device, saxpy, pack):
    run_saxpy(saxpy, device.create_stream(), pack=pack)


def test_kernel_info(device, saxpy):
    assert saxpy.num_arguments == 5
    info = saxpy.arguments_info
    assert [p.size for p in info] == [4, 8, 8, 8, 4]
    # cuda.core 1.2: each attribute is a method taking the device (default: the current one).
    assert saxpy.attributes.num_regs() > 0
    assert saxpy.attributes.num_regs(0) == saxpy.attributes.num_regs(device)
    assert saxpy.attributes[0].max_threads_per_block() > 0
    assert saxpy.occupancy.max_active_blocks_per_multiprocessor(256, 0) > 0
    r = saxpy.occupancy.max_potential_block_size(0, 0)
    assert r.max_block_size > 0


def test_launch_argument_validation(device, saxpy):
    s = device.create_stream()
    buf = device.allocate(1024, stream=s)
    cfg = LaunchConfig(grid=1, block=32)
    with pytest.raises(ValueError, match="saxpy"):
        launch(s, cfg, saxpy, np.float32(1), buf, buf, buf)  # too few
    with pytest.raises(ValueError, match="saxpy"):
        launch(s, cfg, saxpy, np.float32(1), buf, buf, buf, 4, 5)  # too many
    with pytest.raises(ValueError, match="0"):
        launch(s, cfg, saxpy, 1.0, buf, buf, buf, 4)  # a Python float is a double: 8 bytes for a float
    with pytest.raises(ValueError):
        launch(s, cfg, saxpy, np.float32(1), buf, buf, buf, 1 << 40)  # does not fit an int
    with pytest.raises(ValueError):
        launch(s, cfg, saxpy, np.float32(1), buf, buf, buf, np.int64(4))  # 8 bytes for an int
    with pytest.raises(TypeError):
        launch(s, cfg, saxpy, np.float32(1), buf, buf, buf, "4")
    with pytest.raises(TypeError):
        launch(42, cfg, saxpy)
    buf.close()
    with pytest.raises(ValueError):
        launch(s, cfg, saxpy, np.float32(1), buf, buf, buf, 4)  # closed buffer
    s.sync()


def test_launch_refuses_what_it_cannot_pack_and_takes_any_stream_protocol(device, saxpy):
    """Arguments no rule packs are TypeError naming the argument (numpy arrays, numpy strings and
    dates, objects); a stream given through __cuda_stream__ (method or attribute) launches; a
    malformed protocol answer is TypeError; nothing was launched by the refused calls."""
    rng = np.random.default_rng(41)
    n = 1000
    x = rng.standard_normal(n).astype(np.float32)
    s = device.create_stream()
    bx, bo = device.allocate(x.nbytes, stream=s), device.allocate(x.nbytes, stream=s)
    bx.copy_from(x, stream=s)
    bo.fill(0, stream=s)
    cfg = LaunchConfig(grid=(n + 255) // 256, block=256)
    for bad in (np.zeros(1, np.float32), np.str_("4"), np.datetime64(4, "s"), object()):
        with pytest.raises(TypeError, match="saxpy: argument 4"):
            launch(s, cfg, saxpy, np.float32(1), bx, bx, bo, bad)

    class Method:
        def __cuda_stream__(self):
            return (0, s.handle)

    class Attribute:
        __cuda_stream__ = (0, s.handle)

    class BadVersion:
        def __cuda_stream__(self):
            return (1, s.handle)

    class BadLength:
        def __cuda_stream__(self):
            return (0, s.handle, 0)

    for bad in (BadVersion(), BadLength(), object()):
        with pytest.raises(TypeError):
            launch(bad, cfg, saxpy, np.float32(1), bx, bx, bo, n)
    out = np.empty_like(x)
    bo.copy_to(out, stream=s)
    s.sync()
    assert (out == 0).all()  # no refused call launched
    alphas = rng.standard_normal(2).astype(np.float32)
    launch(Method(), cfg, saxpy, alphas[0], bx, bx, bo, n)  # out = (a0 + 1) x
    launch(Attribute(), cfg, saxpy, alphas[1], bx, bo, bo, n)  # out = a1 x + (a0 + 1) x
    bo.copy_to(out, stream=s)
    s.sync()
    assert np.allclose(out, alphas[1] * x + (alphas[0] * x + x), rtol=1e-5, atol=1e-5)


def test_template_kernel(device):
    arch = f"sm_{device.arch}"
    obj = Program(TEMPLATE_SRC, "c++", ProgramOptions(arch=arch)).compile("cubin", name_expressions=["scale<float>"])
    k = obj.get_kernel("scale<float>")
    s = device.create_stream()
    host = np.arange(64, dtype=np.float32)
    b = device.allocate(host.nbytes, stream=s)
    b.copy_from(host, stream=s)
    launch(s, LaunchConfig(grid=1, block=64), k, b, np.float32(3), 64)
    out = np.empty_like(host)
    b.copy_to(out, stream=s)
    s.sync()
    assert np.array_equal(out, host * 3)


def test_threads_launch_on_own_streams(device, saxpy):
    errors = []

    def work():
        try:
            Device(0).set_current()
            s = Device(0).create_stream()
            for _ in range(5):
                run_saxpy(saxpy, s, n=50_000)
            s.close()
        except Exception as e:  # pragma: no cover
            errors.append(e)

    ts = [threading.Thread(target=work) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors


def test_buffer_dlpack_capsules_hold_the_buffer(device):
    """Each exported tensor holds its Buffer (one reference, dropped when the tensor goes, consumed
    or not); a consumer's tensor keeps the memory readable after the Buffer object is gone."""
    import gc
    import sys

    torch = pytest.importorskip("torch")
    s = device.create_stream()
    rng = np.random.default_rng(43)
    host = rng.integers(0, 256, size=4096, dtype=np.uint8)
    b = device.allocate(host.size, stream=s)
    b.copy_from(host, stream=s)
    s.sync()
    before = sys.getrefcount(b)
    caps = [b.__dlpack__(max_version=(1, 0)) for _ in range(10)] + [b.__dlpack__() for _ in range(10)]
    held = sys.getrefcount(b)
    del caps
    after = sys.getrefcount(b)
    assert held == before + 20 and after == before
    assert b.__dlpack_device__() == (2, device.device_id)
    t = torch.from_dlpack(b)
    assert t.data_ptr() == b.handle and t.dtype == torch.int8 and t.shape == (host.size,)
    del b
    gc.collect()
    assert np.array_equal(t.cpu().numpy().view(np.uint8), host)


def test_buffer_dlpack(device):
    s = device.create_stream()
    b = device.allocate(64, stream=s)
    assert b.__dlpack_device__() == (2, 0)
    cap = b.__dlpack__()
    assert type(cap).__name__ == "PyCapsule"
    v = StridedMemoryView(b, -1)
    assert v.ptr == b.handle and v.shape == (64,) and v.is_device_accessible and v.device_id == 0
    b.close()


# ---- interop -------------------------------------------------------------------------------------
def test_torch_interop(device, saxpy):
    torch = pytest.importorskip("torch")
    n = 10_000
    x = torch.rand(n, device="cuda")
    y = torch.rand(n, device="cuda")
    out = torch.zeros(n, device="cuda")
    vx, vy, vo = (StridedMemoryView(t, -1) for t in (x, y, out))
    assert vo.ptr == out.data_ptr() and vo.shape == (n,) and vo.strides is None  # C-contiguous, as cuda.core
    assert vo.dtype == np.float32 and vo.device_id == 0 and vo.exporting_obj is out
    ts = torch.cuda.current_stream()
    s = Stream.from_handle(ts.cuda_stream)
    launch(s, LaunchConfig(grid=(n + 255) // 256, block=256), saxpy, np.float32(2), vx.ptr, vy.ptr, vo.ptr, n)
    torch.cuda.synchronize()
    assert torch.allclose(out, 2 * x + y)
    if hasattr(ts, "__cuda_stream__"):
        assert device.create_stream(ts).handle == ts.cuda_stream
    # a view of a non-contiguous tensor
    m = torch.zeros(8, 6, device="cuda")[:, ::2]
    vm = StridedMemoryView(m, -1)
    assert vm.shape == (8, 3) and vm.strides == (6, 2)
    # Buffer -> torch through DLPack, zero copy
    b = device.allocate(16, stream=s)
    t = torch.from_dlpack(b)
    assert t.data_ptr() == b.handle and t.numel() == 16


def test_cupy_interop(device, saxpy):
    cp = pytest.importorskip("cupy")
    n = 10_000
    x = cp.random.rand(n, dtype=cp.float32)
    y = cp.random.rand(n, dtype=cp.float32)
    out = cp.zeros(n, dtype=cp.float32)
    vx, vy, vo = (StridedMemoryView(a, -1) for a in (x, y, out))
    assert vo.ptr == out.data.ptr
    cs = cp.cuda.get_current_stream()
    s = device.create_stream(cs) if hasattr(cs, "__cuda_stream__") else Stream.from_handle(cs.ptr)
    launch(s, LaunchConfig(grid=(n + 255) // 256, block=256), saxpy, np.float32(3), vx.ptr, vy.ptr, vo, n)
    cs.synchronize()
    assert cp.allclose(out, 3 * x + y)
    v2 = StridedMemoryView.from_cuda_array_interface(out, -1)
    assert v2.ptr == out.data.ptr and v2.device_id == 0


# ---- ownership: any drop order, many cycles, foreign owners dying first --------------------------
def _cu_mem_free():
    """Free device memory, from the driver (cuMemGetInfo in the current context)."""
    lib = ctypes.CDLL("libcuda.so.1")
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    assert lib.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 0
    return free.value


def _collect():
    # One full collection: with PyTorch, CuPy and numba loaded one costs tens of
    # milliseconds, so the drop-order test below does a bounded number of them.
    gc.collect()


def _saxpy_set(device, saxpy_code, host):
    """A stream, a pool of its own, two buffers freed on the stream, an event and a loaded kernel, used once."""
    s = device.create_stream()
    pool = DeviceMemoryResource(0, DeviceMemoryResourceOptions())
    own = pool.allocate(host.nbytes, stream=s)
    shared = device.allocate(host.nbytes, stream=s)
    own.copy_from(host, stream=s)
    code = ObjectCode.from_cubin(saxpy_code)
    kernel = code.get_kernel("saxpy")
    launch(s, LaunchConfig(grid=1, block=host.size), kernel, np.float32(1), own, own, shared, np.int32(host.size))
    event = s.record()
    s.sync()
    return {"stream": s, "pool": pool, "own": own, "shared": shared, "event": event, "code": code, "kernel": kernel}


def test_objects_dropped_in_random_orders(device, saxpy_cubin):
    rng = np.random.default_rng(21)
    host = rng.standard_normal(256).astype(np.float32)
    names = ["stream", "pool", "own", "shared", "event", "code", "kernel"]
    for round_ in range(40):  # 40 random orders of the 5040, a collection after every drop
        objs = _saxpy_set(device, saxpy_cubin, host)
        for name in rng.permutation(names):
            del objs[name]
            _collect()
            # What is left still works, on whatever stream is left.
            s = objs.get("stream", cucore.LEGACY_DEFAULT_STREAM)
            if "event" in objs:
                s.wait(objs["event"])
            if {"kernel", "own", "shared"} <= objs.keys():
                launch(s, LaunchConfig(grid=1, block=256), objs["kernel"], np.float32(1), objs["own"], objs["own"],
                       objs["shared"], np.int32(256))
            if "shared" in objs:
                out = np.empty_like(host)
                objs["shared"].copy_to(out, stream=s)
                s.sync()
                assert np.array_equal(out, 2 * host), (round_, name)
    device.sync()


def test_hundred_thousand_cycles_return_to_the_start(device, saxpy_cubin):
    """Each kind of object made, used and dropped 100 000 times (CUCORE_OWNERSHIP_CYCLES
    overrides; loading a module costs ~0.2 ms, so modules and kernels cycle a tenth as
    often), after which device memory, the default pool and Python's heap are back
    where they started. The C++ suite counts the driver's live handles the same way."""
    cycles = int(os.environ.get("CUCORE_OWNERSHIP_CYCLES", "100000"))
    rng = np.random.default_rng(22)
    host = rng.standard_normal(256).astype(np.float32)
    s = device.create_stream()
    dst = device.allocate(host.nbytes, stream=s)

    def stream_cycle(i):
        t = device.create_stream()
        t.wait(s)
        if i % 1000 == 0:
            t.sync()

    def event_cycle(i):
        e = s.record()
        if i % 1000 == 0:
            e.sync()

    def buffer_cycle(i):
        b = device.allocate(host.nbytes, stream=s)
        if i % 1000 == 0:  # used: data in and out through it
            b.copy_from(host, stream=s)
            dst.copy_from(b, stream=s)
            out = np.empty_like(host)
            dst.copy_to(out, stream=s)
            s.sync()
            assert np.array_equal(out, host), i

    def pool_cycle(i):
        pool = DeviceMemoryResource(0, DeviceMemoryResourceOptions())
        b = pool.allocate(host.nbytes, stream=s)
        if i % 1000 == 0:
            b.copy_from(host, stream=s)
        del b
        if i % 100 == 0:
            s.sync()  # destroyed pools give their memory back once their frees are done

    def module_cycle(i):
        kernel = ObjectCode.from_cubin(saxpy_cubin).get_kernel("saxpy")
        if i % 100 == 0:  # used: out = 1 * x + x
            b = device.allocate(host.nbytes, stream=s)
            b.copy_from(host, stream=s)
            launch(s, LaunchConfig(grid=1, block=host.size), kernel, np.float32(1), b, b, dst, np.int32(host.size))
            out = np.empty_like(host)
            dst.copy_to(out, stream=s)
            s.sync()
            assert np.array_equal(out, 2 * host), i

    kinds = [(stream_cycle, cycles), (event_cycle, cycles), (buffer_cycle, cycles), (pool_cycle, cycles),
             (module_cycle, max(1, cycles // 10))]
    for fn, _ in kinds:  # warm-up: pools, the driver and Python's allocator settle
        for i in range(1, 201):
            fn(i)
    _collect()
    device.sync()
    pool0 = device.memory_resource.attributes
    free0, blocks0 = _cu_mem_free(), sys.getallocatedblocks()
    for fn, n in kinds:
        for i in range(1, n + 1):
            fn(i)
        device.sync()
    _collect()
    device.sync()
    pool1 = device.memory_resource.attributes
    free1, blocks1 = _cu_mem_free(), sys.getallocatedblocks()
    assert pool1["used_mem_current"] == pool0["used_mem_current"]
    assert pool1["reserved_mem_current"] == pool0["reserved_mem_current"]
    assert free0 - free1 <= 4 << 20, f"device memory free went from {free0} to {free1} after {cycles} cycles"
    assert blocks1 - blocks0 < 2000, f"Python objects left behind: {blocks1 - blocks0} blocks after {cycles} cycles"


class _StreamAdapter:
    """__cuda_stream__ for a library stream that lacks it, holding the stream."""

    def __init__(self, stream, handle):
        self.stream, self.handle = stream, handle

    def __cuda_stream__(self):
        return (0, self.handle)


def _adopt(stream, handle):
    """A cucore Stream over another library's stream, and a weak reference to what it keeps alive."""
    owner = stream
    if not hasattr(stream, "__cuda_stream__"):
        owner = _StreamAdapter(stream, handle)
    try:
        alive = weakref.ref(owner)
    except TypeError:  # a stream type without weak references: watch an adapter that holds it
        owner = _StreamAdapter(stream, handle)
        alive = weakref.ref(owner)
    return Stream(owner), alive


def _double_through(device, saxpy, s, view, holder, expect):
    """out = 2 * the viewed array, on `s`; both it and `holder`'s bytes checked. Returns out (freed on `s`)."""
    n = expect.size
    out = device.allocate(n * 4, stream=s)  # freed on `s`: the buffer holds that stream
    launch(s, LaunchConfig(grid=(n + 255) // 256, block=256), saxpy, np.float32(1), view.ptr, view.ptr, out, n)
    got, back = np.empty(n, np.float32), np.empty(n, np.float32)
    out.copy_to(got, stream=s)
    holder.copy_to(back, stream=s)
    s.sync()
    assert np.array_equal(got, expect)
    assert np.array_equal(back * 2, expect)
    return out


def test_torch_stream_and_tensors_outlive_their_owners(device, saxpy):
    torch = pytest.importorskip("torch")
    n = 4096
    ts = torch.cuda.Stream()
    s, alive = _adopt(ts, ts.cuda_stream)
    assert s.handle == ts.cuda_stream
    del ts
    _collect()
    assert alive() is not None, "the Stream keeps the PyTorch stream"
    x = torch.rand(n, device="cuda")
    expect = x.cpu().numpy() * 2
    vx = StridedMemoryView(x, s.handle)  # s waits for PyTorch's current stream
    tensor_alive = weakref.ref(x)
    holder = Buffer.from_handle(x.data_ptr(), x.numel() * 4, owner=x)
    del x
    _collect()
    assert tensor_alive() is not None, "the view and the buffer keep the tensor"
    out = _double_through(device, saxpy, s, vx, holder, expect)
    del vx, holder
    _collect()
    assert tensor_alive() is None, "released once the view and the buffer are gone"
    del s
    _collect()
    assert alive() is not None, "the buffer freed on it still holds the stream"
    out.close()
    _collect()
    assert alive() is None


def test_torch_tensor_read_through_the_exchange_api(device):
    torch = pytest.importorskip("torch")
    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        pytest.skip("this PyTorch has no DLPack C exchange API (PyTorch 2.10+ has it)")

    class NoDlpack(torch.Tensor):
        def __dlpack__(self, *args, **kwargs):
            raise AssertionError("__dlpack__ was called: the C exchange API was not used")

    base = torch.arange(24, dtype=torch.float32, device="cuda").reshape(4, 6)
    t = base[:, 1::2].as_subclass(NoDlpack)
    consumer = device.create_stream()  # kept alive: the view orders it after PyTorch's current stream
    v = StridedMemoryView(t, consumer.handle)
    assert v.ptr == t.data_ptr() and v.shape == (4, 3) and v.strides == (6, 2)
    assert v.dtype == np.float32 and v.device_id == 0 and v.is_device_accessible and v.exporting_obj is t
    v2 = StridedMemoryView.from_dlpack(t, -1)
    assert v2.ptr == v.ptr and v2.shape == v.shape


def test_cupy_stream_and_arrays_outlive_their_owners(device, saxpy):
    cp = pytest.importorskip("cupy")
    n = 4096
    cs = cp.cuda.Stream(non_blocking=True)
    s, alive = _adopt(cs, cs.ptr)
    assert s.handle == cs.ptr
    del cs
    _collect()
    assert alive() is not None, "the Stream keeps the CuPy stream"
    x = cp.random.rand(n, dtype=cp.float32)
    expect = cp.asnumpy(x) * 2
    vx = StridedMemoryView(x, -1)
    holder = Buffer.from_handle(x.data.ptr, n * 4, owner=x)
    del x
    _collect()
    out = _double_through(device, saxpy, s, vx, holder, expect)
    del vx, holder, s
    _collect()
    assert alive() is not None
    out.close()
    _collect()
    assert alive() is None


def test_closed_objects_raise_closed_error(device, saxpy):
    s = device.create_stream()
    b = device.allocate(1024, stream=s)
    e = s.record()
    s.close()
    with pytest.raises(cucore.ClosedError):
        launch(s, LaunchConfig(grid=1, block=32), saxpy, np.float32(1), b, b, b, 4)
    with pytest.raises(RuntimeError):  # cuda.core's type for a closed object
        s.sync()
    b.close(cucore.LEGACY_DEFAULT_STREAM)
    with pytest.raises(cucore.ClosedError):
        b.fill(1, stream=device.create_stream())
    e.close()
    with pytest.raises(cucore.ClosedError):
        e.sync()
    with pytest.raises(cucore.ClosedError):
        device.create_stream().wait(e)
    device.sync()


def test_memory_resource_identity_and_default_stream_buffers(device):
    mr = DeviceMemoryResource(0, DeviceMemoryResourceOptions())
    b = mr.allocate(256)  # on the default stream
    assert b.memory_resource is mr
    b2 = b.copy_to(stream=device.create_stream())  # the new buffer keeps that stream
    assert b2.memory_resource is mr
    handle = mr.handle
    del mr
    _collect()
    # The pool lives on in the buffers (C++ state); the Python object does not.
    face = b.memory_resource
    assert isinstance(face, cucore.MemoryResource) and face == b2.memory_resource
    assert face.device_id == 0 and face.is_device_accessible
    b.fill(5, stream=cucore.LEGACY_DEFAULT_STREAM)
    out = np.zeros(256, np.uint8)
    b.copy_to(out, stream=cucore.LEGACY_DEFAULT_STREAM)
    cucore.LEGACY_DEFAULT_STREAM.sync()
    assert (out == 5).all()
    b.close()
    b2.close()
    assert handle != 0
    device.sync()


_ECHO_SRC = r"""
extern "C" __global__ void echo(signed char a, unsigned short b, int c, unsigned long long d, unsigned short e,
                                double f, bool g, float h, long long i, unsigned char* out) {
  unsigned char* p = out;
  memcpy(p, &a, 1); p += 1;
  memcpy(p, &b, 2); p += 2;
  memcpy(p, &c, 4); p += 4;
  memcpy(p, &d, 8); p += 8;
  memcpy(p, &e, 2); p += 2;
  memcpy(p, &f, 8); p += 8;
  memcpy(p, &g, 1); p += 1;
  memcpy(p, &h, 4); p += 4;
  memcpy(p, &i, 8);
}
"""


def test_numpy_scalars_reach_the_kernel_bit_for_bit(device):
    """Every numpy scalar kind launch packs (int8, uint16, int32, uint64, float16, float64,
    bool, float32, int64) arrives in the kernel with exactly numpy's bytes."""
    arch = f"sm_{device.compute_capability.major}{device.compute_capability.minor}"
    echo = Program(_ECHO_SRC, "c++", ProgramOptions(arch=arch)).compile("cubin").get_kernel("echo")
    rng = np.random.default_rng(31)
    s = device.create_stream()
    out = device.allocate(38, stream=s)
    for _ in range(20):
        args = [np.int8(rng.integers(-128, 128)), np.uint16(rng.integers(0, 1 << 16)),
                np.int32(rng.integers(-(1 << 31), 1 << 31)), np.uint64(rng.integers(0, 1 << 64, dtype=np.uint64)),
                np.float16(rng.standard_normal()), np.float64(rng.standard_normal()), np.bool_(rng.integers(0, 2)),
                np.float32(rng.standard_normal()), np.int64(rng.integers(-(1 << 63), 1 << 63, dtype=np.int64))]
        launch(s, LaunchConfig(grid=1, block=1), echo, *args, out)
        got = np.empty(38, np.uint8)
        out.copy_to(got, stream=s)
        s.sync()
        assert got.tobytes() == b"".join(a.tobytes() for a in args), args
