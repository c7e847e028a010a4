"""Malformed input reaching the Python module: hand-built DLPack capsules, array
interface dicts, strings UTF-8 cannot encode, options of the wrong shape. Each is
refused with the error cuda.core raises (TypeError, ValueError, OverflowError,
BufferError) naming what is wrong; none crashes the interpreter or surfaces as
RuntimeError("std::bad_cast") or SystemError. All of it runs without a GPU."""
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cucore

from cucore import LaunchConfig, Linker, LinkerOptions, ObjectCode, Program, ProgramOptions
from cucore._layout import _StridedLayout
from cucore.utils import StridedMemoryView

from conftest import require_gpu

KERNEL = 'extern "C" __global__ void k(int* p) { *p = 1; }'

# ---- DLPack capsules built by hand -------------------------------------------------
# Each case runs in a child process: an importer that reads past the shape it
# was given crashes the child, which fails the test instead of pytest.
_CAPSULE_CHILD = textwrap.dedent(r"""
    import ctypes, resource, sys
    # A wild allocation (ndim 2**31-1 x 16 bytes) fails here instead of
    # taking the machine's memory.
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    from cucore.utils import StridedMemoryView

    class DLDevice(ctypes.Structure):
        _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]
    class DLDataType(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]
    class DLTensor(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                    ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                    ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]
    class DLManagedTensor(ctypes.Structure):
        pass
    DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                                ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor)))]
    class DLPackVersion(ctypes.Structure):
        _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]
    class DLManagedTensorVersioned(ctypes.Structure):
        pass
    DLManagedTensorVersioned._fields_ = [
        ("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))),
        ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]

    capsule_new = ctypes.pythonapi.PyCapsule_New
    capsule_new.restype = ctypes.py_object
    capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    capsule_valid = ctypes.pythonapi.PyCapsule_IsValid
    capsule_valid.restype = ctypes.c_int
    capsule_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]

    values = (ctypes.c_float * 24)(*range(24))
    keep = []

    def int64s(xs):
        if xs is None:
            return None
        a = (ctypes.c_int64 * len(xs))(*xs)
        keep.append(a)
        return ctypes.cast(a, ctypes.POINTER(ctypes.c_int64))

    def capsule(ndim, shape, strides=None, byte_offset=0, versioned=False, major=1, device=1):
        t = DLManagedTensorVersioned() if versioned else DLManagedTensor()
        if versioned:
            t.version = DLPackVersion(major, 0)
        d = t.dl_tensor
        d.data = ctypes.addressof(values)
        d.device = DLDevice(device, 0)
        d.ndim = ndim
        d.dtype = DLDataType(2, 32, 1)  # float32
        d.shape = int64s(shape)
        d.strides = int64s(strides)
        d.byte_offset = byte_offset
        keep.append(t)
        return capsule_new(ctypes.addressof(t), b"dltensor_versioned" if versioned else b"dltensor", None)

    class Producer:  # a DLPack producer of CPU memory
        def __init__(self, cap):
            self.cap = cap
        def __dlpack_device__(self):
            return (1, 0)
        def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
            return self.cap

    kwargs = eval(sys.argv[1])
    cap = capsule(**kwargs)
    try:
        v = StridedMemoryView.from_dlpack(Producer(cap), -1)
    except BaseException as e:
        name = b"dltensor_versioned" if kwargs.get("versioned") else b"dltensor"
        # A refused capsule stays its producer's (unconsumed) to release.
        print("raised", type(e).__name__, capsule_valid(cap, name), str(e).replace("\n", " "))
    else:
        n = v.ndim
        print("viewed", v.shape, v.strides, v.ptr - ctypes.addressof(values), v.is_device_accessible)
""")


def _capsule(**kwargs):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", _CAPSULE_CHILD, repr(kwargs)], capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 0, f"the child died (returncode {r.returncode}): {r.stderr[-2000:]}"
    return r.stdout.strip()


