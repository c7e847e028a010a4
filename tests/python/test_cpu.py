"""Tests that run without a GPU (CI): import, compilation, errors, caches and
keys, StridedMemoryView over NumPy arrays, option validation, the doctor."""
import os
import pickle
import subprocess
import sys
import threading

import pytest

import cucore
from cucore import (
    CompileError,
    CudaError,
    CUDAError,
    LaunchConfig,
    Linker,
    LinkerOptions,
    NVRTCError,
    ObjectCode,
    Program,
    ProgramOptions,
)
from cucore.utils import (
    FileStreamProgramCache,
    InMemoryProgramCache,
    ProgramCacheResource,
    StridedMemoryView,
    args_viewable_as_strided_memory,
    make_program_cache_key,
)

from conftest import HAS_GPU, SAXPY_SRC, TEMPLATE_SRC

np = pytest.importorskip("numpy")


# ---- import and names --------------------------------------------------------------
CUDA_CORE_NAMES = [
    "Buffer", "Context", "Device", "DeviceMemoryResource", "DeviceMemoryResourceOptions", "Event",
    "EventOptions", "Kernel", "LEGACY_DEFAULT_STREAM", "LaunchConfig", "LegacyPinnedMemoryResource",
    "Linker", "LinkerOptions", "ManagedMemoryResource", "ManagedMemoryResourceOptions", "MemoryResource",
    "ObjectCode", "PER_THREAD_DEFAULT_STREAM", "PinnedMemoryResource", "PinnedMemoryResourceOptions",
    "Program", "ProgramOptions", "Stream", "StreamOptions", "launch", "utils",
]
UTILS_NAMES = ["FileStreamProgramCache", "InMemoryProgramCache", "ProgramCacheResource", "StridedMemoryView",
               "args_viewable_as_strided_memory", "make_program_cache_key"]


def test_import_names():
    for n in CUDA_CORE_NAMES:
        assert hasattr(cucore, n), n
    for n in UTILS_NAMES:
        assert hasattr(cucore.utils, n), n
    assert isinstance(cucore.__version__, str)


def test_stub_files_ship():
    pkg = os.path.dirname(cucore.__file__)
    assert os.path.exists(os.path.join(pkg, "py.typed"))
    assert os.path.exists(os.path.join(pkg, "_core.pyi"))


def test_exception_hierarchy():
    assert issubclass(cucore.Error, RuntimeError)
    assert issubclass(CudaError, cucore.Error)
    assert CUDAError is CudaError and NVRTCError is CompileError
    assert issubclass(CompileError, CudaError)
    assert issubclass(cucore.LibraryNotFoundError, cucore.Error)
    assert issubclass(cucore.FeatureUnavailableError, cucore.Error)
    assert CompileError.__module__ == "cucore"


def test_no_driver_is_library_not_found():
    info = cucore.pathfinder.find("driver")
    if info.found:
        # A machine with the driver: devices count and Device(0) works.
        assert cucore.Device.count() >= 1
        assert cucore.Device(0).device_id == 0
        return
    with pytest.raises(cucore.LibraryNotFoundError) as ei:
        cucore.Device(0)
    assert "libcuda" in str(ei.value)
    assert ei.value.component
    assert isinstance(ei.value.searched, list) and ei.value.searched


# ---- compilation -----------------------------------------------------------------------
def test_compile_cubin(arch):
    prog = Program(SAXPY_SRC, "c++", options=ProgramOptions(arch=arch))
    obj = prog.compile("cubin")
    assert isinstance(obj, ObjectCode)
    assert obj.code_type == "cubin"
    assert obj.code[:4] == b"\x7fELF"
    assert bytes(obj) == obj.code


def test_compile_ptx(arch):
    obj = Program(SAXPY_SRC, "c++", ProgramOptions(arch=arch)).compile("ptx")
    assert obj.code_type == "ptx"
    assert b".entry saxpy" in obj.code


def test_compile_name_expressions(arch):
    obj = Program(TEMPLATE_SRC, "c++", ProgramOptions(arch=arch, std="c++17")).compile(
        "cubin", name_expressions=("scale<float>", "scale<int>"))
    assert set(obj.symbol_mapping) == {"scale<float>", "scale<int>"}
    assert all(v.startswith("_Z") for v in obj.symbol_mapping.values())


def test_compile_error_keeps_log(arch):
    bad = "extern \"C\" __global__ void k(int* x) {\n  x[0] = undefined_name;\n}\n"
    with pytest.raises(CompileError) as ei:
        Program(bad, "c++", ProgramOptions(arch=arch, name="bad.cu")).compile("cubin")
    e = ei.value
    assert "undefined_name" in e.log
    assert "bad.cu(2)" in e.log  # file and line
    assert isinstance(e, CUDAError)
    assert "undefined_name" in str(e)


