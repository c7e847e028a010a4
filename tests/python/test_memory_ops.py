"""Textures and surfaces, ManagedBuffer, batched copies, VirtualMemoryResource
and pool peer access from Python (cuda.core's names). CPU tests check the
options and argument errors; GPU tests (the `device` fixture) run kernels on
random data and check every element."""
import ctypes

import numpy as np
import pytest

import cucore
from cucore import Device, DeviceMemoryResource, Host, LaunchConfig, ManagedMemoryResource, Program, ProgramOptions
from cucore import VirtualMemoryResource, VirtualMemoryResourceOptions, launch
from cucore.texture import (
    MipmappedArrayOptions,
    OpaqueArrayOptions,
    ResourceDescriptor,
    TextureObjectOptions,
)
from cucore.typing import AddressModeType, ArrayFormatType, FilterModeType
from cucore.utils import CopyOptions, MemcpyOverlapMode, copy_batch, discard_batch, prefetch_batch

# ---- CPU: options and locations ----------------------------------------------------


def test_host_is_a_singleton_per_value():
    assert Host() is Host()
    assert Host(numa_id=1) is Host(numa_id=1)
    assert Host.numa_current() is Host(is_numa_current=True)
    assert Host() != Host(numa_id=0)
    assert repr(Host(numa_id=2)) == "Host(numa_id=2)"
    with pytest.raises(ValueError, match="mutually exclusive"):
        Host(1, is_numa_current=True)
    with pytest.raises(ValueError, match="non-negative"):
        Host(-1)


def test_array_options_normalize_and_validate():
    o = OpaqueArrayOptions(shape=[8, 4], format=np.float32, num_channels=2)
    assert o.shape == (8, 4) and o.format is ArrayFormatType.FLOAT32
    # As cuda.core: a shape is a sequence (a bare int is a TypeError), checked after the format and channels.
    with pytest.raises(TypeError, match=r"^shape must be a tuple of ints, got int$"):
        OpaqueArrayOptions(shape=16, format="uint8", num_channels=1)
    with pytest.raises(ValueError, match=r"^num_channels must be 1, 2, or 4, got 3$"):
        OpaqueArrayOptions(shape=16, format="float32", num_channels=3)
    with pytest.raises(ValueError, match=r"^shape\[1\] must be >= 1, got 0$"):
        OpaqueArrayOptions(shape=(4, 0), format="float32", num_channels=1)
    with pytest.raises(ValueError, match="no ArrayFormatType equivalent"):
        OpaqueArrayOptions(shape=(4,), format=np.float64, num_channels=1)
    with pytest.raises(ValueError, match="num_levels"):
        MipmappedArrayOptions(shape=(4,), format="float32", num_channels=1, num_levels=0)


def test_texture_options_take_strings_and_tuples():
    t = TextureObjectOptions(address_mode=("wrap", "border"), filter_mode="linear")
    assert t.address_mode == (AddressModeType.WRAP, AddressModeType.BORDER)
    assert t.filter_mode is FilterModeType.LINEAR
    # As cuda.core, address_mode and border_color are checked when a texture is made
    # (test_conformance_errors.py checks what is raised then).
    assert TextureObjectOptions(address_mode="sideways").address_mode == "sideways"
    assert TextureObjectOptions(border_color=(1.0, 2.0)).border_color == (1.0, 2.0)


def test_copy_options_are_frozen_and_checked():
    c = CopyOptions(overlap_mode="prefer_overlap_with_compute")
    assert c.overlap_mode is MemcpyOverlapMode.PREFER_OVERLAP_WITH_COMPUTE
    with pytest.raises(ValueError, match="src_access_order"):
        CopyOptions(src_access_order="later")
    with pytest.raises(Exception):
        c.overlap_mode = "default"


def test_exported_names():
    for name in ("ManagedBuffer", "VirtualMemoryResource", "VirtualMemoryResourceOptions", "Host"):
        assert hasattr(cucore, name), name
    for name in ("OpaqueArray", "MipmappedArray", "TextureObject", "SurfaceObject", "ResourceDescriptor"):
        assert hasattr(cucore.texture, name), name
    for name in ("copy_batch", "prefetch_batch", "discard_batch", "discard_prefetch_batch", "CopyOptions"):
        assert hasattr(cucore.utils, name), name


# ---- GPU ------------------------------------------------------------------------------