@pytest.mark.parametrize("kwargs, why", [
    (dict(ndim=2, shape=None), "ndim is 2 but shape is null"),
    (dict(ndim=1 << 20, shape=[4]), "ndim 1048576 is out of range (0 to 64)"),
    (dict(ndim=2**31 - 1, shape=[4]), "ndim 2147483647 is out of range"),
    (dict(ndim=-1, shape=[4]), "ndim -1 is out of range"),
    (dict(ndim=65, shape=[1] * 65), "ndim 65 is out of range"),
    (dict(ndim=2, shape=[2**40, 2**40]), "element count overflows"),
    (dict(ndim=2, shape=[2, 2], strides=[2**63 - 1, 1]), "strides reach beyond 64 bits"),
    (dict(ndim=1, shape=[4], byte_offset=2**64 - 8), "wraps the data pointer"),
    (dict(ndim=1, shape=[4], strides=[1], versioned=True, major=2), "DLPack version 2.0"),
    (dict(ndim=1, shape=[4], device=10), "device type 10"),
    (dict(ndim=2, shape=[4, -1]), "extent 1 is negative"),
], ids=lambda x: x if isinstance(x, str) else None)
def test_malformed_capsules_are_buffer_errors(kwargs, why):
    out = _capsule(**kwargs)
    assert out.startswith("raised BufferError 1 "), out
    assert why in out, out


def test_well_formed_cpu_capsules_are_viewed_without_a_gpu():
    float32 = 4
    assert _capsule(ndim=2, shape=[4, 6]) == "viewed (4, 6) None 0 False"
    assert _capsule(ndim=2, shape=[4, 3], strides=[6, 2], versioned=True) == "viewed (4, 3) (6, 2) 0 False"
    assert _capsule(ndim=1, shape=[4], strides=[-1], byte_offset=3 * float32) == f"viewed (4,) (-1,) {3 * float32} False"
    assert _capsule(ndim=64, shape=[1] * 63 + [24]) == f"viewed {(1,) * 63 + (24,)} None 0 False"
    assert _capsule(ndim=0, shape=None) == "viewed () None 0 False"


# ---- array interface dicts ---------------------------------------------------------------
class _Interface:
    def __init__(self, cuda, replace=None, **d):
        base = {"shape": (4,), "typestr": "<i4", "data": (0x10000, False), "version": 3}
        base.update(d)
        setattr(self, "__cuda_array_interface__" if cuda else "__array_interface__",
                base if replace is None else replace)


def _view(cuda, **kw):
    if cuda:
        return StridedMemoryView.from_cuda_array_interface(_Interface(True, **kw), -1)
    return StridedMemoryView.from_array_interface(_Interface(False, **kw))


