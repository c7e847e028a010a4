"""Memory as cuda.core 1.2 documents it: Buffer.fill's value rules (an int is
one byte in [0, 256); a buffer-protocol value gives its 1, 2 or 4 bytes as
they are, so signed values fill their two's complement), the properties every
resource has, the options of pinned and managed resources, Buffer.from_handle
over host and foreign device memory, DeviceMemoryResource.close(). GPU tests
(skipped without one)."""
import ctypes
import random

import pytest

import cucore
from cucore import (
    Buffer,
    DeviceMemoryResource,
    DeviceMemoryResourceOptions,
    ManagedMemoryResource,
    ManagedMemoryResourceOptions,
    PinnedMemoryResource,
    PinnedMemoryResourceOptions,
)

np = pytest.importorskip("numpy")


def _read(buf, stream):
    host = np.empty(buf.size, dtype=np.uint8)
    buf.copy_to(host, stream=stream)
    stream.sync()
    return host


def test_fill_values_as_cuda_core_reads_them(device):
    s = device.create_stream()
    rng = random.Random(7)
    buf = device.allocate(4096, stream=s)
    byte = rng.randrange(1, 256)
    buf.fill(byte, stream=s)
    assert (_read(buf, s) == byte).all()
    for value in (np.int8(-rng.randrange(1, 128)), np.int16(-rng.randrange(1, 30000)), np.int32(-rng.randrange(1, 1 << 30)),
                  np.uint16(rng.randrange(1, 65535)), np.float32(rng.random()), bytes([rng.randrange(256)])):
        buf.fill(value, stream=s)
        width = np.asarray(value).itemsize if not isinstance(value, bytes) else 1
        pattern = np.frombuffer(np.asarray(value).tobytes() if not isinstance(value, bytes) else value, dtype=np.uint8)
        got = _read(buf, s).reshape(-1, width)
        assert (got == pattern).all(), (value, got[:2])
    with pytest.raises(OverflowError):
        buf.fill(256, stream=s)
    with pytest.raises(OverflowError):
        buf.fill(-1, stream=s)
    with pytest.raises(ValueError):
        buf.fill(np.int64(1), stream=s)  # 8 bytes
    with pytest.raises(TypeError):
        buf.fill(1.5, stream=s)
    odd = device.allocate(6, stream=s)
    with pytest.raises(ValueError, match="divisible by 4"):
        odd.fill(np.uint32(1), stream=s)
    s.sync()


def test_every_resource_reports_its_properties(device):
    dmr = DeviceMemoryResource(device)
    assert dmr.is_device_accessible and not dmr.is_host_accessible and not dmr.is_managed
    assert dmr.device_id == device.device_id
    assert dmr.is_ipc_enabled is False and dmr.is_mapped is False and dmr.is_handle_owned is False
    attrs = dmr.attributes
    assert isinstance(attrs.used_mem_current, int) and isinstance(attrs.reuse_allow_opportunistic, bool)
    assert attrs["reserved_mem_current"] == attrs.reserved_mem_current
    own = DeviceMemoryResource(device.device_id, DeviceMemoryResourceOptions(max_size=1 << 24))
    assert own.is_handle_owned and not own.is_closed
    b = own.allocate(1 << 20, stream=device.default_stream)
    own.close()
    assert own.is_closed and int(own.handle) == 0
    b.fill(3, stream=device.default_stream)  # its buffer keeps the pool
    assert (_read(b, device.default_stream) == 3).all()
    b.close()
    dmr.close()  # the device's pool is not this resource's own: no effect
    assert not dmr.is_closed and dmr.allocate(16, stream=device.default_stream).size == 16
    with pytest.raises(ValueError):
        DeviceMemoryResource(99)
    if device.properties.host_memory_pools_supported:
        pinned = PinnedMemoryResource(PinnedMemoryResourceOptions(max_size=1 << 24))
        assert pinned.is_device_accessible and pinned.is_host_accessible and pinned.device_id == -1
        assert pinned.numa_id == -1 and pinned.is_ipc_enabled is False and pinned.is_handle_owned
        if device.properties.host_numa_memory_pools_supported and device.properties.host_numa_id >= 0:
            node = device.properties.host_numa_id
            numa = PinnedMemoryResource(PinnedMemoryResourceOptions(numa_id=node))
            assert numa.numa_id == node
            pb = numa.allocate(4096, stream=device.default_stream)
            pb.fill(9, stream=device.default_stream)
            device.default_stream.sync()
            assert bytes((ctypes.c_ubyte * 4096).from_address(pb.handle)) == b"\x09" * 4096
        with pytest.raises(ValueError):
            PinnedMemoryResource(PinnedMemoryResourceOptions(numa_id=-2))


def test_managed_preferred_locations(device):
    assert ManagedMemoryResource().preferred_location is None
    dev = ManagedMemoryResource(ManagedMemoryResourceOptions(preferred_location=device.device_id))
    assert dev.preferred_location == ("device", device.device_id) and dev.device_id == device.device_id
    host = ManagedMemoryResource(ManagedMemoryResourceOptions(preferred_location=-1))
    assert host.preferred_location == ("host", None)
    typed = ManagedMemoryResource(ManagedMemoryResourceOptions(preferred_location_type=cucore.typing.ManagedMemoryLocationType.HOST))
    assert typed.preferred_location == ("host", None) and typed.is_managed
    b = dev.allocate(1 << 16, stream=device.default_stream)
    b.fill(5, stream=device.default_stream)
    device.default_stream.sync()
    assert bytes((ctypes.c_ubyte * 16).from_address(b.handle)) == b"\x05" * 16  # host-accessible
    for bad in (dict(preferred_location_type="device"), dict(preferred_location_type="host", preferred_location=0),
                dict(preferred_location_type="gpu"), dict(preferred_location=-5)):
        with pytest.raises(ValueError):
            ManagedMemoryResource(ManagedMemoryResourceOptions(**bad))


def test_from_handle_over_host_and_foreign_device_memory(device):
    rng = random.Random(3)
    host = (ctypes.c_ubyte * 256)(*[rng.randrange(256) for _ in range(256)])
    hb = Buffer.from_handle(ctypes.addressof(host), 256, owner=host)
    assert hb.is_host_accessible and not hb.is_device_accessible and hb.device_id == -1 and not hb.is_managed
    assert hb.owner is host and hb.memory_resource is None
    dev_buf = device.allocate(256, stream=device.default_stream)
    foreign = Buffer.from_handle(dev_buf.handle, 256)  # no mr, no owner: a view, never freed
    assert foreign.is_device_accessible and not foreign.is_host_accessible and foreign.device_id == device.device_id
    assert foreign == Buffer.from_handle(dev_buf.handle, 256)
    dev_buf.copy_from(hb, stream=device.default_stream)
    out = (ctypes.c_ubyte * 256)()
    foreign.copy_to(Buffer.from_handle(ctypes.addressof(out), 256, owner=out), stream=device.default_stream)
    device.default_stream.sync()
    assert bytes(out) == bytes(host)
    with pytest.raises(ValueError, match="owner and memory resource cannot be both specified together"):
        Buffer.from_handle(dev_buf.handle, 256, mr=DeviceMemoryResource(device), owner=host)
    with pytest.raises(ValueError, match="stream requires a memory resource"):
        Buffer.from_handle(dev_buf.handle, 256, stream=device.default_stream)
    foreign.close()
    assert dev_buf.is_closed is False  # closing the view freed nothing
    assert dev_buf.is_mapped is False
