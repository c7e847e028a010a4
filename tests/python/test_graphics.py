"""cucore.GraphicsResource as cuda.core's: OpenGL buffers and images registered
with CUDA, mapped on a stream (a Buffer over the mapped memory whose close
unmaps; for an image, cucore's extra, an OpaqueArray over the mapped array),
unmapped, unregistered, used as context managers, with cuda.core's errors.

The GL side is a headless context through EGL's device platform, made with
ctypes (tests/python/headless_gl.py; the loader libraries from
$CUCORE_GL_LIBDIR, which scripts/gpu-check points at .carry/gl). The first
tests need no GPU: the constructor's refusal, the class's surface, the flags'
and names' checks (made before the driver is reached). The rest need a GPU
and a headless GL context on it: they skip saying why without one, and fail
under CUCORE_REQUIRE_GPU=1.
"""
import gc
import warnings

import numpy as np
import pytest

import cucore
from cucore import Buffer, GraphicsResource
from cucore.texture import OpaqueArray
from cucore.utils import StridedMemoryView

import headless_gl
from conftest import REQUIRE_GPU

# ---------------------------------------------------------------------------
# No GPU needed
# ---------------------------------------------------------------------------


def test_exported_where_cuda_core_exports_it():
    assert cucore.GraphicsResource is GraphicsResource
    assert "GraphicsResource" in cucore.__all__
    assert GraphicsResource.__module__.startswith("cucore")


def test_direct_init_raises_cuda_cores_runtime_error():
    with pytest.raises(RuntimeError, match="cannot be instantiated directly") as e:
        GraphicsResource()
    assert str(e.value) == (
        "GraphicsResource objects cannot be instantiated directly. "
        "Use GraphicsResource.from_gl_buffer() or GraphicsResource.from_gl_image()."
    )
    with pytest.raises(RuntimeError, match="cannot be instantiated directly"):
        GraphicsResource(1, flags="none")


def test_surface_is_cuda_cores():
    import inspect

    for name in ("handle", "resource_handle", "is_mapped", "is_closed"):
        assert inspect.isdatadescriptor(inspect.getattr_static(GraphicsResource, name)), name
    for name in ("from_gl_buffer", "from_gl_image"):
        assert callable(getattr(GraphicsResource, name))
    for name in ("map", "unmap", "close", "__enter__", "__exit__", "__repr__"):
        assert callable(inspect.getattr_static(GraphicsResource, name)), name
    assert GraphicsResource.__weakrefoffset__ != 0  # takes weak references, as every cucore class


@pytest.mark.parametrize(
    "flags, error, match",
    [
        ("bogus", ValueError,
         r"^Unknown register flag 'bogus'\. Valid flags: none, read_only, surface_load_store, texture_gather, "
         r"write_discard$"),
        (("read_only", "nope"), ValueError, r"^Unknown register flag 'nope'\."),
        ([1], ValueError, r"^Unknown register flag 1\. Valid flags: "),
        ([b"read_only"], ValueError, r"^Unknown register flag b'read_only'\."),
        ([["read_only"]], TypeError, "unhashable"),
        (5, TypeError, "not iterable"),
    ],
)
def test_bad_flags_are_refused_before_the_driver_is_asked(flags, error, match):
    # cuda.core parses the flags before registering: no driver, no GL needed.
    with pytest.raises(error, match=match):
        GraphicsResource.from_gl_buffer(1, flags=flags)
    with pytest.raises(error, match=match):
        GraphicsResource.from_gl_image(1, headless_gl.GL_TEXTURE_2D, flags=flags)


def test_gl_names_are_ints():
    with pytest.raises(TypeError):
        GraphicsResource.from_gl_buffer("1")
    with pytest.raises(TypeError):
        GraphicsResource.from_gl_image(1.0, headless_gl.GL_TEXTURE_2D)
    with pytest.raises(OverflowError):
        GraphicsResource.from_gl_buffer(1 << 40)
    with pytest.raises(OverflowError):
        GraphicsResource.from_gl_image(1, 1 << 33)
    with pytest.raises(TypeError):
        GraphicsResource.from_gl_buffer(1, "read_only")  # flags is keyword-only
    with pytest.raises(TypeError):
        GraphicsResource.from_gl_image(1, headless_gl.GL_TEXTURE_2D, "read_only")