KERNELS = r"""
extern "C" __global__ void sample2d(cudaTextureObject_t tex, const float* xs, const float* ys, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex2D<float>(tex, xs[i], ys[i]);
}
extern "C" __global__ void surface_affine(cudaSurfaceObject_t in, cudaSurfaceObject_t out, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x < w && y < h) {
    float v = surf2Dread<float>(in, x * (int)sizeof(float), y);
    surf2Dwrite(2.0f * v + 1.0f, out, x * (int)sizeof(float), y);
  }
}
extern "C" __global__ void scale(float* p, float a, unsigned long long n) {
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  if (i < n) p[i] *= a;
}
"""


@pytest.fixture
def kernels(device, arch):
    return Program(KERNELS, "c++", ProgramOptions(arch=arch)).compile("cubin")


def random_floats(n, seed):
    rng = np.random.default_rng(seed)
    v = rng.uniform(-100, 100, n).astype(np.float32)
    v[v == 0] = 1.5
    return v


def test_bilinear_texture_matches_host_reference(device, kernels):
    # The hardware's 9-bit fixed-point weights (8 fractional bits): a sample may
    # differ from exact bilinear interpolation by 1/256 of its texels' spread;
    # the tolerance allows twice that. Texel centres come back exactly.
    W, H = 53, 38
    s = device.create_stream()
    img = random_floats(W * H, 11).reshape(H, W)
    arr = device.create_opaque_array(OpaqueArrayOptions(shape=(W, H), format=np.float32, num_channels=1))
    assert arr.size_bytes == W * H * 4 and arr.shape == (W, H)
    arr.copy_from(img, stream=s)
    back = np.zeros_like(img)
    arr.copy_to(back, stream=s)
    s.sync()
    np.testing.assert_array_equal(back, img)
    tex = device.create_texture_object(
        resource=ResourceDescriptor.from_opaque_array(arr),
        options=TextureObjectOptions(address_mode="clamp", filter_mode="linear"),
    )
    rng = np.random.default_rng(12)
    xs = np.concatenate([rng.uniform(0.5, W - 0.5, 3000), np.tile(np.arange(W) + 0.5, H)]).astype(np.float32)
    ys = np.concatenate([rng.uniform(0.5, H - 0.5, 3000), np.repeat(np.arange(H) + 0.5, W)]).astype(np.float32)
    n = xs.size
    mr = DeviceMemoryResource(device)
    dx, dy, dout = (mr.allocate(n * 4, stream=s) for _ in range(3))
    dx.copy_from(xs, stream=s)
    dy.copy_from(ys, stream=s)
    dout.fill(np.uint32(0x7FC00000), stream=s)
    launch(s, LaunchConfig(grid=(n + 255) // 256, block=256), kernels.get_kernel("sample2d"), tex, dx, dy, dout,
           np.int32(n))
    got = np.empty(n, np.float32)
    dout.copy_to(got, stream=s)
    s.sync()
    xb, yb = xs.astype(np.float64) - 0.5, ys.astype(np.float64) - 0.5
    x0, y0 = np.floor(xb).astype(int), np.floor(yb).astype(int)
    a, b = xb - x0, yb - y0

    def at(x, y):
        return img[np.clip(y, 0, H - 1), np.clip(x, 0, W - 1)].astype(np.float64)

    t00, t10, t01, t11 = at(x0, y0), at(x0 + 1, y0), at(x0, y0 + 1), at(x0 + 1, y0 + 1)
    want = (1 - a) * (1 - b) * t00 + a * (1 - b) * t10 + (1 - a) * b * t01 + a * b * t11
    spread = np.max([t00, t10, t01, t11], axis=0) - np.min([t00, t10, t01, t11], axis=0)
    tol = spread * (2 / 256) + 1e-4 * (1 + np.abs(want))
    bad = np.nonzero(np.abs(got - want) > tol)[0]
    assert bad.size == 0, f"{bad.size} samples off, first {bad[0]}: got {got[bad[0]]}, want {want[bad[0]]}"
    np.testing.assert_array_equal(got[3000:], img.reshape(-1))
    tex.close()
    assert tex.is_closed


def test_surface_writes_read_back(device, kernels):
    W, H = 77, 21
    s = device.create_stream()
    data = random_floats(W * H, 21)
    opts = OpaqueArrayOptions(shape=(W, H), format="float32", num_channels=1, is_surface_load_store=True)
    a, b = device.create_opaque_array(opts), device.create_opaque_array(opts)
    a.copy_from(data, stream=s)
    b.copy_from(np.full(W * H, -7.0, np.float32), stream=s)
    sa = device.create_surface_object(resource=ResourceDescriptor.from_opaque_array(a))
    sb = device.create_surface_object(resource=ResourceDescriptor.from_opaque_array(b))
    launch(s, LaunchConfig(grid=((W + 63) // 64, H), block=64), kernels.get_kernel("surface_affine"), sa, sb,
           np.int32(W), np.int32(H))
    out = np.empty(W * H, np.float32)
    b.copy_to(out, stream=s)
    s.sync()
    np.testing.assert_array_equal(out, 2 * data + 1)
    with pytest.raises(ValueError, match="is_surface_load_store"):
        plain = device.create_opaque_array(OpaqueArrayOptions(shape=(4,), format="float32", num_channels=1))
        device.create_surface_object(resource=ResourceDescriptor.from_opaque_array(plain))


def test_managed_buffer_advice_prefetch_and_batches(device, kernels):
    if not device.properties.concurrent_managed_access:
        pytest.skip("no concurrent managed access")
    n = 1 << 18
    s = device.create_stream()
    mr = ManagedMemoryResource()
    bufs = [mr.allocate(n * 4, stream=s) for _ in range(4)]
    assert all(isinstance(b, cucore.ManagedBuffer) for b in bufs)
    # Managed memory is host-accessible: a numpy view straight over its address.
    views = [np.ctypeslib.as_array((ctypes.c_float * n).from_address(b.handle)) for b in bufs]
    want = [random_floats(n, 40 + k) for k in range(4)]
    for v, w in zip(views, want):
        v[:] = w
    b0 = bufs[0]
    b0.read_mostly = True
    assert b0.read_mostly
    b0.read_mostly = False
    b0.preferred_location = device
    assert b0.preferred_location == device
    b0.preferred_location = Host()
    assert b0.preferred_location == Host()
    b0.preferred_location = None
    assert b0.preferred_location is None
    b0.accessed_by.add(device)
    assert device in b0.accessed_by and len(b0.accessed_by) == 1
    b0.accessed_by = []
    assert len(b0.accessed_by) == 0
    b0.prefetch(device, stream=s)
    prefetch_batch(s, bufs, device)
    for b in bufs:
        launch(s, LaunchConfig(grid=(n + 255) // 256, block=256), kernels.get_kernel("scale"), b, np.float32(3),
               np.uint64(n))
    prefetch_batch(s, bufs, [Host()] * len(bufs))
    s.sync()
    for v, w in zip(views, want):
        np.testing.assert_array_equal(v, 3 * w)
    discard_batch(s, bufs)
    bufs[1].discard_prefetch(device, stream=s)
    s.sync()
    with pytest.raises(TypeError, match="LEGACY_DEFAULT_STREAM"):
        discard_batch(cucore.LEGACY_DEFAULT_STREAM, bufs)
    with pytest.raises(TypeError, match="sequence"):
        prefetch_batch(s, bufs[0], device)


def test_managed_buffer_last_prefetch_location(device, kernels):
    # cuda.core 1.3: the target of the last explicit prefetch over every page, None before one.
    if not device.properties.concurrent_managed_access:
        pytest.skip("no concurrent managed access")
    n = 1 << 18
    s = device.create_stream()
    b = ManagedMemoryResource().allocate(n * 4, stream=s)
    assert b.last_prefetch_location is None
    want = random_floats(n, 77)
    np.ctypeslib.as_array((ctypes.c_float * n).from_address(b.handle))[:] = want
    b.prefetch(device, stream=s)
    s.sync()
    assert b.last_prefetch_location == device
    launch(s, LaunchConfig(grid=(n + 255) // 256, block=256), kernels.get_kernel("scale"), b, np.float32(-2),
           np.uint64(n))
    b.prefetch(Host(), stream=s)
    s.sync()
    assert b.last_prefetch_location == Host()
    np.testing.assert_array_equal(np.ctypeslib.as_array((ctypes.c_float * n).from_address(b.handle)), -2 * want)
    with pytest.raises(AttributeError):
        b.last_prefetch_location = device  # read-only, as cuda.core's
    b.close()
    with pytest.raises(RuntimeError):
        b.last_prefetch_location


def test_set_deallocation_stream_frees_on_the_new_stream(device):
    # The buffer stays open and usable; a later close() without a stream, or the
    # collection of the buffer, frees on the stream set last, which it keeps alive.
    mr = DeviceMemoryResource(device)
    first = device.create_stream()
    for how in ("close", "collect"):
        later = device.create_stream()
        b = mr.allocate(1 << 20, stream=first)
        data = np.random.default_rng(3).integers(1, 2**31, 1 << 18, dtype=np.int32)
        b.copy_from(data, stream=first)
        first.sync()
        b.set_deallocation_stream(later)
        out = np.empty_like(data)
        b.copy_to(out, stream=later)
        later.sync()
        np.testing.assert_array_equal(out, data)
        used = mr.attributes["used_mem_current"]
        del later  # the buffer keeps the stream it frees on
        if how == "close":
            b.close()
        else:
            del b
            import gc
            gc.collect()
        device.sync()
        assert mr.attributes["used_mem_current"] < used, f"not freed ({how})"
    b = mr.allocate(4096, stream=first)
    gone = device.create_stream()
    gone.close()
    with pytest.raises(RuntimeError):
        b.set_deallocation_stream(gone)
    b.close()
    with pytest.raises(RuntimeError):
        b.set_deallocation_stream(first)


def test_copy_batch_of_a_thousand_buffers(device):
    s = device.create_stream()
    mr = DeviceMemoryResource(device)
    rng = np.random.default_rng(5)
    data = [rng.integers(1, 2**32, 1024, dtype=np.uint32) for _ in range(1000)]
    src = [mr.allocate(4096, stream=s) for _ in data]
    dst = [mr.allocate(4096, stream=s) for _ in data]
    for b, d in zip(src, data):
        b.copy_from(d, stream=s)
    for b in dst:
        b.fill(0, stream=s)
    copy_batch(s, src, dst, options=CopyOptions(overlap_mode="prefer_overlap_with_compute"))
    out = np.empty(1024, np.uint32)
    for k, b in enumerate(dst):
        b.copy_to(out, stream=s)
        s.sync()
        np.testing.assert_array_equal(out, data[k], err_msg=f"buffer {k}")
    with pytest.raises(ValueError, match="copy 3"):
        copy_batch(s, src[:5], dst[:3] + [mr.allocate(8, stream=s)] + dst[4:5])


def test_virtual_memory_grow_keeps_contents(device):
    if not device.properties.virtual_memory_management_supported:
        pytest.skip("no virtual memory management")
    s = device.create_stream()
    vmr = VirtualMemoryResource(device, VirtualMemoryResourceOptions(handle_type=None))
    g = vmr.granularity
    buf = vmr.allocate(g, stream=s)
    first = np.random.default_rng(9).integers(1, 2**32, g // 4, dtype=np.uint32)
    buf.copy_from(first, stream=s)
    s.sync()
    grown = vmr.modify_allocation(buf, 2 * g)
    assert grown.size == 2 * g
    if grown is not buf:
        assert buf.is_closed  # moved, as cuda.core: a new Buffer, the old one closed
    out = np.empty(g // 2, np.uint32)
    grown.copy_to(out, stream=s)
    s.sync()
    np.testing.assert_array_equal(out[: g // 4], first)
    with pytest.raises(ValueError):
        vmr.modify_allocation(DeviceMemoryResource(device).allocate(16, stream=s), 4 * g)
    grown.close()


def test_virtual_memory_fabric_is_refused_where_unsupported(device):
    if device.properties.handle_type_fabric_supported:
        # Supported: cucore must not refuse it itself (the driver may still
        # decline, e.g. without IMEX channels, with its own error).
        try:
            VirtualMemoryResource(device, VirtualMemoryResourceOptions(handle_type="fabric"))
        except cucore.FeatureUnavailableError as e:
            pytest.fail(f"fabric handles are supported here, yet cucore refused them: {e}")
        except cucore.CudaError:
            pass
        return
    with pytest.raises(cucore.FeatureUnavailableError, match="fabric"):
        VirtualMemoryResource(device, VirtualMemoryResourceOptions(handle_type="fabric"))


def test_peer_accessible_by_on_one_gpu(device):
    mr = DeviceMemoryResource(device, cucore.DeviceMemoryResourceOptions())
    assert len(mr.peer_accessible_by) == 0
    mr.peer_accessible_by = [device]  # the owner is ignored
    assert set(mr.peer_accessible_by) == set()
    assert device.can_access_peer(device)
    if Device.count() == 1:
        with pytest.raises(IndexError):
            mr.peer_accessible_by.add(1)
