"""The option table (src/options/option_fields.inc) against the Python
dataclasses, and option conversion as cuda.core documents it: every field the
table lists is a dataclass field in the same order (a field added on one side
only fails here), every NVRTC flag the table names reaches the compiler, and
cucore.typing's StrEnums are accepted wherever cuda.core takes the string;
the options classes of programs, streams, events and pools are dataclasses.
CPU only."""
import dataclasses
import pathlib
import pickle
import random
import re

import pytest

import cucore
from cucore import LinkerOptions, Program, ProgramOptions
from cucore import _options
from cucore.typing import (
    CompilerBackendType,
    ManagedMemoryLocationType,
    ObjectCodeFormatType,
    PCHStatusType,
    SourceCodeType,
)

TABLE = pathlib.Path(__file__).resolve().parents[2] / "src" / "options" / "option_fields.inc"


def _macro_body(name):
    text = TABLE.read_text()
    start = text.index(f"#define {name}(X)")
    lines = []
    for line in text[start:].splitlines():
        lines.append(line)
        if not line.rstrip().endswith("\\"):
            break
    return "\n".join(lines)


def _program_table():
    return re.findall(r'X\((\w+), (\w+), "([^"]*)", (\w+), "([^"]*)"\)', _macro_body("CUCORE_PROGRAM_OPTION_FIELDS"))


def _linker_table():
    return re.findall(r'X\((\w+), (\w+), "([^"]*)"\)', _macro_body("CUCORE_LINKER_OPTION_FIELDS"))


def _pairs(name):
    return [py for py, _ in re.findall(r"X\((\w+), (\w+)\)", _macro_body(name))]


def _fields(cls):
    return [f.name for f in dataclasses.fields(cls)]


def test_program_options_dataclass_is_the_table():
    table = _program_table()
    assert len(table) >= 55
    assert _fields(ProgramOptions) == [row[0] for row in table]


def test_linker_options_dataclass_is_the_table():
    assert _fields(LinkerOptions) == [row[0] for row in _linker_table()]


@pytest.mark.parametrize(
    "cls, macro",
    [
        (_options.StreamOptions, "CUCORE_STREAM_OPTION_FIELDS"),
        (_options.EventOptions, "CUCORE_EVENT_OPTION_FIELDS"),
        (_options.DeviceMemoryResourceOptions, "CUCORE_DEVICE_MEMORY_RESOURCE_OPTION_FIELDS"),
        (_options.PinnedMemoryResourceOptions, "CUCORE_PINNED_MEMORY_RESOURCE_OPTION_FIELDS"),
        (_options.ManagedMemoryResourceOptions, "CUCORE_MANAGED_MEMORY_RESOURCE_OPTION_FIELDS"),
    ],
)
def test_other_options_dataclasses_are_the_table(cls, macro):
    assert _fields(cls) == _pairs(macro)


