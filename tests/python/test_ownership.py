"""Ownership and the public protocols: foreign owners kept alive by Streams and
Buffers (and released once), memory resources written in Python freeing
through their own deallocate, closed objects raising ClosedError, and the
DLPack C exchange API both ways over NumPy memory, without a GPU; on a GPU
(tests marked gpu), objects dropped in any order, 100 000 cycles of each kind
returning to the start, PyTorch and CuPy streams and arrays outliving their
owners, closed objects refusing launch and copies, and a pool living on in its
buffers after its Python object goes."""
import ctypes
import gc
import os
import sys
import weakref

import pytest

import cucore
from conftest import HAS_GPU
from cucore import (
    Buffer,
    DeviceMemoryResource,
    DeviceMemoryResourceOptions,
    LaunchConfig,
    MemoryResource,
    ObjectCode,
    Stream,
    launch,
)
from cucore.utils import StridedMemoryView

np = pytest.importorskip("numpy")


class ForeignStream:
    """Another library's stream: only __cuda_stream__."""

    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


def collect():
    for _ in range(3):
        gc.collect()


# ---- closed means closed ---------------------------------------------------------------
def test_closed_error_is_a_runtime_error_and_a_value_error():
    assert issubclass(cucore.ClosedError, cucore.Error)
    assert issubclass(cucore.ClosedError, RuntimeError)  # what cuda.core raises for a closed object
    assert issubclass(cucore.ClosedError, ValueError)  # cucore's C++ error is a std::invalid_argument


def test_default_streams_stay_open():
    for s in (cucore.LEGACY_DEFAULT_STREAM, cucore.PER_THREAD_DEFAULT_STREAM):
        handle = s.handle
        s.close()
        assert not s.is_closed and s.handle == handle and int(handle) in (1, 2)
    assert cucore.default_stream() is cucore.LEGACY_DEFAULT_STREAM


def test_every_use_of_a_closed_stream_raises():
    s = Stream.from_handle(0x1234)
    assert not s.is_closed and int(s.handle) == 0x1234
    s.close()
    s.close()  # idempotent
    assert s.is_closed and int(s.handle) == 0 and "closed" in repr(s)
    uses = {
        "sync": lambda: s.sync(),
        "is_done": lambda: s.is_done(),
        "__cuda_stream__": lambda: s.__cuda_stream__(),
        "is_nonblocking": lambda: s.is_nonblocking,
        "priority": lambda: s.priority,
        "device": lambda: s.device,
        "context": lambda: s.context,
        "record": lambda: s.record(),
        "wait": lambda: s.wait(cucore.LEGACY_DEFAULT_STREAM),
    }
    for name, use in uses.items():
        with pytest.raises(cucore.ClosedError) as ei:
            use()
        assert "Stream has been closed" in str(ei.value), name
        assert ei.value.object == "Stream"
    # As an argument, too: waiting on it, freeing on it.
    with pytest.raises(cucore.ClosedError):
        cucore.LEGACY_DEFAULT_STREAM.wait(s)


def test_every_use_of_a_closed_buffer_raises():
    host = np.arange(16, dtype=np.uint8)
    b = Buffer.from_handle(host.ctypes.data, host.nbytes, owner=host)
    b.close()
    b.close()
    assert b.is_closed and b.handle == 0 and b.size == 0 and b.owner is None
    uses = {
        "copy_to": lambda: b.copy_to(np.empty(16, np.uint8), stream=cucore.LEGACY_DEFAULT_STREAM),
        "copy_from": lambda: b.copy_from(host, stream=cucore.LEGACY_DEFAULT_STREAM),
        "fill": lambda: b.fill(1, stream=cucore.LEGACY_DEFAULT_STREAM),
        "device_id": lambda: b.device_id,
        "is_device_accessible": lambda: b.is_device_accessible,
        "is_host_accessible": lambda: b.is_host_accessible,
        "is_managed": lambda: b.is_managed,
        "__dlpack__": lambda: b.__dlpack__(),
        "__dlpack_device__": lambda: b.__dlpack_device__(),
        "from_buffer": lambda: StridedMemoryView.from_buffer(b, (16,), itemsize=1),
    }
    for name, use in uses.items():
        with pytest.raises(cucore.ClosedError) as ei:
            use()
        assert str(ei.value).startswith("Buffer has been closed"), (name, str(ei.value))


