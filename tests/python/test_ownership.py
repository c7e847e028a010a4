"""Ownership and the public protocols, without a GPU: foreign owners kept
alive by Streams and Buffers (and released once), memory resources written in
Python freeing through their own deallocate, closed objects raising
ClosedError, and the DLPack C exchange API both ways over NumPy memory."""
import ctypes
import gc
import weakref

import pytest

import cucore
from cucore import Buffer, MemoryResource, Stream
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
        assert not s.is_closed and s.handle == handle and handle in (1, 2)
    assert cucore.default_stream() is cucore.LEGACY_DEFAULT_STREAM


def test_every_use_of_a_closed_stream_raises():
    s = Stream.from_handle(0x1234)
    assert not s.is_closed and s.handle == 0x1234
    s.close()
    s.close()  # idempotent
    assert s.is_closed and s.handle == 0 and "closed" in repr(s)
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
    assert s.owner is f and s.handle == 0x5678 and s.__cuda_stream__() == (0, 0x5678)
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
        self.freed.append((ptr, size, stream.handle))

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


def test_a_buffers_memory_resource_is_the_face_it_came_from_while_that_lives():
    # cucore's own resources: the face is found through the resource's state
    # (its face slot and nanobind's instances), no table of the binding's.
    from cucore import LegacyPinnedMemoryResource, StatisticsResourceAdaptor

    host = (ctypes.c_char * 64)()
    mr = LegacyPinnedMemoryResource()
    stats = StatisticsResourceAdaptor(mr)
    b = Buffer.from_handle(ctypes.addressof(host), 64, mr=mr)
    s = Buffer.from_handle(ctypes.addressof(host), 64, mr=stats)
    assert b.memory_resource is mr and s.memory_resource is stats
    assert Buffer.from_handle(ctypes.addressof(host), 64, mr=mr).memory_resource is mr, "the first face stays"
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
        buffers.append(Buffer.from_handle(ctypes.addressof(host), 64, mr=m))
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