def test_every_nvrtc_flag_in_the_table_reaches_the_compiler(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # use_bundled_headers names (and makes) a cache directory
    rng = random.Random(1234)
    checked = 0
    for field, kind, flag, _, _ in _program_table():
        if not flag or field == "arch":
            continue
        value = {
            "toggle": True,
            "boolean": rng.choice([True, False]),
            "values": ["X%d" % rng.randrange(1000), "Y%d" % rng.randrange(1000)],
            "macros": [("M%d" % rng.randrange(1000), str(rng.randrange(1000)))],
            "include_paths": ["/opt/inc%d" % rng.randrange(1000)],
            "bundled": True,
        }.get(kind)
        if kind == "value":
            value = {"max_register_count": rng.randrange(16, 255), "split_compile": rng.randrange(0, 8),
                     "std": "c++17", "ofast_compile": "min"}.get(field, "v%d" % rng.randrange(1000))
        if field.startswith("diag_"):
            value = [rng.randrange(1, 9999) for _ in range(3)]
        opts = ProgramOptions(arch="sm_90", use_toolkit_headers=False, **{field: value})
        flags = [f.decode() for f in opts.as_bytes("nvrtc")]
        assert flags[0] == "-arch=sm_90"
        assert any(f.startswith(flag) for f in flags), (field, flags)
        if kind == "boolean":
            assert flag + ("=true" if value else "=false") in flags
        if kind == "values" and not field.startswith("diag_"):
            assert [flag + "=" + v for v in value] == [f for f in flags if f.startswith(flag + "=")]
        if field.startswith("diag_"):
            assert [flag + "=%d" % v for v in value] == [f for f in flags if f.startswith(flag + "=")]
        checked += 1
    assert checked >= 50


def test_unset_options_pass_nothing():
    assert ProgramOptions(arch="sm_90", use_toolkit_headers=False).as_bytes("nvrtc") == [b"-arch=sm_90"]
    assert LinkerOptions(arch="sm_90").as_bytes() == [b"-arch=sm_90"]


def test_as_bytes_as_cuda_core_renders():
    nvrtc = [f.decode() for f in ProgramOptions(arch="sm_80", debug=True, lineinfo=True, ftz=True).as_bytes("NVRTC")]
    for f in ("-arch=sm_80", "--device-debug", "--generate-line-info", "--ftz=true"):
        assert f in nvrtc
    nvvm = ProgramOptions(arch="sm_80", debug=True, ftz=True, device_code_optimize=True).as_bytes("nvvm")
    assert nvvm == [b"-arch=compute_80", b"-g", b"-opt=3", b"-ftz=1"]
    assert ProgramOptions(arch="sm_90").as_bytes("nvvm", "ltoir")[-1] == b"-gen-lto"
    with pytest.raises(ValueError, match="Unknown backend 'invalid'"):
        ProgramOptions(arch="sm_80").as_bytes("invalid")
    with pytest.raises(cucore.CUDAError, match="not supported by NVVM backend") as ei:
        ProgramOptions(arch="sm_80", lineinfo=True, std="c++17").as_bytes("nvvm")
    assert "lineinfo" in str(ei.value) and "std" in str(ei.value)
    linker = [f.decode() for f in LinkerOptions(arch="sm_80", debug=True, ftz=True, max_register_count=32).as_bytes("nvjitlink")]
    assert linker == ["-arch=sm_80", "-maxrregcount=32", "-g", "-ftz=true"]
    # Under LTO libNVVM takes only 1/0 (cucore's rendering; cuda.core's "true" fails there).
    lto = LinkerOptions(arch="sm_80", ftz=False, link_time_optimization=True).as_bytes()
    assert b"-ftz=0" in lto and b"-lto" in lto
    with pytest.raises(ValueError, match="only supports 'nvjitlink' backend"):
        LinkerOptions(arch="sm_80").as_bytes("driver")


def test_option_values_convert_as_cuda_core_reads_them(tmp_path):
    trace = tmp_path / "trace"
    o = ProgramOptions(arch="sm_90", use_toolkit_headers=False, fdevice_time_trace=trace, include_path=False,
                       ptxas_options="-v", define_macro=("N", "4"), diag_error=1234, time=True)
    flags = [f.decode() for f in o.as_bytes("nvrtc")]
    assert "--fdevice-time-trace=" + str(trace) in flags  # os.PathLike, as its path
    assert not any(f.startswith("--include-path") for f in flags)  # include_path=False: none, as cuda.core
    assert "--ptxas-options=-v" in flags and "--define-macro=N=4" in flags and "--diag-error=1234" in flags
    assert "--time=True" in flags  # cuda.core renders the value as given
    with pytest.raises(TypeError, match="max_register_count"):
        ProgramOptions(arch="sm_90", max_register_count="many").as_bytes("nvrtc")
    with pytest.raises(OverflowError):
        ProgramOptions(arch="sm_90", max_register_count=1 << 40).as_bytes("nvrtc")


def test_program_options_name_none_and_repr_and_pickle():
    assert ProgramOptions(name=None).name == "default_program"
    assert LinkerOptions(name=None).name == "<default linker>"
    assert repr(ProgramOptions(name="k", arch="sm_90")) == "ProgramOptions(name='k', arch='sm_90')"
    for o in (ProgramOptions(arch="sm_90", debug=True, include_path=["a", "b"]), LinkerOptions(arch="sm_90", ftz=True),
              _options.PinnedMemoryResourceOptions(numa_id=1), _options.EventOptions(timing_enabled=True)):
        back = pickle.loads(pickle.dumps(o))
        assert type(back) is type(o) and back == o


def test_str_enums_are_accepted_where_strings_are():
    assert SourceCodeType.CXX == "c++" and ObjectCodeFormatType.LTOIR == "ltoir"
    assert [m.value for m in PCHStatusType] == ["created", "not_attempted", "failed"]
    assert [m.value for m in CompilerBackendType] == ["NVRTC", "NVVM", "nvJitLink", "driver"]
    assert [m.value for m in ManagedMemoryLocationType] == ["device", "host", "host_numa"]
    p = Program('extern "C" __global__ void k(float* x) { x[0] = 1; }', SourceCodeType.CXX, ProgramOptions(arch="sm_90"))
    assert p.backend == CompilerBackendType.NVRTC and isinstance(p.backend, CompilerBackendType)
    o = p.compile(ObjectCodeFormatType.PTX)
    assert o.code_type == "ptx" and b".entry k" in o.code
    assert ProgramOptions(arch="sm_90").as_bytes(CompilerBackendType.NVVM)[0] == b"-arch=compute_90"


def test_typing_has_cuda_core_names():
    import typing

    # cuda.core.typing.__all__ (1.3's lists the texture enums, AddressModeType to ReadModeType, too).
    names = ["AddressModeType", "ArrayFormatType", "FilterModeType", "ReadModeType",
             "CompilerBackendType", "DevicePointerType", "DeviceResourcesType", "GraphConditionalType",
             "GraphMemoryType", "IsStreamType", "ManagedMemoryLocationType", "ObjectCodeFormatType", "PCHStatusType",
             "ProcessStateType", "SourceCodeType", "VirtualMemoryAccessType", "VirtualMemoryAllocationType",
             "VirtualMemoryGranularityType", "VirtualMemoryHandleType", "VirtualMemoryLocationType"]
    assert sorted(cucore.typing.__all__) == sorted(names)
    assert all(hasattr(cucore.typing, n) for n in names)
    assert set(typing.get_args(cucore.typing.DeviceResourcesType)) == {cucore.SMResource, cucore.WorkqueueResource}


def test_options_dataclasses():
    from dataclasses import replace

    o = ProgramOptions(arch="sm_90")
    assert replace(o, std="c++20").std == "c++20"
    assert cucore.StreamOptions(nonblocking=False, priority=-1).priority == -1
    assert cucore.EventOptions(timing_enabled=True).timing_enabled
    assert cucore.DeviceMemoryResourceOptions(max_size=1 << 20).max_size == 1 << 20


def test_a_dict_of_options_is_read_as_the_dataclass_would_take_it(monkeypatch):
    src = 'extern "C" __global__ void k() {}'
    given = {"arch": "sm_90", "use_toolkit_headers": False, "define_macro": ("N", "4"), "std": "c++17",
             "diag_error": [1, 2], "name": None}
    from_dict = Program(src, "c++", given)
    from_dataclass = Program(src, "c++", ProgramOptions(**given))
    assert from_dict.nvrtc_flags == from_dataclass.nvrtc_flags
    assert from_dict.nvrtc_flags == ["-arch=sm_90", "--define-macro=N=4", "--std=c++17", "--diag-error=1",
                                     "--diag-error=2"]
    with pytest.raises(TypeError, match=r"ProgramOptions.__init__\(\) got an unexpected keyword argument 'bogus'"):
        Program(src, "c++", {"arch": "sm_90", "bogus": 1})
    with pytest.raises(TypeError, match="keywords must be strings"):
        Program(src, "c++", {"arch": "sm_90", 1: True})
    ptx = Program(src, "c++", {"arch": "sm_90", "use_toolkit_headers": False}).compile("ptx")
    with pytest.raises(TypeError, match=r"LinkerOptions.__init__\(\) got an unexpected keyword argument 'bogus'"):
        cucore.Linker(ptx, options={"arch": "sm_90", "bogus": 1})
    assert cucore.Linker(ptx, options={"arch": "sm_90", "name": "x"}).link("cubin").name == "x"

    # The dict goes to C++ as it is, not through the dataclass first.
    def refuse(self):
        raise AssertionError("a dict of options was made into the dataclass")

    monkeypatch.setattr(_options.ProgramOptions, "__post_init__", refuse)
    monkeypatch.setattr(_options.LinkerOptions, "__post_init__", refuse)
    assert Program(src, "c++", given).nvrtc_flags == from_dataclass.nvrtc_flags
    assert cucore.Linker(ptx, options={"arch": "sm_90"}).link("cubin").code