# ---- foreign owners ---------------------------------------------------------------------
def test_a_stream_keeps_its_foreign_owner_alive_until_closed():
    f = ForeignStream(0x5678)
    dead = weakref.ref(f)
    s = Stream(f)
    assert s.owner is f and int(s.handle) == 0x5678 and s.__cuda_stream__() == (0, 0x5678)
    del f
    collect()
    assert dead() is not None, "the Stream keeps the object its stream belongs to"
    assert s.owner.handle == 0x5678
    s.close()
    collect()
    assert dead() is None, "closing released it, once"
    # Dropping the Stream (instead of closing it) releases it too.
    f2 = ForeignStream(0x9abc)
    dead2 = weakref.ref(f2)
    s2 = cucore.Stream(f2)
    del f2, s2
    collect()
    assert dead2() is None


def test_buffer_owner_kept_alive_and_released():
    rng = np.random.default_rng(3)
    host = rng.integers(1, 255, size=4096, dtype=np.uint8)
    expect = host.copy()
    b = Buffer.from_handle(host.ctypes.data, host.nbytes, owner=host)
    assert b.owner is host and b.handle == host.ctypes.data and b.size == host.nbytes
    ptr = b.handle
    del host
    collect()
    # The owner's memory is still there and unchanged.
    got = np.ctypeslib.as_array((ctypes.c_uint8 * 4096).from_address(ptr))
    assert np.array_equal(got, expect)
    assert b.owner is not None
    b.close()
    assert b.owner is None


def test_mr_and_owner_exclude_each_other():
    host = np.zeros(8, np.uint8)
    with pytest.raises(ValueError):
        Buffer.from_handle(host.ctypes.data, 8, mr=RecordingResource(), owner=host)
    with pytest.raises(ValueError):
        Buffer.from_handle(host.ctypes.data, 8, stream=cucore.LEGACY_DEFAULT_STREAM)


# ---- memory resources written in Python -----------------------------------------------------
class RecordingResource(MemoryResource):
    def __init__(self):
        super().__init__()
        self.freed = []

    def allocate(self, size, *, stream=None):
        mem = np.random.default_rng(size).integers(1, 255, size=size, dtype=np.uint8)
        self.keep = getattr(self, "keep", []) + [mem]
        return Buffer.from_handle(mem.ctypes.data, size, mr=self, stream=stream)

    def deallocate(self, ptr, size, *, stream):
        self.freed.append((ptr, size, int(stream.handle)))

    @property
    def is_device_accessible(self):
        return False

    @property
    def is_host_accessible(self):
        return True

    @property
    def device_id(self):
        return -1


def test_python_resource_frees_through_its_deallocate_once():
    mr = RecordingResource()
    b = mr.allocate(64)
    assert b.memory_resource is mr
    assert b.is_host_accessible and not b.is_device_accessible and b.device_id == -1
    ptr = b.handle
    b.close()
    b.close()
    assert mr.freed == [(ptr, 64, 1)]  # on the legacy default stream, once
    # Dropped without close(): freed when collected.
    b2 = mr.allocate(32)
    p2 = b2.handle
    del b2
    collect()
    assert mr.freed[-1] == (p2, 32, 1) and len(mr.freed) == 2


def test_python_resource_frees_on_the_stream_given_even_after_it_is_dropped():
    mr = RecordingResource()
    f = ForeignStream(0x4242)
    dead = weakref.ref(f)
    b = mr.allocate(16, stream=f)  # a foreign stream: adopted, its object kept with the buffer
    ptr = b.handle
    del f
    collect()
    assert dead() is not None, "the buffer keeps the stream it frees on"
    b.close()
    assert mr.freed == [(ptr, 16, 0x4242)]
    collect()
    assert dead() is None


def test_resource_outlives_its_python_object_through_the_buffer():
    mr = RecordingResource()
    dead = weakref.ref(mr)
    b = mr.allocate(8)
    freed = mr.freed
    del mr
    collect()
    assert dead() is not None and b.memory_resource is dead()
    b.close()
    del b
    collect()
    assert len(freed) == 1 and dead() is None