BAD_INTERFACES = [
    (dict(data=("0x10000", False)), TypeError, "['data'][0] must be an int"),
    (dict(data=(1.5, False)), TypeError, "['data'][0] must be an int"),
    (dict(data=(-1, False)), OverflowError, "['data'][0] = -1"),
    (dict(data=(2**64, False)), OverflowError, "['data'][0] = 18446744073709551616"),
    (dict(data=(0x10000,)), TypeError, "['data'] must be a (pointer, read_only) tuple"),
    (dict(data=[0x10000, False]), TypeError, "['data'] must be a (pointer, read_only) tuple"),
    (dict(data=0x10000), TypeError, "['data'] must be a (pointer, read_only) tuple"),
    (dict(data=(0x10000, "no")), TypeError, "['data'][1] (read_only) must be a bool"),
    (dict(typestr=4), TypeError, "['typestr'] must be a str"),
    (dict(typestr="<\udcff4"), UnicodeEncodeError, "['typestr']"),
    (dict(typestr="<i"), ValueError, "typestr '<i' is too short"),
    (dict(typestr="i4"), ValueError, "typestr 'i4' is too short"),
    (dict(typestr="xi4"), ValueError, "typestr 'xi4' has no byte order"),
    (dict(typestr="<i4!"), ValueError, "typestr '<i4!' has trailing characters"),
    (dict(typestr="|V0"), ValueError, "has a size of 0 bytes"),
    (dict(shape=4), TypeError, "['shape'] must be a tuple of ints"),
    (dict(shape="4"), TypeError, "['shape'] must be a tuple of ints"),
    (dict(shape=(4, "x")), TypeError, "['shape'][1] must be an int"),
    (dict(shape=(4, None)), TypeError, "['shape'][1] must be an int"),
    (dict(shape=(2**63,)), OverflowError, "['shape'][0] = 9223372036854775808"),
    (dict(shape=(-1,)), ValueError, "extent 0 is negative (-1)"),
    (dict(shape=(2**40, 2**40)), ValueError, "element count overflows"),
    (dict(shape=(2**62,)), ValueError, "size in bytes overflows"),
    (dict(shape=(1,) * 65), ValueError, "at most 64 dimensions"),
    (dict(strides=("4",)), TypeError, "['strides'][0] must be an int"),
    (dict(strides=4), TypeError, "['strides'] must be a tuple of ints"),
    (dict(strides=(2**64,)), OverflowError, "['strides'][0]"),
    (dict(strides=(4, 4)), ValueError, "strides has 2 entries for a shape of 1"),
    (dict(shape=(2, 3), strides=(12,)), ValueError, "strides has 1 entries for a shape of 2"),
    (dict(strides=(6,)), ValueError, "not a multiple of the itemsize"),
    (dict(shape=(3, 2), strides=(2**62, 4)), ValueError, "strides reach beyond 64 bits"),
    (dict(data=(0, False), strides=(-4,)), ValueError, "reaches outside the address space"),
    (dict(data=(2**64 - 8, False)), ValueError, "reaches outside the address space"),
    (dict(mask=np.zeros(4, bool)), BufferError, "mask is not supported"),
]


@pytest.mark.parametrize("cuda", [True, False], ids=["cai", "array_interface"])
@pytest.mark.parametrize("kw, error, message", BAD_INTERFACES, ids=[str(c[0])[:60] for c in BAD_INTERFACES])
def test_malformed_array_interfaces_name_the_key(cuda, kw, error, message):
    with pytest.raises(error) as ei:
        _view(cuda, **kw)
    text = str(ei.value)
    assert message in text, text
    if "[" in message:
        assert ("__cuda_array_interface__" if cuda else "__array_interface__") in text, text
    assert "bad_cast" not in text


@pytest.mark.parametrize("stream, error, message", [
    (-1, ValueError, "must be None, 1, 2 or a stream handle, got -1"),
    (0, ValueError, "must be None, 1, 2 or a stream handle, got 0"),
    ("1", TypeError, "['stream'] must be an int"),
    (2**64, OverflowError, "['stream']"),
])
def test_a_cuda_array_interface_stream_is_one_the_protocol_allows(stream, error, message):
    with pytest.raises(error) as ei:
        _view(True, stream=stream)
    assert message in str(ei.value) and "__cuda_array_interface__" in str(ei.value)


def test_interfaces_that_are_not_dicts_or_lack_keys():
    for cuda in (True, False):
        with pytest.raises(TypeError, match="must be a dict"):
            _view(cuda, replace=[("shape", (4,))])
        for key in ("data", "typestr", "shape"):
            iface = _Interface(cuda)
            del getattr(iface, "__cuda_array_interface__" if cuda else "__array_interface__")[key]
            with pytest.raises(KeyError, match=key):  # as cuda.core (a missing key of the dict)
                (StridedMemoryView.from_cuda_array_interface(iface, -1) if cuda
                 else StridedMemoryView.from_array_interface(iface))
    with pytest.raises(TypeError, match="version"):
        _view(True, version="3")
    # What is well formed still reads: the values the dict gave, strides in elements.
    v = _view(False, shape=(2, 3), strides=(-12, 4), data=(0x10000 + 12, True))
    assert (v.ptr, v.shape, v.strides, v.readonly) == (0x10000 + 12, (2, 3), (-3, 1), True)
    e = _view(True, shape=(0, 5), strides=(2**62, 4), stream=2)
    assert (e.shape, e.size, e.strides) == ((0, 5), 0, (2**60, 1))


