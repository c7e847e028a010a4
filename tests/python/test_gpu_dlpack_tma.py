"""GPU tests of DLPack both ways and TMA tensor maps: PyTorch, CuPy and NumPy take cucore's
Buffers and StridedMemoryViews with no copy (pointer equality) and cucore takes theirs, every
element checked, for float32, float16, bfloat16, complex and bool; device, pinned and managed
memory report their DLPack device; copies between host and device views; a kernel loading
tiles with cp.async.bulk.tensor through as_tensor_map copies a random 2-D array exactly,
before and after replace_address."""
import pathlib

import pytest

import cucore
from cucore import LaunchConfig, ManagedMemoryResource, PinnedMemoryResource, Program, ProgramOptions, launch
from cucore.utils import StridedMemoryView

np = pytest.importorskip("numpy")
pytestmark = pytest.mark.gpu

KERNEL = pathlib.Path(__file__).resolve().parents[1] / "data" / "tma_tile_copy.cu"
TORCH_DTYPES = ["float32", "float16", "bfloat16", "complex64", "bool", "int64"]


def _torch_random(torch, shape, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, device="cuda", generator=g) > 0.5
    if dtype == torch.int64:
        return torch.randint(-1000, 1000, shape, device="cuda", generator=g)
    if dtype.is_complex:
        return torch.randn(shape, device="cuda", generator=g, dtype=dtype)
    return torch.rand(shape, device="cuda", generator=g).to(dtype) + 0.5


def _upload(device, stream, host):
    buf = device.allocate(host.nbytes, stream=stream)
    dst = StridedMemoryView.from_buffer(buf, host.shape, dtype=host.dtype)
    # From a copy: a copy in the wrong direction cannot leave `host` and the device equal.
    dst.copy_from(StridedMemoryView.from_dlpack(host.copy(), -1), stream)  # host source: blocking by default
    return buf, dst


@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_torch_both_ways(device, name):
    torch = pytest.importorskip("torch")
    dtype = getattr(torch, name)
    t = _torch_random(torch, (33, 20), dtype, 7)[:, 2:]  # strided
    v = StridedMemoryView.from_dlpack(t, -1)
    assert v.ptr == t.data_ptr() and v.shape == (33, 18) and v.strides == (20, 1)
    back = torch.from_dlpack(v)
    assert back.data_ptr() == t.data_ptr() and back.dtype == t.dtype and back.stride() == t.stride()
    assert torch.equal(back, t)
    # and a Buffer's bytes as PyTorch sees them
    s = device.create_stream()
    host = np.random.default_rng(8).integers(-128, 127, size=4096, dtype=np.int8)
    buf, view = _upload(device, s, host)
    tb = torch.from_dlpack(buf)
    assert tb.data_ptr() == buf.handle and tb.dtype == torch.int8 and buf.__dlpack_device__() == (2, 0)
    assert np.array_equal(tb.cpu().numpy(), host)
    tv = torch.from_dlpack(view)
    assert tv.data_ptr() == buf.handle and np.array_equal(tv.cpu().numpy(), host)


@pytest.mark.parametrize("name", ["float32", "float16", "complex64", "bool"])
def test_cupy_both_ways(device, name):
    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(9)
    host = (rng.random((17, 24)) > 0.5) if name == "bool" else (rng.random((17, 24)) + 0.5).astype(name)
    x = cp.asarray(host)[:, ::2]
    v = StridedMemoryView.from_dlpack(x, -1)
    assert v.ptr == x.data.ptr and v.strides == (24, 2)
    y = cp.from_dlpack(v)
    assert y.data.ptr == x.data.ptr and y.dtype == x.dtype
    assert np.array_equal(cp.asnumpy(y), host[:, ::2])
    s = device.create_stream()
    buf, view = _upload(device, s, host)
    z = cp.from_dlpack(view)
    assert z.data.ptr == buf.handle and np.array_equal(cp.asnumpy(z), host)


@pytest.mark.parametrize("kind", ["pinned", "managed"])
def test_numpy_takes_pinned_and_managed_memory(device, kind):
    s = device.create_stream()
    mr = PinnedMemoryResource() if kind == "pinned" else ManagedMemoryResource()
    host = np.random.default_rng(10).random((23, 31)).astype(np.float32)
    buf = mr.allocate(host.nbytes, stream=s)
    assert buf.__dlpack_device__() == ((3, 0) if kind == "pinned" else (13, 0))
    view = StridedMemoryView.from_buffer(buf, host.shape, dtype=np.float32)
    view.copy_from(StridedMemoryView.from_dlpack(host.copy(), -1), s, blocking=True)
    a = np.from_dlpack(view)
    assert a.ctypes.data == buf.handle and np.array_equal(a, host)
    a[3, 4] = 42.0  # the same memory: cucore's copy back to the host sees it
    out = np.zeros_like(host)
    view.copy_to(StridedMemoryView.from_dlpack(out, -1), s)
    assert out[3, 4] == 42.0 and np.array_equal(np.delete(out.ravel(), 3 * 31 + 4), np.delete(host.ravel(), 3 * 31 + 4))
    buf.close(s)


def test_numpy_to_device_and_back(device):
    s = device.create_stream()
    host = np.random.default_rng(12).random((40, 50))
    buf, dev_view = _upload(device, s, host)
    assert dev_view.__dlpack_device__() == (2, device.device_id)
    back = np.zeros_like(host)
    dev_view.copy_to(StridedMemoryView.from_dlpack(back, -1), s)  # to the host: blocking by default
    assert np.array_equal(back, host)


def test_tma_tile_copy_is_exact(device):
    if device.compute_capability.major < 9:
        pytest.skip("TMA needs compute capability 9.0")
    s = device.create_stream()
    rows, cols = 300, 200
    rng = np.random.default_rng(13)
    a = rng.random((rows, cols)).astype(np.float32) + 0.5
    b = rng.random((rows, cols)).astype(np.float32) + 0.5
    buf_a, view_a = _upload(device, s, a)
    buf_b, view_b = _upload(device, s, b)
    out = device.allocate(a.nbytes, stream=s)
    arch = f"sm_{device.compute_capability.major}{device.compute_capability.minor}"
    kernel = Program(KERNEL.read_text(), "c++", ProgramOptions(arch=arch)).compile("cubin").get_kernel("tma_tile_copy")
    tmap = view_a.as_tensor_map(box_dim=(32, 16))
    assert isinstance(tmap, cucore.TensorMapDescriptor) and tmap.device.device_id == device.device_id
    config = LaunchConfig(grid=((cols + 15) // 16, (rows + 31) // 32), block=128)
    for want in (a, b):
        out.fill(0, stream=s)
        launch(s, config, kernel, tmap, out, np.int32(rows), np.int32(cols))
        got = np.zeros_like(a)
        StridedMemoryView.from_buffer(out, a.shape, dtype=np.float32).copy_to(StridedMemoryView.from_dlpack(got, -1), s)
        mismatch = np.argwhere(got != want)
        assert mismatch.size == 0, f"{len(mismatch)} elements differ, first at {mismatch[:3].tolist()}"
        tmap.replace_address(view_b)
