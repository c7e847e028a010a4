"""ManagedMemoryResource as cuda.core 1.2 makes it: a stream-ordered memory pool
of managed memory, the driver's current managed pool with options None (not
owned: close() has no effect) or a new pool with options (owned), with handle,
attributes, is_handle_owned, close and is_closed; and ObjectCode.get_module
(the library's CUmodule through cuLibraryGetModule). The API's shape is checked
everywhere; the rest needs a GPU (skipped with a reason without one)."""
import ctypes
import dataclasses
import inspect

import pytest

from cucore import (
    DeviceMemoryResource,
    ManagedBuffer,
    ManagedMemoryResource,
    ManagedMemoryResourceOptions,
    ObjectCode,
    Program,
    ProgramOptions,
)

from conftest import SAXPY_SRC


# ---- shape (no GPU needed) --------------------------------------------------------------------
def test_the_pool_members_are_declared_as_in_cuda_core():
    for name in ("attributes", "handle", "is_handle_owned", "is_closed", "is_ipc_enabled", "is_mapped", "uuid",
                 "preferred_location", "device_id", "is_managed", "is_host_accessible", "is_device_accessible"):
        assert inspect.isdatadescriptor(inspect.getattr_static(ManagedMemoryResource, name)), name
    for name in ("close", "allocate", "deallocate"):
        assert callable(inspect.getattr_static(ManagedMemoryResource, name)), name
    assert callable(inspect.getattr_static(ObjectCode, "get_module"))
    assert not inspect.isdatadescriptor(inspect.getattr_static(ObjectCode, "get_module"))


def test_the_options_are_cuda_cores():
    # cuda.core's two fields; a pool takes no attach flags, so cucore's old attach_global is gone.
    assert [f.name for f in dataclasses.fields(ManagedMemoryResourceOptions)] == [
        "preferred_location", "preferred_location_type"]
    with pytest.raises(TypeError):
        ManagedMemoryResourceOptions(attach_global=False)


def test_get_module_of_code_the_driver_cannot_load():
    # LTO-IR must be linked first: get_module refuses it as handle does, before any driver call.
    lto = ObjectCode.from_ltoir(b"\x7fELF" + bytes(60), name="k.ltoir")
    with pytest.raises(ValueError, match="LTO-IR") as from_module:
        lto.get_module()
    with pytest.raises(ValueError) as from_handle:
        lto.handle
    assert str(from_module.value) == str(from_handle.value)


# ---- on the GPU -------------------------------------------------------------------------------
try:
    import numpy as np
except ImportError:  # the GPU tests need it
    np = None


def _round_trip(mr, device, seed):
    """Allocates from `mr` on a stream, writes random data from the host through
    the managed pointer after a sync, reads it on the device (copied to device
    memory and back) and checks every element; the pool's used memory counts the
    allocation while it is held."""
    device.sync()  # earlier frees on other streams done: the pool's figures hold still
    s = device.create_stream()
    n = (1 << 18) + 7
    data = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    before = mr.attributes.used_mem_current
    b = mr.allocate(data.nbytes, stream=s)
    assert isinstance(b, ManagedBuffer)
    assert b.is_managed and b.is_host_accessible and b.is_device_accessible
    assert b.memory_resource is mr
    s.sync()
    held = mr.attributes.used_mem_current
    assert held > 0 and held >= before + data.nbytes
    assert mr.attributes.used_mem_high >= held
    ctypes.memmove(b.handle, data.ctypes.data, data.nbytes)  # the host writes through the managed pointer
    dev = DeviceMemoryResource(device).allocate(data.nbytes, stream=s)
    dev.copy_from(b, stream=s)
    out = np.full(n, np.nan, dtype=np.float32)
    dev.copy_to(out, stream=s)
    s.sync()
    assert np.array_equal(out, data)
    ptr = int(b.handle)
    b.close()
    dev.close()
    s.sync()  # the free is stream-ordered
    assert mr.attributes.used_mem_current + data.nbytes <= held
    return ptr


def _pool_of(ptr):
    driver = pytest.importorskip("cuda.bindings.driver")
    err, pool = driver.cuPointerGetAttribute(driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, ptr)
    assert err == driver.CUresult.CUDA_SUCCESS
    return int(pool)


@pytest.mark.gpu
@pytest.mark.skipif(np is None, reason="needs numpy")
def test_no_options_is_the_drivers_current_managed_pool(device):
    if not device.properties.concurrent_managed_access:
        pytest.skip("the default managed pool needs concurrent managed access (cuda.core's RuntimeError otherwise)")
    mr = ManagedMemoryResource()
    assert mr.is_handle_owned is False and mr.is_closed is False
    assert mr.is_managed and mr.is_host_accessible and mr.is_device_accessible
    assert mr.is_ipc_enabled is False and mr.is_mapped is False and mr.uuid is None
    assert mr.preferred_location is None and mr.device_id == -1
    handle = mr.handle
    assert int(handle) != 0
    assert int(ManagedMemoryResource().handle) == int(handle)  # the same driver pool
    try:
        from cuda.bindings import driver
    except ImportError:
        driver = None
    if driver is not None:
        assert isinstance(handle, driver.CUmemoryPool)
        loc = driver.CUmemLocation()
        loc.type = driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_NONE
        loc.id = -1
        err, current = driver.cuMemGetMemPool(loc, driver.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_MANAGED)
        assert err == driver.CUresult.CUDA_SUCCESS and int(current) == int(handle)
    ptr = _round_trip(mr, device, 1)
    if driver is not None:
        assert _pool_of(ptr) == int(handle)
    mr.close()  # not its own: no effect
    assert not mr.is_closed and int(mr.handle) == int(handle)
    _round_trip(mr, device, 2)