# ---- __dlpack_device__ -----------------------------------------------------------------------
class _BadDevice:
    def __init__(self, answer):
        self.answer = answer

    def __dlpack_device__(self):
        return self.answer

    def __dlpack__(self, **kw):
        raise AssertionError("__dlpack__ must not be called after a bad __dlpack_device__")


@pytest.mark.parametrize("answer, error, message", [
    ("cpu", TypeError, "__dlpack_device__() must return a (device_type, device_id) tuple"),
    ((1,), TypeError, "__dlpack_device__() must return a (device_type, device_id) tuple"),
    ([1, 0], TypeError, "__dlpack_device__() must return a (device_type, device_id) tuple"),
    (None, TypeError, "__dlpack_device__() must return a (device_type, device_id) tuple"),
    (("1", 0), TypeError, "__dlpack_device__()[0] must be an int"),
    ((1, 0.5), TypeError, "__dlpack_device__()[1] must be an int"),
    ((2**40, 0), OverflowError, "__dlpack_device__()[0]"),
])
def test_a_bad_dlpack_device_is_a_type_error(answer, error, message):
    with pytest.raises(error) as ei:
        StridedMemoryView.from_dlpack(_BadDevice(answer), -1)
    assert message in str(ei.value)


# ---- strings UTF-8 cannot encode ----------------------------------------------------------------
def _opts(**kw):
    return ProgramOptions(arch="sm_90", **kw)


@pytest.mark.parametrize("make, name", [
    (lambda: Program(KERNEL, "c++", ProgramOptions(arch="sm_\udcff")), "arch"),
    (lambda: Program(KERNEL, "c++", _opts(name="k\udcff.cu")), "name"),
    (lambda: Program(KERNEL, "c++", _opts(include_path=["/usr/include", "/opt/\udcff"])), "include_path[1]"),
    (lambda: Program(KERNEL, "c++", _opts(include_path="/opt/\ud800")), "include_path"),
    (lambda: Program(KERNEL, "c++", _opts(pre_include="\udcff.h")), "pre_include"),
    (lambda: Program(KERNEL, "c++", _opts(define_macro=("N", "\udcff"))), "define_macro"),
    (lambda: Program(KERNEL, "c++", _opts(std="c++\udcff")), "std"),
    (lambda: Program(KERNEL + "// \udcff\n", "c++", _opts()), "code"),
    (lambda: Program(KERNEL, "c\udcff", _opts()), "code_type"),
    (lambda: Program(KERNEL, "c++", _opts()).compile("ptx", name_expressions=["k\udcff"]), "name_expressions[0]"),
    (lambda: Linker(ObjectCode.from_ptx(b"//"), options=LinkerOptions(arch="sm_\udcff")), "arch"),
    (lambda: Linker(ObjectCode.from_ptx(b"//"), options=LinkerOptions(arch="sm_90", ptxas_options=["-\udcff"])),
     "ptxas_options[0]"),
    (lambda: ObjectCode.from_cubin(b"\x7fELF", name="k\udcff"), "name"),
    (lambda: ObjectCode.from_cubin(b"\x7fELF", symbol_mapping={"k\udcff": "k"}), "symbol_mapping"),
])
def test_strings_utf8_cannot_encode_are_unicode_errors_naming_the_argument(make, name):
    with pytest.raises(UnicodeEncodeError) as ei:  # a ValueError, as cuda.core's str.encode() raises
        make()
    text = str(ei.value)
    assert f"surrogates not allowed in {name}" in text, text
    assert isinstance(ei.value, ValueError)


