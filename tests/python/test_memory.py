"""Memory: Buffers allocated, copied both ways, filled and closed; the memory
resources (device pools, pinned, legacy pinned, managed) and the device's
current one; out of memory and the next allocation; Buffer.from_handle.
GPU tests: skipped with a reason when no GPU is usable, failed instead under
CUCORE_REQUIRE_GPU=1."""
import pytest

import cucore
from cucore import Buffer, DeviceMemoryResource, DeviceMemoryResourceOptions

np = pytest.importorskip("numpy")
pytestmark = pytest.mark.gpu


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