@pytest.mark.gpu
@pytest.mark.skipif(np is None, reason="needs numpy")
@pytest.mark.parametrize("options", [
    ManagedMemoryResourceOptions(),
    ManagedMemoryResourceOptions(preferred_location=0),
    ManagedMemoryResourceOptions(preferred_location=-1),
    ManagedMemoryResourceOptions(preferred_location_type="host"),
    {"preferred_location": 0, "preferred_location_type": "device"},
], ids=["none", "device", "host-legacy", "host", "device-dict"])
def test_options_make_an_owned_managed_pool(device, options):
    mr = ManagedMemoryResource(options)
    assert mr.is_handle_owned is True and not mr.is_closed
    assert mr.is_managed and mr.is_host_accessible and mr.is_device_accessible
    want_device = 0 if (options.get("preferred_location") if isinstance(options, dict)
                        else options.preferred_location) == 0 else -1
    assert mr.device_id == want_device
    ptr = _round_trip(mr, device, 3)
    try:
        import cuda.bindings.driver  # noqa: F401
    except ImportError:
        return
    assert _pool_of(ptr) == int(mr.handle)


@pytest.mark.gpu
@pytest.mark.skipif(np is None, reason="needs numpy")
def test_close_on_an_owned_pool(device):
    s = device.create_stream()
    mr = ManagedMemoryResource(ManagedMemoryResourceOptions(preferred_location=device.device_id))
    attrs = mr.attributes
    n = 4099
    data = np.random.default_rng(5).integers(0, 1 << 31, n, dtype=np.int32)
    kept = mr.allocate(data.nbytes, stream=s)
    s.sync()
    ctypes.memmove(kept.handle, data.ctypes.data, data.nbytes)
    mr.close()
    assert mr.is_closed and int(mr.handle) == 0
    with pytest.raises(RuntimeError, match="ManagedMemoryResource has been closed"):
        mr.allocate(64, stream=s)
    with pytest.raises(RuntimeError, match="ManagedMemoryResource has been closed"):
        mr.attributes
    assert attrs.used_mem_current >= data.nbytes  # a view taken before keeps reading the pool
    mr.close()  # idempotent
    # The buffer keeps the pool: its memory is still good.
    out = np.zeros(n, dtype=np.int32)
    kept.copy_to(out, stream=s)
    s.sync()
    assert np.array_equal(out, data)
    kept.close()
    s.sync()


@pytest.mark.gpu
@pytest.mark.skipif(np is None, reason="needs numpy")
def test_a_capturing_stream_is_refused(device):
    mr = ManagedMemoryResource(ManagedMemoryResourceOptions())
    gb = device.create_graph_builder().begin_building()
    try:
        with pytest.raises(RuntimeError, match=r"^_MemPool cannot perform memory operations on a capturing "
                                               r"stream \(consider using GraphMemoryResource\)\.$"):
            mr.allocate(256, stream=gb)
        assert gb.is_building  # refused before the driver saw it
    finally:
        gb.end_building()


@pytest.mark.gpu
@pytest.mark.skipif(np is None, reason="needs numpy")
def test_get_module_gives_the_module_holding_the_kernel(device):
    driver = pytest.importorskip("cuda.bindings.driver")
    arch = f"sm_{device.compute_capability.major}{device.compute_capability.minor}"
    code = Program(SAXPY_SRC, "c++", ProgramOptions(arch=arch)).compile("cubin")
    module = code.get_module()
    assert isinstance(module, driver.CUmodule) and int(module) != 0
    assert int(code.get_module()) == int(module)
    err, function = driver.cuModuleGetFunction(module, b"saxpy")
    assert err == driver.CUresult.CUDA_SUCCESS and int(function) != 0
    err, _ = driver.cuModuleGetFunction(module, b"no_such_kernel")
    assert err == driver.CUresult.CUDA_ERROR_NOT_FOUND
    # The function found by name is the kernel: launch it through cuda.bindings, check every element.
    s = device.create_stream()
    n = 50_001
    rng = np.random.default_rng(9)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    bx = device.allocate(x.nbytes, stream=s)
    by = device.allocate(y.nbytes, stream=s)
    bo = device.allocate(x.nbytes, stream=s)
    bx.copy_from(x, stream=s)
    by.copy_from(y, stream=s)
    params = ((1.75, int(bx.handle), int(by.handle), int(bo.handle), n),
              (ctypes.c_float, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int))
    (err,) = driver.cuLaunchKernel(function, (n + 255) // 256, 1, 1, 256, 1, 1, 0, s.handle, params, 0)
    assert err == driver.CUresult.CUDA_SUCCESS
    out = np.empty_like(x)
    bo.copy_to(out, stream=s)
    s.sync()
    np.testing.assert_allclose(out, np.float32(1.75) * x + y, rtol=1e-6, atol=1e-6)