def test_compile_logs_object(arch):
    import io

    src = "extern \"C\" __global__ void k() { int unused; }"
    logs = io.StringIO()
    obj = Program(src, "c++", ProgramOptions(arch=arch)).compile("cubin", logs=logs)
    # NVRTC's warning #177, with the file and line, reaches the writer
    assert 'default_program(1): warning #177-D: variable "unused" was declared but never referenced' in logs.getvalue()
    assert logs.getvalue() == obj.compile_log
    quiet = io.StringIO()
    Program(src.replace("int unused;", ""), "c++", ProgramOptions(arch=arch)).compile("cubin", logs=quiet)
    assert quiet.getvalue() == ""


def test_cccl_headers_found(arch):
    src = "#include <cuda/std/cstdint>\nextern \"C\" __global__ void k(cuda::std::uint32_t* x) { x[0] = 1; }"
    assert Program(src, "c++", ProgramOptions(arch=arch)).compile("cubin").code[:4] == b"\x7fELF"


def test_program_options_forms(arch):
    opts = ProgramOptions(arch=arch, std="c++17", define_macro=[("N", "4"), "FLAG"], undefine_macro="X",
                          diag_suppress=[177], lineinfo=True, ptxas_options="-v", max_register_count=64)
    src = "#if !defined(FLAG) || N != 4\n#error macros\n#endif\nextern \"C\" __global__ void k() {}"
    p = Program(src, "c++", opts)
    flags = p.nvrtc_flags
    assert any("maxrregcount" in f for f in flags)
    assert p.compile("cubin").code[:4] == b"\x7fELF"
    # a dict is accepted where options are (cuda.core's check_or_create_options)
    assert Program(src.replace("#error macros", ""), "c++", {"arch": arch}).compile("ptx").code


@pytest.mark.parametrize("bad", [dict(max_register_count=-1), dict(arch="sm_abc"), dict(std="c++99x"),
                                 dict(split_compile=-2), dict(define_macro="1BAD"), dict(include_path=["a\0b"])])
def test_program_options_validation(bad, arch):
    opts = dict(arch=arch)
    opts.update(bad)
    with pytest.raises(ValueError) as ei:  # before any compiler runs
        Program(SAXPY_SRC, "c++", ProgramOptions(**opts)).compile("cubin")
    assert next(iter(bad)) in str(ei.value)


@pytest.mark.parametrize("field", ["max_register_count", "split_compile"])
def test_program_option_integers_that_do_not_fit_are_refused(field, arch):
    # 2**32 + 64 would become 64 if cut to 32 bits
    for big in (2**32 + 64, 2**31, -(2**31) - 1, 2**80):
        with pytest.raises(OverflowError) as ei:
            Program(SAXPY_SRC, "c++", ProgramOptions(arch=arch, **{field: big}))
        assert field in str(ei.value) and str(big) in str(ei.value)
    flags = Program(SAXPY_SRC, "c++", ProgramOptions(arch=arch, **{field: 64})).nvrtc_flags
    assert any(f.endswith("=64") for f in flags)
    with pytest.raises(OverflowError):
        Program(SAXPY_SRC, "c++", ProgramOptions(arch=arch, diag_suppress=[177, 2**32 + 177]))
    with pytest.raises(OverflowError):
        Linker(Program(SAXPY_SRC, "c++", ProgramOptions(arch=arch)).compile("ptx"),
               options=LinkerOptions(arch=arch, max_register_count=2**32 + 32))


def test_wrong_argument_types_name_the_argument(tmp_path, arch):
    cases = [
        (lambda: FileStreamProgramCache(str(tmp_path).encode()), "path"),
        (lambda: FileStreamProgramCache(tmp_path, max_size_bytes=1.5), "max_size_bytes"),
        (lambda: InMemoryProgramCache(max_size_bytes="1"), "max_size_bytes"),
        (lambda: InMemoryProgramCache(max_size_bytes=True), "max_size_bytes"),
        (lambda: Linker(b"junk"), "object_codes[0]"),
        (lambda: Program(SAXPY_SRC, "c++", ProgramOptions(arch=arch, diag_suppress=["x"])), "diag_suppress"),
        (lambda: Program(SAXPY_SRC, "c++", ProgramOptions(arch=arch, diag_suppress="x")), "diag_suppress"),
        (lambda: Program(SAXPY_SRC, "c++", ProgramOptions(arch=arch, define_macro=[("N", 4)])), "define_macro"),
        (lambda: ObjectCode.from_cubin(b"\x7fELF", symbol_mapping=[("a", "b")]), "symbol_mapping"),
    ]
    for make, name in cases:
        with pytest.raises(TypeError) as ei:
            make()
        assert name in str(ei.value) and "bad_cast" not in str(ei.value)
    with pytest.raises(ValueError) as ei:
        Program(SAXPY_SRC, "c++", ProgramOptions(arch=arch)).compile("sass")
    assert "target_type" in str(ei.value) and "sass" in str(ei.value)
    with pytest.raises(ValueError):
        Program("__global__ void k() {}\0 hidden", "c++", ProgramOptions(arch=arch))