# ---- options of the wrong shape ---------------------------------------------------------------
@pytest.mark.parametrize("kw, error, message", [
    (dict(include_path=5), TypeError, "include_path must be a str, bytes, an os.PathLike or a sequence of them, got 5"),
    (dict(include_path=True), TypeError, "include_path must be"),
    (dict(include_path=[None]), TypeError, "include_path[0] must be a str, bytes or an os.PathLike, got None"),
    (dict(include_path=["/a", 5]), TypeError, "include_path[1] must be"),
    (dict(pre_include=[b"a.h", None]), TypeError, "pre_include[1] must be"),
    (dict(undefine_macro=3.5), TypeError, "undefine_macro must be"),
    (dict(ptxas_options=[None]), TypeError, "ptxas_options[0] must be"),
])
def test_program_option_lists_refuse_what_they_cannot_pass(kw, error, message):
    with pytest.raises(error) as ei:
        _opts(**kw).as_bytes("nvrtc")
    assert message in str(ei.value)
    with pytest.raises(error):
        Program(KERNEL, "c++", _opts(**kw))
    # include_path=False still passes nothing, as in cuda.core.
    assert not any(f.startswith(b"--include-path") for f in _opts(include_path=False, use_toolkit_headers=False)
                   .as_bytes("nvrtc"))


@pytest.mark.parametrize("kw, error, message", [
    (dict(kernels_used=5), TypeError, "kernels_used must be a str"),
    (dict(variables_used=[None]), TypeError, "variables_used[0] must be"),
    (dict(ptxas_options=["-v\0-O0"]), ValueError, "ptxas_options: entry 0 contains a NUL byte at offset 2"),
    (dict(variables_used=["x", "a\0"]), ValueError, "variables_used: entry 1 contains a NUL byte at offset 1"),
    (dict(kernels_used="k\0"), ValueError, "kernels_used: entry 0 contains a NUL byte"),
])
def test_linker_options_refuse_what_nvjitlink_cannot_take(kw, error, message):
    with pytest.raises(error) as ei:
        LinkerOptions(arch="sm_90", **kw).as_bytes()
    assert message in str(ei.value)
    ptx = Program(KERNEL, "c++", _opts()).compile("ptx")
    with pytest.raises(error):
        Linker(ptx, options=LinkerOptions(arch="sm_90", **kw))


@pytest.mark.parametrize("cache", [5, "cache", object(), [1, 2]])
def test_compile_cache_must_be_a_program_cache(cache):
    with pytest.raises(TypeError, match="cache must be a program cache") as ei:
        Program(KERNEL, "c++", _opts()).compile("ptx", cache=cache)
    assert "AttributeError" not in str(ei.value)


def test_compile_takes_mapping_caches():
    cache = {}
    first = Program(KERNEL, "c++", _opts()).compile("ptx", cache=cache)
    assert len(cache) == 1
    assert Program(KERNEL, "c++", _opts()).compile("ptx", cache=cache).code == first.code


# ---- LaunchConfig -----------------------------------------------------------------------------
@pytest.mark.parametrize("kw, error, message", [
    (dict(grid=1, block=1, shmem_size=2**64), OverflowError, "LaunchConfig.shmem_size"),
    (dict(grid=1, block=1, shmem_size=2**40), ValueError, "shmem_size of 1099511627776 bytes does not fit in 32 bits"),
    (dict(grid=1, block=1, shmem_size="1"), TypeError, "LaunchConfig.shmem_size must be an int"),
    (dict(grid=None, block=1), ValueError, "grid is not set"),
    (dict(grid=1, block=None), ValueError, "block is not set"),
    (dict(), ValueError, "grid is not set"),
    (dict(grid=(2**64, 1), block=1), OverflowError, "LaunchConfig.grid"),
    (dict(grid=2**40, block=1), ValueError, "does not fit in 32 bits"),
    (dict(grid=(1, "2"), block=1), TypeError, "LaunchConfig.grid must be an int or a tuple of up to 3 ints"),
])
def test_launch_configs_are_checked_when_made(kw, error, message):
    with pytest.raises(error) as ei:
        LaunchConfig(**kw)
    assert message in str(ei.value)


