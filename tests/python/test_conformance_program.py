"""Programs, object code and the linker as cuda.core 1.2 documents them:
code types (C++, PTX, NVVM IR through libNVVM), extra_sources, backends,
handles, precompiled headers, the exact exception types and messages, path-
backed ObjectCode, pickling, reprs and refused construction. CPU only: NVRTC,
libNVVM and nvJitLink run without a GPU."""
import os
import pathlib
import pickle
import random
import subprocess
import sys
import weakref

import pytest

import cucore
from cucore import Kernel, KernelAttributes, KernelOccupancy, Linker, LinkerOptions, ObjectCode, Program, ProgramOptions
from cucore.typing import CompilerBackendType, PCHStatusType

KERNEL = 'extern "C" __global__ void my_kernel(int* x, int v) { x[threadIdx.x] = v; }'
ARCH = "sm_90"


def _nvvm_ir(kernel="simple"):
    major, minor, dbg_major, dbg_minor = cucore._core.nvvm_ir_version()
    return f"""target triple = "nvptx64-unknown-cuda"
target datalayout = "e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-i128:128:128-f32:32:32-f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64"

declare i32 @helper(i32)

define void @{kernel}(i32* %data) {{
entry:
  %v = call i32 @helper(i32 41)
  store i32 %v, i32* %data, align 4
  ret void
}}

!nvvm.annotations = !{{!0}}
!0 = !{{void (i32*)* @{kernel}, !"kernel", i32 1}}
!nvvmir.version = !{{!1}}
!1 = !{{i32 {major}, i32 {minor}, i32 {dbg_major}, i32 {dbg_minor}}}
"""


def _helper_ir(add):
    major, minor, dbg_major, dbg_minor = cucore._core.nvvm_ir_version()
    return f"""target triple = "nvptx64-unknown-cuda"
target datalayout = "e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-i128:128:128-f32:32:32-f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64"

define i32 @helper(i32 %a) {{
entry:
  %r = add i32 %a, {add}
  ret i32 %r
}}
!nvvmir.version = !{{!0}}
!0 = !{{i32 {major}, i32 {minor}, i32 {dbg_major}, i32 {dbg_minor}}}
"""


def test_code_types_and_their_errors():
    with pytest.raises(RuntimeError, match=r"^Unsupported code_type='fortran' \(supported_code_types=\('c\+\+', 'ptx', 'nvvm'\)\)$"):
        Program("goto 100", "FORTRAN")
    with pytest.raises(TypeError):
        Program(12345, "c++")
    with pytest.raises(TypeError):
        Program(b"bytes are NVVM IR's", "c++")
    with pytest.raises(TypeError, match="NVVM IR code must be provided as str, bytes, or bytearray"):
        Program(12345, "nvvm")
    with pytest.raises(ValueError, match=r"extra_sources is not supported by the NVRTC backend \(C\+\+ code_type\)"):
        Program(KERNEL, "c++", ProgramOptions(arch=ARCH, extra_sources=[("m", "x")]))
    with pytest.raises(ValueError, match="extra_sources is not supported by the PTX backend"):
        Program(".version 8.0", "ptx", ProgramOptions(arch=ARCH, extra_sources=[("m", "x")]))
    p = Program(KERNEL, "C++", ProgramOptions(arch=ARCH))
    with pytest.raises(ValueError):
        p.compile("invalid_target")
    with pytest.raises(ValueError):
        p.compile("fatbin")


def test_program_backend_handle_close_and_repr():
    p = Program(KERNEL, "c++", ProgramOptions(arch=ARCH))
    assert p.backend == "NVRTC" and isinstance(p.backend, CompilerBackendType)
    assert repr(p) == "<Program backend='NVRTC'>"
    assert p.handle is not None and int(p.handle) != 0
    assert p.handle == p.handle  # made once
    assert weakref.ref(p)() is p
    obj = p.compile("cubin")
    assert obj.code_type == "cubin" and obj.code[:4] == b"\x7fELF"
    p.close()
    assert p.is_closed and int(p.handle) == 0  # cuda.core: the null nvrtcProgram
    p.close()  # idempotent
    with pytest.raises(RuntimeError):
        p.compile("ptx")
    with Program(KERNEL, "c++", ProgramOptions(arch=ARCH)) as q:
        assert not q.is_closed
    assert q.is_closed


def test_program_options_name_none_is_default_program():
    # cuda.core 1.2: name=None falls back to the documented "default_program", which names the program to NVRTC.
    o = ProgramOptions(name=None, arch=ARCH)
    assert o.name == "default_program"
    assert Program(KERNEL, "c++", o).compile("ptx").name == "default_program"
    with pytest.raises(cucore.CompileError) as ei:
        Program("int broken = ;", "c++", o).compile("ptx")
    assert "default_program(1): error" in ei.value.log


