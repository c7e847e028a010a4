"""Interop with PyTorch and CuPy: Buffer's DLPack export (capsules hold the
Buffer), views of their device arrays (pointer, shape, strides, the DLPack C
exchange API), their streams launched on, and Buffers read by them with no
copy. GPU tests: skipped with a reason when no GPU is usable, failed instead under
CUCORE_REQUIRE_GPU=1."""
import pytest

from cucore import LaunchConfig, Stream, launch
from cucore.utils import StridedMemoryView

np = pytest.importorskip("numpy")
pytestmark = pytest.mark.gpu


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
        assert int(device.create_stream(ts).handle) == ts.cuda_stream
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
    v = StridedMemoryView(t, int(consumer.handle))
    assert v.ptr == t.data_ptr() and v.shape == (4, 3) and v.strides == (6, 2)
    assert v.dtype == np.float32 and v.device_id == 0 and v.is_device_accessible and v.exporting_obj is t
    v2 = StridedMemoryView.from_dlpack(t, -1)
    assert v2.ptr == v.ptr and v2.shape == v.shape