def test_headless_gl_helper_round_trips_on_this_machine():
    """The GL half of the GPU tests, on whatever EGL is here (Mesa's software device on the CPU machine)."""
    try:
        gl = headless_gl.HeadlessGL.create(0)
    except headless_gl.GLUnavailable as e:
        if REQUIRE_GPU:
            pytest.fail(f"no headless GL: {e}")
        pytest.skip(f"no headless EGL/OpenGL here: {e}")
    try:
        rng = np.random.default_rng(5)
        data = rng.uniform(-100, 100, 10007).astype(np.float32)
        b = gl.create_buffer(data)
        back = np.frombuffer(gl.read_buffer(b, data.nbytes), dtype=np.float32)
        np.testing.assert_array_equal(back, data)
        texels = rng.uniform(-1, 1, (13, 29, 4)).astype(np.float32)  # height 13, width 29
        t = gl.create_texture(29, 13, texels)
        tb = np.frombuffer(gl.read_texture(t, texels.nbytes), dtype=np.float32).reshape(texels.shape)
        np.testing.assert_array_equal(tb, texels)
        assert gl.error() == 0
        gl.delete_buffer(b)
        gl.delete_texture(t)
    finally:
        gl.close()


# ---------------------------------------------------------------------------
# GPU and headless GL
# ---------------------------------------------------------------------------


@pytest.fixture
def gl(device):
    """A GL context current on this thread on CUDA device 0's EGL device."""
    try:
        ctx = headless_gl.HeadlessGL.create(0, require_cuda=True)
    except headless_gl.GLUnavailable as e:
        if REQUIRE_GPU:
            pytest.fail(f"no headless GL on the GPU: {e}")
        pytest.skip(f"needs headless EGL/OpenGL on the GPU: {e}")
    yield ctx
    ctx.close()


@pytest.fixture
def stream(device):
    return device.create_stream()


def _floats(n, seed):
    x = np.random.default_rng(seed).uniform(-100, 100, n).astype(np.float32)
    x[x == 0] = 1.5  # never zero: a zero would hide a missing write
    return x


@pytest.fixture
def vbo(gl):
    """A GL buffer of 4096 random float32; (name, data)."""
    data = _floats(4096, 1)
    name = gl.create_buffer(data)
    assert gl.error() == 0
    gl.finish()
    yield name, data
    gl.delete_buffer(name)


def test_register_default_flags(vbo):
    name, _ = vbo
    r = GraphicsResource.from_gl_buffer(name)
    assert r.handle != 0
    assert isinstance(r.handle, int)
    assert r.resource_handle == r.handle
    assert not isinstance(r, Buffer)
    assert not r.is_mapped
    assert not r.is_closed
    r.close()


@pytest.mark.parametrize("flags", ["none", "read_only", "write_discard", ("read_only",), ["write_discard", "none"]])
def test_register_with_flags(vbo, flags):
    r = GraphicsResource.from_gl_buffer(vbo[0], flags=flags)
    assert r.handle != 0
    r.close()


def test_close_is_idempotent_and_the_object_stays_truthy(vbo):
    r = GraphicsResource.from_gl_buffer(vbo[0])
    r.close()
    assert r.is_closed
    assert r.handle == 0
    assert bool(r) is True
    r.close()


def test_map_returns_a_buffer_over_the_gl_buffers_memory(vbo, stream):
    name, data = vbo
    r = GraphicsResource.from_gl_buffer(name, flags="write_discard")
    mapped = r.map(stream=stream)
    assert r.is_mapped
    assert isinstance(mapped, Buffer)
    assert mapped is not r
    assert mapped.size == data.nbytes
    assert mapped.handle != 0
    assert r.handle != mapped.handle
    assert mapped.memory_resource is None
    assert mapped.is_device_accessible
    r.unmap(stream=stream)
    assert mapped.handle == 0
    assert mapped.size == 0
    assert mapped.is_closed
    assert not r.is_mapped
    r.close()


def test_the_mapped_buffer_reads_and_writes_every_element(gl, vbo, stream):
    name, data = vbo
    r = GraphicsResource.from_gl_buffer(name)
    buf = r.map(stream=stream)
    got = np.zeros_like(data)
    buf.copy_to(got, stream=stream)
    stream.sync()
    np.testing.assert_array_equal(got, data)  # GL's data, read by CUDA
    written = _floats(data.size, 2)
    buf.copy_from(written, stream=stream)  # CUDA writes the GL buffer
    r.unmap(stream=stream)
    stream.sync()
    back = np.frombuffer(gl.read_buffer(name, data.nbytes), dtype=np.float32)
    assert gl.error() == 0
    np.testing.assert_array_equal(back, written)
    r.close()


