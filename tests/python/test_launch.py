"""Launching kernels: LaunchConfig's forms and refusals and launch's argument
checks without a GPU; on a GPU (the `device` fixture, tests marked gpu), SAXPY
with every argument packing, kernel attributes and occupancy, argument
validation naming the kernel and argument, any __cuda_stream__ object as the
stream, template kernels, launches from threads, and numpy scalars reaching the
kernel bit for bit."""
import ctypes
import threading

import pytest

import cucore
from cucore import Device, LaunchConfig, Program, ProgramOptions, launch

from conftest import TEMPLATE_SRC

np = pytest.importorskip("numpy")


def test_launch_config():
    c = LaunchConfig(grid=(10 + 255) // 256, block=256)
    assert c.grid == (1, 1, 1) and c.block == (256, 1, 1)
    assert c.cluster is None and c.shmem_size == 0 and not c.is_cooperative
    c2 = LaunchConfig(grid=(2, 3), block=(16, 16), shmem_size=1024, is_cooperative=True)
    assert c2.grid == (2, 3, 1) and c2.block == (16, 16, 1) and c2.shmem_size == 1024 and c2.is_cooperative
    assert LaunchConfig(grid=4, block=32) == LaunchConfig(grid=(4,), block=(32, 1, 1))
    assert "LaunchConfig" in repr(c)
    for bad in (dict(grid=0, block=1), dict(grid=1, block=(1, 0)), dict(grid=-1, block=1),
                dict(grid=(1, 2, 3, 4), block=1), dict(grid=1, block=1, shmem_size=-5)):
        with pytest.raises(ValueError):
            LaunchConfig(**bad)
    with pytest.raises(TypeError):
        LaunchConfig(grid="x", block=1)


def test_launch_argument_types_checked_before_gpu():
    with pytest.raises(TypeError):
        cucore.launch(object(), LaunchConfig(grid=1, block=1), None)
    with pytest.raises(TypeError):
        cucore.launch()


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


@pytest.mark.gpu
@pytest.mark.parametrize("pack", ["buffers", "handles", "numpy", "mixed"])
def test_launch_saxpy(device, saxpy, pack):
    run_saxpy(saxpy, device.create_stream(), pack=pack)


@pytest.mark.gpu
def test_kernel_info(device, saxpy):
    assert saxpy.num_arguments == 5
    info = saxpy.arguments_info
    assert [p.size for p in info] == [4, 8, 8, 8, 4]
    # Properties, as cuda.core 1.x has them (numba-cuda reads them so).
    assert isinstance(saxpy.attributes.num_regs, int) and saxpy.attributes.num_regs > 0
    assert saxpy.attributes[0].num_regs == saxpy.attributes[device].num_regs == saxpy.attributes.num_regs
    assert type(saxpy.attributes.cache_mode_ca) is bool
    assert 0 < saxpy.attributes.max_threads_per_block <= 1024
    assert saxpy.occupancy.max_active_blocks_per_multiprocessor(256, 0) > 0
    r = saxpy.occupancy.max_potential_block_size(0, 0)
    assert r.max_block_size > 0


@pytest.mark.gpu
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


@pytest.mark.gpu
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
            return (0, int(s.handle))

    class Attribute:
        __cuda_stream__ = (0, int(s.handle))

    class BadVersion:
        def __cuda_stream__(self):
            return (1, int(s.handle))

    class BadLength:
        def __cuda_stream__(self):
            return (0, int(s.handle), 0)

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


@pytest.mark.gpu
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


@pytest.mark.gpu
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


@pytest.mark.gpu
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