def test_use_bundled_headers_is_nvrtcs_own_from_13_3(tmp_path, monkeypatch):
    # cuda.core 1.2: NVRTC's --use-bundled-headers with a directory under the user's cache.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    o = ProgramOptions(arch=ARCH, use_bundled_headers=True)
    headers = tmp_path / "cucore" / "nvrtc-bundled-headers"
    flags = [f.decode() for f in o.as_bytes("nvrtc")]
    assert flags == ["-arch=sm_90", f"--use-bundled-headers={headers}"]  # the toolkit's headers give way
    with pytest.raises(cucore.CUDAError, match="not supported by NVVM backend: use_bundled_headers"):
        o.as_bytes("nvvm")
    major, minor = cucore._core.nvrtc_version()
    code = '#include <cuda/std/type_traits>\nextern "C" __global__ void k(int* o) { *o = cuda::std::is_integral<int>::value; }'
    if (major, minor) >= (13, 3):
        assert Program(code, "c++", o).compile("ptx").code_type == "ptx"
        assert (headers / "cccl" / "cuda" / "std" / "type_traits").is_file()
        return
    with pytest.raises(cucore.FeatureUnavailableError,
                       match=rf"ProgramOptions::use_bundled_headers .* needs NVRTC 13\.3 or later; "
                             rf"this NVRTC is {major}\.{minor}") as ei:
        Program(code, "c++", o)
    assert isinstance(ei.value, NotImplementedError)
    assert not headers.exists()


def test_compile_names_the_result_and_logs_warnings():
    name = "prog%d" % random.randrange(1 << 30)
    o = Program(KERNEL, "c++", ProgramOptions(name=name, arch=ARCH)).compile("ptx")
    assert o.name == name and b".visible .entry my_kernel(" in o.code


def test_nvvm_programs_compile_with_extra_sources():
    add = random.randrange(2, 1000)
    opts = ProgramOptions(name="nvvm_test", arch=ARCH, extra_sources=[("helper.ll", _helper_ir(add))])
    p = Program(_nvvm_ir(), "nvvm", opts)
    assert p.backend == "NVVM" and repr(p) == "<Program backend='NVVM'>"
    assert p.handle is not None
    ptx = p.compile("ptx")
    assert ptx.name == "nvvm_test" and ptx.code_type == "ptx"
    text = ptx.code.decode()
    assert ".visible .entry simple(" in text
    assert ".target sm_90" in text  # compute_90 from sm_90, as cuda.core renders it
    # The extra module is linked in: the helper's constant reaches the PTX.
    assert str(41 + add) in text or "helper" in text
    ltoir = p.compile("ltoir")
    assert ltoir.code_type == "ltoir" and len(ltoir.code) > 16
    with pytest.raises(ValueError, match='NVVM backend only supports target_type="ptx"'):
        p.compile("cubin")
    # bytes and bytearray are NVVM IR too.
    assert b".entry simple(" in Program(_nvvm_ir().encode(), "nvvm", opts).compile("ptx").code
    assert b".entry simple(" in Program(bytearray(_nvvm_ir().encode()), "nvvm", opts).compile("ptx").code


def test_nvvm_refuses_what_libnvvm_cannot_take():
    with pytest.raises(ValueError, match="not supported by NVVM backend: lineinfo"):
        Program(_nvvm_ir(), "nvvm", ProgramOptions(arch=ARCH, lineinfo=True))
    with pytest.raises(TypeError, match="extra_sources must be a sequence of 2-tuples"):
        Program(_nvvm_ir(), "nvvm", ProgramOptions(arch=ARCH, extra_sources=5))
    with pytest.raises(TypeError, match="Each extra module must be a 2-tuple"):
        Program(_nvvm_ir(), "nvvm", ProgramOptions(arch=ARCH, extra_sources=["x"]))
    with pytest.raises(TypeError, match="Module name at index 0 must be a string"):
        Program(_nvvm_ir(), "nvvm", ProgramOptions(arch=ARCH, extra_sources=[(1, "x")]))
    with pytest.raises(TypeError, match="Module source at index 1"):
        Program(_nvvm_ir(), "nvvm", ProgramOptions(arch=ARCH, extra_sources=[("a", "x"), ("b", 3)]))
    with pytest.raises(ValueError, match=r"Module source for 'b' \(index 1\) cannot be empty"):
        Program(_nvvm_ir(), "nvvm", ProgramOptions(arch=ARCH, extra_sources=[("a", "x"), ("b", b"")]))
    # Broken IR is a compile error with libNVVM's log.
    with pytest.raises(cucore.CompileError) as ei:
        Program("this is not IR", "nvvm", ProgramOptions(arch=ARCH)).compile("ptx")
    assert ei.value.log