def test_a_kernel_writes_the_mapped_buffer(gl, vbo, stream, device, arch):
    from cucore import LaunchConfig, Program, ProgramOptions, launch

    name, data = vbo
    code = Program(
        'extern "C" __global__ void twice(float* x, int n) {'
        " int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = 2.0f * x[i] + 1.0f; }",
        code_type="c++",
        options=ProgramOptions(arch=arch),
    ).compile("cubin")
    kernel = code.get_kernel("twice")
    with GraphicsResource.from_gl_buffer(name, stream=stream) as buf:
        launch(stream, LaunchConfig(grid=(data.size + 255) // 256, block=256), kernel, buf, np.int32(data.size))
    stream.sync()
    back = np.frombuffer(gl.read_buffer(name, data.nbytes), dtype=np.float32)
    np.testing.assert_array_equal(back, 2.0 * data + 1.0)


def test_context_manager_unmaps(vbo, stream):
    r = GraphicsResource.from_gl_buffer(vbo[0], flags="write_discard")
    with r.map(stream=stream) as buf:
        assert isinstance(buf, Buffer)
        assert r.is_mapped
        assert buf.size > 0
        assert buf.handle != 0
    assert buf.handle == 0
    assert not r.is_mapped
    r.close()


def test_context_manager_unmaps_on_exception(vbo, stream):
    r = GraphicsResource.from_gl_buffer(vbo[0], flags="write_discard")
    with pytest.raises(ValueError, match="test error"), r.map(stream=stream):
        assert r.is_mapped
        raise ValueError("test error")
    assert not r.is_mapped
    r.close()


def test_strided_memory_view_from_mapped_buffer(vbo, stream):
    r = GraphicsResource.from_gl_buffer(vbo[0], flags="write_discard")
    with r.map(stream=stream) as buf:
        view = StridedMemoryView.from_buffer(buf, shape=(4096,), dtype=np.dtype(np.float32))
        assert view.ptr == int(buf.handle)
        assert view.shape == (4096,)
        assert view.is_device_accessible
    r.close()


def test_from_gl_buffer_with_stream_maps_on_entry(vbo, stream):
    name, data = vbo
    with GraphicsResource.from_gl_buffer(name, stream=stream) as buf:
        assert isinstance(buf, Buffer)
        assert buf.size == data.nbytes
        view = StridedMemoryView.from_buffer(buf, shape=(data.size,), dtype=np.dtype(np.float32))
        assert view.ptr == int(buf.handle)
    assert buf.handle == 0
    assert buf.size == 0


def test_resource_context_manager_closes(vbo):
    with GraphicsResource.from_gl_buffer(vbo[0], flags="write_discard") as r:
        assert isinstance(r, GraphicsResource)
        assert r.handle != 0
        assert not r.is_mapped
    assert r.handle == 0
    assert r.is_closed


def test_chained_map_context_manager_unmaps(vbo, stream):
    with GraphicsResource.from_gl_buffer(vbo[0], flags="write_discard").map(stream=stream) as buf:
        assert isinstance(buf, Buffer)
        assert buf.handle != 0
    assert buf.handle == 0
    assert buf.size == 0


def test_map_requires_an_explicit_keyword_stream(vbo, stream):
    r = GraphicsResource.from_gl_buffer(vbo[0], flags="write_discard")
    try:
        with pytest.raises(TypeError, match=r"keyword-only argument"):
            r.map()
        with pytest.raises(TypeError, match="positional argument"):
            r.map(stream)
        with pytest.raises(TypeError, match="unexpected keyword argument 'strem'"):
            r.map(strem=stream)
        assert not r.is_mapped
    finally:
        r.close()


def test_double_map_raises(vbo, stream):
    r = GraphicsResource.from_gl_buffer(vbo[0])
    buf = r.map(stream=stream)
    with pytest.raises(RuntimeError, match="already mapped"):
        r.map(stream=stream)
    assert r.is_mapped and not buf.is_closed
    r.unmap()
    r.close()


def test_unmap_without_map_raises(vbo):
    r = GraphicsResource.from_gl_buffer(vbo[0])
    with pytest.raises(RuntimeError, match="not mapped"):
        r.unmap()
    r.close()


def test_use_after_close_raises(vbo, stream):
    r = GraphicsResource.from_gl_buffer(vbo[0])
    r.close()
    with pytest.raises(RuntimeError, match="has been closed"):
        r.map(stream=stream)
    with pytest.raises(RuntimeError, match="has been closed"):
        r.unmap()
    with pytest.raises(RuntimeError, match="has been closed"):
        r.unmap(stream=stream)


def test_close_while_mapped_unmaps_then_unregisters(vbo, stream):
    r = GraphicsResource.from_gl_buffer(vbo[0], flags="write_discard")
    buf = r.map(stream=stream)
    assert r.is_mapped
    r.close()
    assert not r.is_mapped
    assert buf.handle == 0
    # The GL buffer is free again: registered and mapped anew.
    with GraphicsResource.from_gl_buffer(vbo[0], stream=stream) as again:
        assert again.size == vbo[1].nbytes


def test_buffer_close_updates_resource_state(vbo, stream):
    r = GraphicsResource.from_gl_buffer(vbo[0], flags="write_discard")
    buf = r.map(stream=stream)
    assert r.is_mapped
    buf.close()
    assert not r.is_mapped
    buf2 = r.map(stream=stream)  # mapped again: a new Buffer
    assert buf2 is not buf
    assert buf.is_closed and not buf2.is_closed
    r.close()


def test_a_dropped_resource_keeps_its_mapped_buffer_valid(vbo, stream):
    name, data = vbo
    r = GraphicsResource.from_gl_buffer(name)
    buf = r.map(stream=stream)
    del r
    gc.collect()
    got = np.zeros_like(data)
    buf.copy_to(got, stream=stream)  # still mapped: the Buffer holds the mapping and the registration
    stream.sync()
    np.testing.assert_array_equal(got, data)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")  # a failed unmap or unregister would be a CUDAWarning
        buf.close()
        del buf
        gc.collect()
    assert [str(w.message) for w in seen if issubclass(w.category, cucore.CUDAWarning)] == []


def test_gc_cleanup_while_mapped(vbo, stream):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        r = GraphicsResource.from_gl_buffer(vbo[0])
        r.map(stream=stream)
        assert r.handle != 0
        del r  # mapped: unmapped, then unregistered
        gc.collect()
    assert [str(w.message) for w in seen if issubclass(w.category, cucore.CUDAWarning)] == []
    # Unmapped and unregistered: the buffer registers and maps again.
    with GraphicsResource.from_gl_buffer(vbo[0], stream=stream) as buf:
        assert buf.size == vbo[1].nbytes


def test_repr(vbo, stream):
    r = GraphicsResource.from_gl_buffer(vbo[0])
    assert repr(r) == f"<GraphicsResource handle={r.handle:#x}>"
    r.map(stream=stream)
    assert repr(r) == f"<GraphicsResource handle={r.handle:#x} mapped>"
    r.close()
    assert repr(r) == "<GraphicsResource handle=0x0 closed>"


def test_set_map_flags(vbo, stream):
    r = GraphicsResource.from_gl_buffer(vbo[0])
    r.set_map_flags("write_discard")
    with pytest.raises(ValueError, match="Unknown map flag 'surface_load_store'"):
        r.set_map_flags("surface_load_store")
    r.map(stream=stream)
    with pytest.raises(cucore.CUDAError):
        r.set_map_flags("read_only")  # the driver refuses while mapped
    r.close()


# ---- images: cucore's extra (cuda.core 1.2 maps only buffers) ----


def test_register_image(gl):
    texels = _floats(16 * 16 * 4, 3)
    tex = gl.create_texture(16, 16, texels)
    try:
        r = GraphicsResource.from_gl_image(tex, headless_gl.GL_TEXTURE_2D)
        assert r.handle != 0
        assert not r.is_mapped
        r.close()
        r = GraphicsResource.from_gl_image(tex, headless_gl.GL_TEXTURE_2D, flags=("surface_load_store", "read_only"))
        r.close()
    finally:
        gl.delete_texture(tex)


def test_an_image_maps_as_an_opaque_array_of_every_texel(gl, stream, device):
    w, h = 65, 33
    texels = _floats(w * h * 4, 4).reshape(h, w, 4)
    tex = gl.create_texture(w, h, texels)
    assert gl.error() == 0
    gl.finish()
    r = GraphicsResource.from_gl_image(tex, headless_gl.GL_TEXTURE_2D)
    arr = r.map(stream=stream)
    assert isinstance(arr, OpaqueArray)
    assert r.is_mapped
    assert arr.shape == (w, h)
    assert arr.num_channels == 4
    assert arr.format.name == "FLOAT32"
    assert arr.size_bytes == texels.nbytes
    # Into device memory, then here: every texel.
    dbuf = device.memory_resource.allocate(arr.size_bytes, stream=stream)
    arr.copy_to(dbuf, stream=stream)
    got = np.zeros_like(texels)
    dbuf.copy_to(got, stream=stream)
    stream.sync()
    np.testing.assert_array_equal(got, texels)
    # Layer 0, level 0 again as its own array (the same CUDA array).
    assert r.mapped_array(0, 0).handle == arr.handle
    # Written through the mapped array; GL reads it after the unmap.
    written = _floats(w * h * 4, 5).reshape(h, w, 4)
    arr.copy_from(written, stream=stream)
    r.unmap(stream=stream)
    assert arr.is_closed
    assert not r.is_mapped
    stream.sync()
    back = np.frombuffer(gl.read_texture(tex, written.nbytes), dtype=np.float32).reshape(written.shape)
    np.testing.assert_array_equal(back, written)
    with pytest.raises(RuntimeError, match="not mapped"):
        r.mapped_array()
    with r.map(stream=stream) as again:  # the array's `with` unmaps too
        assert isinstance(again, OpaqueArray)
    assert not r.is_mapped
    r.close()
    gl.delete_texture(tex)