def test_compile_through_a_cache_sees_header_edits(tmp_path, arch):
    import random

    src = '#include "config.h"\nextern "C" __global__ void k(long* p) { *p = VALUE; }\n'
    (tmp_path / "k.cu").write_text(src)
    opts = ProgramOptions(arch=arch, name=str(tmp_path / "k.cu"))
    for cache in (InMemoryProgramCache(), FileStreamProgramCache(tmp_path / "cache")):
        values = random.sample(range(10_000_000, 99_999_999), 2)
        for v in values:
            (tmp_path / "config.h").write_text(f"#define VALUE {v}\n")
            obj = Program(src, "c++", opts).compile("ptx", cache=cache)
            assert str(v).encode() in obj.code
        assert cache.stats["hits"] == 0
        obj = Program(src, "c++", opts).compile("ptx", cache=cache)
        assert str(values[-1]).encode() in obj.code and cache.stats["hits"] == 1


def test_program_options_type_errors(arch):
    with pytest.raises(TypeError):
        Program(SAXPY_SRC, "c++", ProgramOptions(arch=arch, max_register_count="many"))
    with pytest.raises(TypeError):
        Program(SAXPY_SRC, "c++", options=42)
    with pytest.raises(TypeError):
        Program(1234, "c++")


def test_program_needs_arch_without_gpu():
    if HAS_GPU:
        # With a device, an empty arch is the current device's.
        d = cucore.Device(0)
        d.set_current()
        prog = Program(SAXPY_SRC, "c++")
        assert prog.compile("cubin").code[:4] == b"\x7fELF"
        return
    with pytest.raises((ValueError, cucore.Error)) as ei:
        Program(SAXPY_SRC, "c++").compile("cubin")
    assert "arch" in str(ei.value)


def test_object_code_from_file_and_pickle(tmp_path, arch):
    obj = Program(SAXPY_SRC, "c++", ProgramOptions(arch=arch)).compile("cubin")
    f = tmp_path / "saxpy.cubin"
    f.write_bytes(obj.code)
    for src in (str(f), f):
        o2 = ObjectCode.from_cubin(src)
        # cuda.core's .code is what was given (the path); the bytes are read on use.
        assert o2.code == str(f) and bytes(o2) == obj.code and o2.code_type == "cubin"
    o3 = ObjectCode.from_cubin(obj.code, name="mine")
    assert o3.name == "mine"
    o4 = pickle.loads(pickle.dumps(o3))
    assert o4.code == o3.code and o4.code_type == "cubin"
    ptx = Program(SAXPY_SRC, "c++", ProgramOptions(arch=arch)).compile("ptx")
    assert ObjectCode.from_ptx(ptx.code).code_type == "ptx"
    with pytest.raises(TypeError):
        ObjectCode.from_cubin(12)


def test_link_ltoir(arch):
    a = Program("extern __device__ float twice(float x) { return 2 * x; }", "c++",
                ProgramOptions(arch=arch, relocatable_device_code=True, link_time_optimization=True)).compile("ltoir")
    b = Program("extern __device__ float twice(float);\n"
                "extern \"C\" __global__ void k(float* x) { x[0] = twice(x[0]); }", "c++",
                ProgramOptions(arch=arch, relocatable_device_code=True, link_time_optimization=True)).compile("ltoir")
    assert a.code_type == "ltoir"
    try:
        linker = Linker(a, b, options=LinkerOptions(arch=arch, link_time_optimization=True))
    except cucore.FeatureUnavailableError as e:
        pytest.skip(f"nvJitLink unavailable: {e}")
    out = linker.link("cubin")
    assert out.code[:4] == b"\x7fELF"
    assert isinstance(linker.get_error_log(), str) and isinstance(linker.get_info_log(), str)