# ---- layouts --------------------------------------------------------------------------------
def test_a_layout_whose_arithmetic_overflows_is_refused():
    a = np.arange(8, dtype=np.float32)
    v = StridedMemoryView.from_array_interface(a)
    for layout, message in [
        (_StridedLayout((2**62, 4), None, 4), "element count overflows"),
        (_StridedLayout((2**61,), None, 4), "size in bytes overflows"),
        (_StridedLayout((3, 3), (2**62, 1), 4), "strides reach beyond 64 bits"),
        (_StridedLayout((1,) * 65, None, 4), "at most 64 dimensions"),
        (_StridedLayout((2**63,), None, 4), "layout.shape[0]"),
    ]:
        with pytest.raises((ValueError, OverflowError)) as ei:
            v.view(layout=layout)
        assert message in str(ei.value), (layout, str(ei.value))
    w = v.view(layout=_StridedLayout((2, 4), (1, 2), 4))
    assert (w.shape, w.strides, w.ptr) == ((2, 4), (1, 2), v.ptr)


def test_buffer_views_refuse_negative_extents_and_overflow():
    require_gpu()  # StridedMemoryView.from_buffer asks the driver where the Buffer's memory is
    import cucore

    dev = cucore.Device(0)
    dev.set_current()
    buf = dev.memory_resource.allocate(64)
    for shape, message in [((-1, 0), "extent 0 is negative"), ((0, -4), "extent 1 is negative"),
                           ((2**62, 4, 0), "element count overflows"), ((2**62, 4), "element count overflows")]:
        with pytest.raises(ValueError, match=message):
            StridedMemoryView.from_buffer(buf, shape, itemsize=4)
    with pytest.raises(ValueError, match="power of two"):
        StridedMemoryView.from_buffer(buf, (2,), itemsize=3)
    wide = StridedMemoryView.from_buffer(buf, (2,), itemsize=32)
    assert wide.dtype.itemsize == 32 and wide.shape == (2,)
    with pytest.raises(ValueError, match="more bytes than the buffer has"):
        StridedMemoryView.from_buffer(buf, (3,), itemsize=32)
    buf.close()


def test_a_conversion_without_its_own_check_is_a_type_error_not_bad_cast():
    # make_program_cache_key reads its code with nanobind's plain cast, which
    # fails on a lone surrogate: the module's translation makes that a typed
    # error (TypeError), never RuntimeError("std::bad_cast").
    from cucore.utils import make_program_cache_key

    with pytest.raises((TypeError, ValueError)) as ei:
        make_program_cache_key(code="k\udcff", code_type="c++", options=_opts(), target_type="ptx")
    assert not isinstance(ei.value, RuntimeError)
    assert "bad_cast" not in str(ei.value)


@pytest.mark.parametrize(
    "name, use",
    [
        ("OpaqueArray", "Device.create_opaque_array"),
        ("MipmappedArray", "Device.create_mipmapped_array"),
        ("ResourceDescriptor", "ResourceDescriptor.from_"),
        ("TextureObject", "Device.create_texture_object"),
        ("SurfaceObject", "Device.create_surface_object"),
        ("TensorMapDescriptor", "StridedMemoryView.as_tensor_map"),
    ],
)
def test_objects_made_only_by_factories_refuse_init_as_cuda_core(name, use):
    # cuda.core raises RuntimeError("<name> cannot be instantiated directly. Use ...")
    # from __init__, whatever the arguments.
    cls = getattr(cucore, name, None) or getattr(cucore.texture, name)
    for args, kwargs in [((), {}), ((1, 2), {}), ((), {"shape": (4,)})]:
        with pytest.raises(RuntimeError, match=rf"^{name} cannot be instantiated directly\. Use {re.escape(use)}"):
            cls(*args, **kwargs)
