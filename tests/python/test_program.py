"""Programs, object code and the linker: compiling C++ to cubin, PTX and LTO-IR
with NVRTC (name expressions, logs, CCCL headers), ProgramOptions' forms,
validation and type errors naming the field, ObjectCode from files and pickles,
linking LTO-IR with nvJitLink, compiling from threads. CPU only (sm_90 without a
GPU)."""
import pickle
import threading

import pytest

import cucore
from cucore import CompileError, CUDAError, Linker, LinkerOptions, ObjectCode, Program, ProgramOptions
from cucore.utils import FileStreamProgramCache, InMemoryProgramCache

from conftest import HAS_GPU, SAXPY_SRC, TEMPLATE_SRC


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
        (lambda: ObjectCode.from_cubin(b"\x7fELF", symbol_mapping=[("a", "b")]), "symbol_mapping"),
    ]
    for make, name in cases:
        with pytest.raises(TypeError) as ei:
            make()
        assert name in str(ei.value) and "bad_cast" not in str(ei.value)
    # a define_macro of the wrong shape is RuntimeError, as cuda.core raises it (test_conformance_errors.py)
    with pytest.raises(RuntimeError, match=r"define_macro tuple\[str, str\], got \('N', 4\)"):
        Program(SAXPY_SRC, "c++", ProgramOptions(arch=arch, define_macro=[("N", 4)]))
    with pytest.raises(ValueError) as ei:
        Program(SAXPY_SRC, "c++", ProgramOptions(arch=arch)).compile("sass")
    assert "target_type" in str(ei.value) and "sass" in str(ei.value)
    with pytest.raises(ValueError):
        Program("__global__ void k() {}\0 hidden", "c++", ProgramOptions(arch=arch))


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


def test_a_library_unloaded_by_the_holder_of_its_handle_is_not_unloaded_again(device, arch):
    """numba-cuda unloads the CUlibrary that ObjectCode.handle gives it (cuda.core
    never unloads one): cucore must not unload it a second time when the
    ObjectCode and its kernels go, at any point up to interpreter exit (that
    second unload corrupted the driver's heap)."""
    import subprocess
    import sys
    import textwrap

    pytest.importorskip("cuda.bindings.driver", reason="needs cuda.bindings to unload as numba-cuda does")
    script = textwrap.dedent(f"""
        import gc, numpy as np
        import cucore
        from cuda.bindings import driver
        dev = cucore.Device(0); dev.set_current()
        src = 'extern "C" __global__ void fill(int* p, int v) {{ p[threadIdx.x] = v + threadIdx.x; }}'
        keep = []
        for i in range(4):
            code = cucore.Program(src, code_type="c++", options=cucore.ProgramOptions(arch="{arch}")).compile("cubin")
            k = code.get_kernel("fill")
            s = dev.create_stream()
            buf = dev.memory_resource.allocate(4 * 32, stream=s)
            v = int(np.random.randint(1, 1 << 20))
            cucore.launch(s, cucore.LaunchConfig(grid=1, block=32), k, buf, np.int32(v))
            s.sync()
            out = np.zeros(32, dtype=np.int32)
            err, = driver.cuMemcpyDtoH(out.ctypes.data, int(buf.handle), out.nbytes)
            assert err == driver.CUresult.CUDA_SUCCESS, err
            assert (out == v + np.arange(32)).all(), out
            h = code.handle
            assert code.handle == h
            if i % 2 == 0:
                err, = driver.cuLibraryUnload(driver.CUlibrary(h))  # the holder's unload, as numba-cuda's
                assert err == driver.CUresult.CUDA_SUCCESS, err
                del code, k
                gc.collect()
            else:
                keep.append((code, k))  # dropped at interpreter exit
            buf.close(); s.close()
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-X", "faulthandler", "-c", script], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"


def test_get_module_is_a_method_and_refuses_code_the_driver_cannot_load():
    # cuda.core 1.2's ObjectCode.get_module(); LTO-IR must be linked first: refused as .handle refuses it.
    import inspect

    from cucore import ObjectCode

    assert callable(inspect.getattr_static(ObjectCode, "get_module"))
    assert not inspect.isdatadescriptor(inspect.getattr_static(ObjectCode, "get_module"))
    lto = ObjectCode.from_ltoir(b"\x7fELF" + bytes(60), name="k.ltoir")
    with pytest.raises(ValueError, match="LTO-IR") as from_module:
        lto.get_module()
    with pytest.raises(ValueError) as from_handle:
        lto.handle
    assert str(from_module.value) == str(from_handle.value)