def host_blocks(size=64):
    """Host blocks for Buffers over a LegacyPinnedMemoryResource, which frees
    each through cuMemFreeHost when the Buffer goes: on a GPU, page-locked
    blocks from the driver (one per Buffer, so each is freed once, by its
    owner); without a driver nothing can free them, and ctypes memory (kept
    here) stands in."""
    keep = []
    if not HAS_GPU:
        def block():
            keep.append((ctypes.c_char * size)())
            return ctypes.addressof(keep[-1])
        return block
    cucore.Device(0).set_current()
    cuda = ctypes.CDLL("libcuda.so.1")

    def block():
        p = ctypes.c_void_p()
        assert cuda.cuMemAllocHost_v2(ctypes.byref(p), ctypes.c_size_t(size)) == 0
        return p.value
    return block


def test_a_buffers_memory_resource_is_the_face_it_came_from_while_that_lives():
    # cucore's own resources: the face is found through the resource's state
    # (its face slot and nanobind's instances), no table of the binding's.
    from cucore import LegacyPinnedMemoryResource, StatisticsResourceAdaptor

    host = host_blocks()
    mr = LegacyPinnedMemoryResource()
    stats = StatisticsResourceAdaptor(mr)
    b = Buffer.from_handle(host(), 64, mr=mr)
    s = Buffer.from_handle(host(), 64, mr=stats)
    assert b.memory_resource is mr and s.memory_resource is stats
    assert Buffer.from_handle(host(), 64, mr=mr).memory_resource is mr, "the first face stays"
    del mr, stats
    collect()
    # Gone: a plain MemoryResource over the same state, itself kept while it lives.
    face = b.memory_resource
    assert type(face) is MemoryResource and face is b.memory_resource
    assert type(s.memory_resource) is MemoryResource and s.memory_resource is not face
    # Faces made and dropped one after another reuse addresses: a buffer is never
    # answered with another resource's face that lives where its own did.
    buffers, faces = [], []
    for _ in range(32):
        m = LegacyPinnedMemoryResource()
        buffers.append(Buffer.from_handle(host(), 64, mr=m))
        del m
        collect()
        faces.append(LegacyPinnedMemoryResource())  # often where the last one was
    for i, buf in enumerate(buffers):
        got = buf.memory_resource
        assert type(got) is MemoryResource and all(got is not f for f in faces), f"buffer {i} got another's face"
        assert got == buf.memory_resource


# ---- the DLPack C exchange API --------------------------------------------------------------
def exchange_api(cls):
    cap = cls.__dlpack_c_exchange_api__
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_ptr = ctypes.pythonapi.PyCapsule_GetPointer
    get_ptr.restype, get_ptr.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    assert get_name(cap) == b"dlpack_exchange_api"
    return get_ptr(cap, b"dlpack_exchange_api")


def test_buffer_and_view_export_the_exchange_api():
    for cls in (Buffer, StridedMemoryView):
        addr = exchange_api(cls)
        major, minor = (ctypes.c_uint32 * 2).from_address(addr)
        assert (major, minor) == (1, 3)
        assert cls.__c_dlpack_exchange_api__ is cls.__dlpack_c_exchange_api__
        # managed_tensor_allocator, from_py_object, to_py_object, dltensor, current_work_stream
        fns = (ctypes.c_void_p * 5).from_address(addr + 16)
        assert fns[0] and fns[1] and fns[2] and fns[4]
    assert (ctypes.c_void_p * 5).from_address(exchange_api(StridedMemoryView) + 16)[3]


class NoDlpackView(StridedMemoryView):
    """A view whose __dlpack__ must not be used: only the C exchange API can read it."""

    def __dlpack__(self, *args, **kwargs):
        raise AssertionError("__dlpack__ was called: the C exchange API was not used")