def test_nvvm_with_libdevice_links_math():
    major, minor, dbg_major, dbg_minor = cucore._core.nvvm_ir_version()
    ir = f"""target triple = "nvptx64-unknown-cuda"
target datalayout = "e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-i128:128:128-f32:32:32-f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64"
declare float @__nv_sinf(float)
define void @k(float* %p) {{
  %x = load float, float* %p
  %y = call float @__nv_sinf(float %x)
  store float %y, float* %p
  ret void
}}
!nvvm.annotations = !{{!0}}
!0 = !{{void (float*)* @k, !"kernel", i32 1}}
!nvvmir.version = !{{!1}}
!1 = !{{i32 {major}, i32 {minor}, i32 {dbg_major}, i32 {dbg_minor}}}
"""
    # Without libdevice __nv_sinf stays an external call; with it, the math is linked in.
    without = Program(ir, "nvvm", ProgramOptions(arch=ARCH)).compile("ptx").code.decode()
    assert "__nv_sinf" in without
    text = Program(ir, "nvvm", ProgramOptions(arch=ARCH, use_libdevice=True)).compile("ptx").code.decode()
    assert ".visible .entry k(" in text and "__nv_sinf" not in text


def test_ptx_programs_go_through_the_linker():
    ptx = Program(KERNEL, "c++", ProgramOptions(arch=ARCH)).compile("ptx")
    p = Program(ptx.code.decode(), "ptx", ProgramOptions(arch=ARCH, name="from_ptx", time=True))
    assert p.backend in ("nvJitLink", "driver")
    assert repr(p) == f"<Program backend='{p.backend}'>"
    cubin = p.compile("cubin")
    assert cubin.name == "from_ptx" and cubin.code[:4] == b"\x7fELF"
    with pytest.raises(ValueError):
        p.compile("ltoir")


def test_link_time_optimization_with_a_ptx_target_is_allowed():
    # cuda.core compiles this (NVRTC makes LTO-IR and an empty PTX).
    o = Program(KERNEL, "c++", ProgramOptions(arch=ARCH, link_time_optimization=True)).compile("ptx")
    assert o.code_type == "ptx"


def test_pch_status(tmp_path):
    p = Program(KERNEL, "c++", ProgramOptions(arch=ARCH))
    assert p.pch_status is None
    p.compile("ptx")
    assert p.pch_status is None  # not asked for
    pch = tmp_path / "k.pch"
    src = '#include <cuda/std/type_traits>\n' + KERNEL
    q = Program(src, "c++", ProgramOptions(arch=ARCH, create_pch=str(pch)))
    q.compile("ptx")
    assert q.pch_status == PCHStatusType.CREATED and isinstance(q.pch_status, PCHStatusType)
    assert pch.exists() and pch.stat().st_size > 0
    r = Program(src, "c++", ProgramOptions(arch=ARCH, use_pch=str(pch)))
    assert b".entry my_kernel(" in r.compile("ptx").code
    assert r.pch_status is None  # using a header is not creating one
    assert Program(_nvvm_ir(), "nvvm", ProgramOptions(arch=ARCH)).pch_status is None


def test_from_handle_refuses_unknown_backends():
    with pytest.raises(ValueError, match="Unsupported backend 'INVALID'"):
        Program.from_handle(0, "INVALID")


def test_object_code_from_paths_reads_on_use(tmp_path):
    obj = Program(KERNEL, "c++", ProgramOptions(arch=ARCH)).compile("cubin")
    f = tmp_path / "k.cubin"
    f.write_bytes(obj.code)
    for given in (str(f), f):
        o = ObjectCode.from_cubin(given, name="from_file")
        assert o.code == str(f)  # what was given, as cuda.core's .code
        assert o.code_type == "cubin" and o.name == "from_file"
        assert bytes(o) == obj.code
        back = pickle.loads(pickle.dumps(o))
        assert back.code == str(f) and bytes(back) == obj.code
    missing = ObjectCode.from_ptx(str(tmp_path / "nope.ptx"))  # not read yet: no error
    assert missing.code == str(tmp_path / "nope.ptx")
    with pytest.raises(ValueError):
        bytes(missing)
    with pytest.raises(TypeError):
        ObjectCode.from_cubin(12)