# ---- caches and keys ------------------------------------------------------------------
@pytest.fixture(scope="module")
def cubin():
    return Program(SAXPY_SRC, "c++", ProgramOptions(arch="sm_90")).compile("cubin")


def test_in_memory_cache_mission_example_shape(cubin):
    cache = InMemoryProgramCache()
    key = "saxpy_sm_90"
    assert cache.get(key) is None
    cache[key] = cubin
    data = cache.get(key)
    assert isinstance(data, bytes) and data == cubin.code
    assert cache.get(key.encode("utf-8")) == data  # str keys are UTF-8
    assert ObjectCode.from_cubin(cache.get(key)).code == cubin.code
    assert len(cache) == 1
    assert isinstance(cache, ProgramCacheResource)
    del cache[key]
    assert cache.get(key) is None
    with pytest.raises(KeyError):
        cache[key]
    with pytest.raises(KeyError):
        del cache[key]
    with pytest.raises(TypeError):
        cache[3] = cubin
    with pytest.raises(TypeError):
        cache["x"] = 3.5


def test_in_memory_cache_bytes_values_and_update(cubin):
    cache = InMemoryProgramCache()
    cache.update({"a": cubin.code, b"b": bytearray(cubin.code)})
    assert cache["a"] == cubin.code == cache["b"]
    cache.clear()
    assert len(cache) == 0
    with InMemoryProgramCache() as c2:
        c2["k"] = cubin
        assert c2.get("k") == cubin.code


def test_in_memory_cache_lru(cubin):
    n = len(cubin.code)
    cache = InMemoryProgramCache(max_size_bytes=2 * n + n // 2)
    cache["a"] = cubin
    cache["b"] = cubin
    assert cache.get("a") is not None  # refresh a
    cache["c"] = cubin  # evicts b, the least recently used
    assert cache.get("b") is None
    assert cache.get("a") is not None and cache.get("c") is not None
    with pytest.raises(ValueError):
        InMemoryProgramCache(max_size_bytes=0)


def test_file_cache_round_trip(tmp_path, cubin):
    c1 = FileStreamProgramCache(tmp_path)
    c1["k"] = cubin
    c2 = FileStreamProgramCache(str(tmp_path))
    assert c2.get("k") == cubin.code
    assert len(c2) == 1
    del c2["k"]
    assert c1.get("k") is None


def test_file_cache_across_processes(tmp_path):
    code = (
        "import sys; from cucore import Program, ProgramOptions; from cucore.utils import FileStreamProgramCache;"
        f"c = FileStreamProgramCache({str(tmp_path)!r});"
        f"o = Program({SAXPY_SRC!r}, 'c++', ProgramOptions(arch='sm_90')).compile('cubin', cache=c);"
        "print(c.stats['hits'], c.stats['misses'])"
    )
    env = dict(os.environ)
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert second.returncode == 0, second.stderr
    hits, misses = map(int, second.stdout.split())
    assert hits >= 1 and misses == 0


def test_compile_through_cache_hits(cubin):
    cache = InMemoryProgramCache()
    p = Program(SAXPY_SRC, "c++", ProgramOptions(arch="sm_90"))
    o1 = p.compile("cubin", cache=cache)
    o2 = p.compile("cubin", cache=cache)
    assert o1.code == o2.code
    assert cache.stats["hits"] >= 1


def test_compile_through_foreign_cache():
    class DictCache(ProgramCacheResource):
        def __init__(self):
            self.d = {}

        def __getitem__(self, k):
            return self.d[bytes(k)]

        def __setitem__(self, k, v):
            self.d[bytes(k)] = bytes(v.code) if isinstance(v, ObjectCode) else bytes(v)

        def __delitem__(self, k):
            del self.d[bytes(k)]

        def __len__(self):
            return len(self.d)

        def clear(self):
            self.d.clear()

    c = DictCache()
    p = Program(SAXPY_SRC, "c++", ProgramOptions(arch="sm_90"))
    o1 = p.compile("cubin", cache=c)
    assert len(c) == 1
    # keyed as cucore's own caches key it
    key = make_program_cache_key(code=SAXPY_SRC, code_type="c++", options=ProgramOptions(arch="sm_90"),
                                 target_type="cubin")
    assert list(c.d) == [key]
    o2 = p.compile("cubin", cache=c)
    assert o2.code == o1.code and o2.code_type == "cubin"
    assert len(c) == 1


def test_make_program_cache_key():
    opts = ProgramOptions(arch="sm_90")
    k = make_program_cache_key(code=SAXPY_SRC, code_type="c++", options=opts, target_type="cubin")
    assert isinstance(k, bytes) and len(k) == 32
    assert k == make_program_cache_key(code=SAXPY_SRC, code_type="c++", options=ProgramOptions(arch="sm_90"),
                                       target_type="cubin")
    others = [
        make_program_cache_key(code=SAXPY_SRC + " ", code_type="c++", options=opts, target_type="cubin"),
        make_program_cache_key(code=SAXPY_SRC, code_type="c++", options=opts, target_type="ptx"),
        make_program_cache_key(code=SAXPY_SRC, code_type="c++", options=ProgramOptions(arch="sm_80"),
                               target_type="cubin"),
        make_program_cache_key(code=SAXPY_SRC, code_type="c++", options=opts, target_type="cubin",
                               name_expressions=("saxpy",)),
        make_program_cache_key(code=SAXPY_SRC, code_type="c++", options=opts, target_type="cubin",
                               extra_digest=b"x"),
    ]
    assert len({k, *others}) == 6
    with pytest.raises(TypeError):
        make_program_cache_key(SAXPY_SRC, "c++", opts, "cubin")  # keyword-only, as cuda.core
    with pytest.raises(ValueError):
        make_program_cache_key(code=SAXPY_SRC, code_type="c++", options=ProgramOptions(arch="sm_90", include_path="/x"),
                               target_type="cubin")


# ---- StridedMemoryView over NumPy ---------------------------------------------------------
def test_view_numpy_contiguous():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = StridedMemoryView(a, stream_ptr=-1)
    assert v.ptr == a.ctypes.data
    assert v.shape == (3, 4)
    assert v.strides in (None, (4, 1))
    assert v.dtype == np.float32
    assert v.device_id == -1 and not v.is_device_accessible
    assert not v.readonly
    assert v.exporting_obj is a
    assert v.size == 12


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int32, np.int64, np.float16, np.float64, np.complex64,
                                   np.bool_])