@pytest.mark.parametrize("shape,index", [((6, 5), np.s_[:, :]), ((8, 9), np.s_[::2, 1::3]), ((7,), np.s_[:])])
def test_view_read_through_the_exchange_api(shape, index):
    rng = np.random.default_rng(11)
    base = rng.standard_normal(shape).astype(np.float32)
    a = base[index]
    v1 = NoDlpackView(a, -1)
    v2 = StridedMemoryView.from_dlpack(v1, -1)
    assert v2.ptr == a.ctypes.data and v2.shape == a.shape
    assert v2.strides in (None, tuple(s // 4 for s in a.strides))
    assert v2.dtype == np.float32 and v2.device_id == -1 and not v2.is_device_accessible
    assert v2.exporting_obj is v1
    v3 = StridedMemoryView.from_any_interface(v1, -1)
    assert v3.ptr == v2.ptr and v3.shape == v2.shape
    # The tensor keeps the first view, and through it the array, alive.
    dead = weakref.ref(v1)
    expect = a.copy()
    del v1, v3, a, base
    collect()
    assert dead() is not None
    back = np.from_dlpack(v2)  # and the second view exports DLPack in turn
    assert back.shape == expect.shape and np.array_equal(back, expect)
    del back, v2
    collect()
    assert dead() is None


def test_numpy_read_through_dlpack_and_readonly():
    rng = np.random.default_rng(5)
    a = rng.integers(-1000, 1000, size=(4, 6), dtype=np.int32)
    v = StridedMemoryView.from_dlpack(a, -1)
    assert v.ptr == a.ctypes.data and v.shape == (4, 6) and v.dtype == np.int32 and not v.readonly
    assert np.array_equal(np.from_dlpack(v), a)
    r = a.copy()
    r.flags.writeable = False
    assert StridedMemoryView(r, -1).readonly
    ro = NoDlpackView(r, -1)
    assert ro.readonly and StridedMemoryView.from_dlpack(ro, -1).readonly  # through the exchange API too
    if tuple(int(x) for x in np.__version__.split(".")[:2]) >= (2, 1):  # NumPy reads DLPack 1.x's read-only flag
        assert np.from_dlpack(StridedMemoryView(r, -1)).flags.writeable is False


def test_exchange_api_round_trip_through_c():
    """managed_tensor_from_py_object_no_sync, then managed_tensor_to_py_object_no_sync: a new view owning it."""
    rng = np.random.default_rng(9)
    a = rng.standard_normal((3, 4))
    v = StridedMemoryView(a, -1)
    addr = exchange_api(StridedMemoryView)
    fns = (ctypes.c_void_p * 5).from_address(addr + 16)
    from_obj = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(ctypes.c_void_p))(fns[1])
    to_obj = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))(fns[2])
    tensor = ctypes.c_void_p()
    assert from_obj(v, ctypes.byref(tensor)) == 0 and tensor.value
    out = ctypes.c_void_p()
    assert to_obj(tensor, ctypes.byref(out)) == 0 and out.value
    w = ctypes.cast(out, ctypes.py_object).value  # borrowed: take our own reference...
    ctypes.pythonapi.Py_DecRef.argtypes = [ctypes.c_void_p]
    ctypes.pythonapi.Py_DecRef(out)  # ...and drop the one the call returned
    assert isinstance(w, StridedMemoryView) and w.ptr == a.ctypes.data and w.shape == (3, 4)
    assert np.array_equal(np.from_dlpack(w), a)
    with pytest.raises(TypeError):
        from_obj(a, ctypes.byref(tensor))  # not a view of this type


# ---- on a GPU: any drop order, many cycles, foreign owners dying first -------------------
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


@pytest.mark.gpu
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


@pytest.mark.gpu
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
    attrs = device.memory_resource.attributes  # a live view: read the figures now
    pool0 = {"used_mem_current": attrs.used_mem_current, "reserved_mem_current": attrs.reserved_mem_current}
    free0, blocks0 = _cu_mem_free(), sys.getallocatedblocks()
    for fn, n in kinds:
        for i in range(1, n + 1):
            fn(i)
        device.sync()
    _collect()
    device.sync()
    pool1 = {"used_mem_current": attrs.used_mem_current, "reserved_mem_current": attrs.reserved_mem_current}
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


@pytest.mark.gpu
def test_torch_stream_and_tensors_outlive_their_owners(device, saxpy):
    torch = pytest.importorskip("torch")
    n = 4096
    ts = torch.cuda.Stream()
    s, alive = _adopt(ts, ts.cuda_stream)
    assert int(s.handle) == ts.cuda_stream
    del ts
    _collect()
    assert alive() is not None, "the Stream keeps the PyTorch stream"
    x = torch.rand(n, device="cuda")
    expect = x.cpu().numpy() * 2
    vx = StridedMemoryView(x, int(s.handle))  # s waits for PyTorch's current stream
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


@pytest.mark.gpu
def test_cupy_stream_and_arrays_outlive_their_owners(device, saxpy):
    cp = pytest.importorskip("cupy")
    n = 4096
    cs = cp.cuda.Stream(non_blocking=True)
    s, alive = _adopt(cs, cs.ptr)
    assert int(s.handle) == cs.ptr
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


@pytest.mark.gpu
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


@pytest.mark.gpu
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
    assert int(handle) != 0
    device.sync()