def test_object_code_bytes_pickle_and_protocols():
    obj = Program(KERNEL, "c++", ProgramOptions(arch=ARCH, name="pk")).compile("ptx", name_expressions=("my_kernel",))
    back = pickle.loads(pickle.dumps(obj))
    assert isinstance(back, ObjectCode)
    assert back.code == obj.code and back.code_type == obj.code_type and back.name == obj.name
    assert back.symbol_mapping == obj.symbol_mapping
    assert weakref.ref(obj)() is obj
    assert obj == obj and obj != back and hash(obj) == hash(obj)
    assert obj != obj.code
    import re
    for t in ("cubin", "ptx", "ltoir"):
        o = Program(KERNEL, "c++", ProgramOptions(arch=ARCH)).compile(t)
        assert re.fullmatch(rf"<ObjectCode handle=0x[0-9a-f]+ code_type='{t}'>", repr(o)), repr(o)
    ltoir = Program(KERNEL, "c++", ProgramOptions(arch=ARCH)).compile("ltoir")
    with pytest.raises(RuntimeError, match=r'Unsupported code type "ltoir"'):
        ltoir.get_kernel("my_kernel")
    o = ObjectCode._init(b"\x7fELF-not-really", "cubin", name="x")
    assert o.code == b"\x7fELF-not-really" and o.code_type == "cubin" and o.name == "x"


@pytest.mark.parametrize("cls, message", [
    (ObjectCode, "ObjectCode objects cannot be instantiated directly."),
    (Kernel, "Kernel objects cannot be instantiated directly."),
    (KernelAttributes, "KernelAttributes cannot be instantiated directly."),
    (KernelOccupancy, "KernelOccupancy cannot be instantiated directly."),
])
def test_direct_construction_is_refused(cls, message):
    with pytest.raises(RuntimeError, match="^" + message.replace(".", r"\.")):
        cls()


def test_kernel_from_handle_takes_ints_only():
    with pytest.raises(TypeError, match="handle must be an integer"):
        Kernel.from_handle("0x1234")


def test_linker_as_cuda_core():
    a = Program("extern __device__ int B(); __global__ void A(int* x) { *x = B(); }", "c++",
                ProgramOptions(arch=ARCH, relocatable_device_code=True)).compile("ptx")
    b = Program("__device__ int B() { return 7; }", "c++",
                ProgramOptions(arch=ARCH, relocatable_device_code=True)).compile("ptx")
    linker = Linker(a, b, options=LinkerOptions(arch=ARCH, name="linked"))
    assert linker.backend in ("nvJitLink", "driver") and isinstance(linker.backend, CompilerBackendType)
    out = linker.link("cubin")
    assert out.name == "linked" and out.code[:4] == b"\x7fELF"
    assert isinstance(linker.get_error_log(), str) and isinstance(linker.get_info_log(), str)
    assert linker.get_info_log() == linker.get_info_log()
    with pytest.raises(ValueError):
        linker.link("invalid_target")
    assert Linker.which_backend() in ("nvJitLink", "driver")
    linker.close()
    with pytest.raises(RuntimeError):
        linker.link("cubin")
    with pytest.raises(TypeError):
        Linker(a, "not code")


def test_files_that_would_block_or_be_cut_short_are_refused_by_path(tmp_path):
    """A FIFO header hung a compile without a cache (NVRTC opened it itself) and
    a FIFO code file hung ObjectCode's read; a header with a NUL byte reached
    NVRTC cut short. Each is a ValueError naming the file, run in a child
    process so that a hang fails the test instead of stalling the suite."""
    os.mkfifo(tmp_path / "fifo.h")
    os.mkfifo(tmp_path / "fifo.cubin")
    (tmp_path / "nul.h").write_bytes(b"#define V 1\n\0#error the rest\n")
    script = f"""
import sys
from cucore import ObjectCode, Program, ProgramOptions
name = {str(tmp_path / "k.cu")!r}
for header, says in (("fifo.h", "is not a regular file or directory (a FIFO or device?)"),
                     ("nul.h", "contains a NUL byte at offset 12; is it a header?")):
    try:
        Program('#include "' + header + '"\\n' + {KERNEL!r}, "c++", ProgramOptions(arch={ARCH!r}, name=name)).compile("ptx")
        sys.exit(header + ": compiled")
    except ValueError as e:
        if {str(tmp_path)!r} + "/" + header not in str(e) or says not in str(e):
            sys.exit(header + ": " + str(e))
try:
    bytes(ObjectCode.from_cubin({str(tmp_path / "fifo.cubin")!r}))
    sys.exit("fifo.cubin: read")
except ValueError as e:
    if "is not a regular file (a FIFO)" not in str(e):
        sys.exit("fifo.cubin: " + str(e))
print("refused")
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == "refused"