def test_view_numpy_dtypes(dtype):
    a = np.zeros((5,), dtype=dtype)
    v = StridedMemoryView(a, -1)
    assert v.dtype == np.dtype(dtype)
    assert v.shape == (5,)


def test_view_numpy_strided_and_readonly():
    a = np.arange(24, dtype=np.int32).reshape(4, 6)
    v = StridedMemoryView(a[::2, 1::3], -1)
    assert v.shape == (2, 2)
    assert v.strides == (12, 3)  # in elements, as cuda.core
    assert v.ptr == a[::2, 1::3].ctypes.data
    r = a.copy()
    r.flags.writeable = False
    assert StridedMemoryView(r, -1).readonly
    t = StridedMemoryView.from_array_interface(a.T)
    assert t.shape == (6, 4) and t.strides == (1, 6)


def test_view_decorator():
    seen = {}

    @args_viewable_as_strided_memory((0,))
    def f(arr, n):
        v = arr.view(-1)
        seen["v"] = v
        return n

    a = np.ones(8, dtype=np.float32)
    assert f(a, 3) == 3
    assert seen["v"].ptr == a.ctypes.data


def test_view_rejects_non_arrays():
    with pytest.raises(BufferError):
        StridedMemoryView(object(), -1)


# ---- launch configuration and argument validation without a GPU --------------------------
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


def test_options_dataclasses():
    from dataclasses import replace

    o = ProgramOptions(arch="sm_90")
    assert replace(o, std="c++20").std == "c++20"
    assert cucore.StreamOptions(nonblocking=False, priority=-1).priority == -1
    assert cucore.EventOptions(timing_enabled=True).timing_enabled
    assert cucore.DeviceMemoryResourceOptions(max_size=1 << 20).max_size == 1 << 20


def test_doctor_runs():
    r = subprocess.run([sys.executable, "-m", "cucore", "doctor"], capture_output=True, text=True)
    assert "Components" in r.stdout and "verdict:" in r.stdout, r.stderr
    j = subprocess.run([sys.executable, "-m", "cucore", "doctor", "--json"], capture_output=True, text=True)
    import json

    data = json.loads(j.stdout)
    assert {"components", "devices", "verdict"} <= set(data)
    assert any(c["name"] == "nvrtc" for c in data["components"])


def test_compile_from_threads(arch):
    errors = []

    def work(i):
        try:
            src = SAXPY_SRC.replace("saxpy", f"saxpy{i}")
            assert Program(src, "c++", ProgramOptions(arch=arch)).compile("cubin").code[:4] == b"\x7fELF"
        except Exception as e:  # pragma: no cover
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
