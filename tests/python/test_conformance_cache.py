"""Program caches and make_program_cache_key as cuda.core 1.2 documents them:
the values they take (bytes, bytearray, memoryview, ObjectCode, path-backed
ObjectCode), str or bytes keys, the ProgramCacheResource contract, context
managers, size caps, and the key's rules and messages. CPU only."""
import abc
import os
import random

import pytest

from cucore import ObjectCode, Program, ProgramOptions
from cucore.utils import FileStreamProgramCache, InMemoryProgramCache, ProgramCacheResource, make_program_cache_key

CACHES = ["memory", "file"]


@pytest.fixture
def make_cache(tmp_path):
    def make(kind, **kw):
        return InMemoryProgramCache(**kw) if kind == "memory" else FileStreamProgramCache(tmp_path / "fc", **kw)

    return make


def _random_bytes(rng, n):
    return bytes(rng.randrange(256) for _ in range(n))


@pytest.mark.parametrize("kind", CACHES)
def test_values_of_every_accepted_form_round_trip_byte_for_byte(kind, make_cache, tmp_path):
    rng = random.Random(kind)
    payloads = {k: _random_bytes(rng, rng.randrange(1, 3000)) for k in range(6)}
    src = tmp_path / "src.bin"
    src.write_bytes(payloads[4])
    forms = {
        b"bytes": payloads[0],
        b"bytearray": bytearray(payloads[1]),
        b"memoryview": memoryview(payloads[2]),
        b"objectcode": ObjectCode.from_cubin(payloads[3], name="x"),
        "path-backed": ObjectCode.from_cubin(str(src), name="y"),
        "text-key": payloads[5],
    }
    expected = {b"bytes": payloads[0], b"bytearray": payloads[1], b"memoryview": payloads[2],
                b"objectcode": payloads[3], "path-backed": payloads[4], "text-key": payloads[5]}
    with make_cache(kind) as cache:
        cache.update(forms)
        src.unlink()  # the cache holds the bytes, not the path
        assert len(cache) == len(forms)
        for k, v in expected.items():
            got = cache[k]
            assert isinstance(got, bytes) and got == v, k
            # str keys are their UTF-8 bytes
            key_bytes = k.encode() if isinstance(k, str) else k
            assert cache.get(key_bytes) == v
    if kind == "file":
        with FileStreamProgramCache(tmp_path / "fc") as again:
            for k, v in expected.items():
                assert again[k] == v


@pytest.mark.parametrize("kind", CACHES)
def test_misses_deletes_and_refused_values(kind, make_cache, tmp_path):
    sentinel = object()
    with make_cache(kind) as cache:
        assert len(cache) == 0 and cache.get(b"nope") is None and cache.get(b"nope", sentinel) is sentinel
        with pytest.raises(KeyError):
            cache[b"nope"]
        cache[b"k"] = b"value"
        del cache[b"k"]
        assert cache.get(b"k") is None
        with pytest.raises(KeyError):
            del cache[b"k"]
        with pytest.raises(TypeError, match="bytes-like or ObjectCode"):
            cache[b"k"] = "a string"
        with pytest.raises(TypeError):
            cache[123] = b"v"
        with pytest.raises(TypeError):
            cache.get(123)
        gone = ObjectCode.from_cubin(str(tmp_path / "vanished.cubin"), name="gone")
        with pytest.raises(FileNotFoundError, match="path-backed ObjectCode") as ei:
            cache[b"g"] = gone
        assert str(tmp_path / "vanished.cubin") in str(ei.value)
        cache[b"a"] = b"1"
        cache[b"b"] = b"2"
        cache.clear()
        assert len(cache) == 0 and cache.get(b"a") is None


@pytest.mark.parametrize("kind", CACHES)
def test_size_caps(kind, make_cache):
    for bad in (0, -1):
        with pytest.raises(ValueError, match="positive"):
            make_cache(kind, max_size_bytes=bad)
    cache = make_cache(kind, max_size_bytes=5000)
    cache[b"a"] = b"A" * 2000
    cache[b"b"] = b"B" * 2000
    _ = cache[b"a"]  # a is now the most recently read
    cache[b"c"] = b"C" * 2000
    assert cache.get(b"b") is None and cache[b"a"] == b"A" * 2000 and cache[b"c"] == b"C" * 2000
    small = make_cache(kind, max_size_bytes=10) if kind == "memory" else None
    if small is not None:
        small[b"big"] = b"x" * 100  # too big to keep, as cuda.core's
        assert small.get(b"big") is None and len(small) == 0


def test_program_cache_resource_contract():
    assert issubclass(ProgramCacheResource, abc.ABC)
    with pytest.raises(TypeError, match="abstract"):
        ProgramCacheResource()
    assert {"__getitem__", "__setitem__", "__delitem__", "__len__", "clear"} <= ProgramCacheResource.__abstractmethods__
    assert "__contains__" not in ProgramCacheResource.__abstractmethods__
    closed = []

    class Tracked(ProgramCacheResource):
        def __getitem__(self, key):
            raise KeyError(key)

        def __setitem__(self, key, value):
            pass

        def __delitem__(self, key):
            raise KeyError(key)

        def __len__(self):
            return 0

        def clear(self):
            pass

        def close(self):
            closed.append(True)

    with Tracked() as t:
        assert t.get(b"missing") is None
    assert closed == [True]
    assert isinstance(InMemoryProgramCache(), ProgramCacheResource)


def test_a_compile_through_the_cache_stores_what_it_returns(tmp_path):
    code = 'extern "C" __global__ void k(int* x) { x[0] = %d; }' % random.randrange(1 << 20)
    options = ProgramOptions(name="cached_kernel", arch="sm_90")
    with FileStreamProgramCache(tmp_path / "fc") as cache:
        first = Program(code, "c++", options).compile("cubin", cache=cache)
        key = make_program_cache_key(code=code, code_type="c++", options=options, target_type="cubin")
        assert cache[key] == first.code
    with FileStreamProgramCache(tmp_path / "fc") as cache:
        again = Program(code, "c++", options).compile("cubin", cache=cache)
        assert again.code == first.code and again.name == "cached_kernel"


# ---- make_program_cache_key -------------------------------------------------------------
def _opts(**kw):
    kw.setdefault("arch", "sm_80")
    return ProgramOptions(**kw)


def _key(**kw):
    base = dict(code="a", code_type="c++", options=_opts(), target_type="cubin")
    return make_program_cache_key(**{**base, **kw})


def test_keys_are_32_deterministic_bytes():
    assert isinstance(_key(), bytes) and len(_key()) == 32 and _key() == _key()


@pytest.mark.parametrize("a, b", [
    ({"code": "a"}, {"code": "b"}),
    ({"target_type": "ptx"}, {"target_type": "cubin"}),
    ({"options": _opts(arch="sm_80")}, {"options": _opts(arch="sm_90")}),
    ({"options": _opts(use_fast_math=True)}, {"options": _opts(use_fast_math=False)}),
    ({"options": _opts(name="kernel-a")}, {"options": _opts(name="kernel-b")}),
    ({}, {"extra_digest": b"\x01" * 32}),
    ({"extra_digest": b"\x01" * 32}, {"extra_digest": b"\x02" * 32}),
    ({"name_expressions": ("foo",)}, {"name_expressions": (b"foo",)}),
])
def test_every_input_counts(a, b):
    assert _key(**a) != _key(**b)


def test_spellings_that_compile_alike_key_alike():
    assert _key(name_expressions=("f", "g")) == _key(name_expressions=("g", "f"))
    assert _key(code="abc", code_type="nvvm", target_type="ptx") == _key(code=b"abc", code_type="nvvm", target_type="ptx")
    for ct, code, target in (("PTX", ".version 7.0", "cubin"), ("C++", "void k(){}", "cubin"), ("NVVM", "abc", "ptx")):
        assert _key(code=code, code_type=ct, target_type=target) == _key(code=code, code_type=ct.lower(),
                                                                         target_type=target)
    assert _key(target_type="PTx") == _key(target_type="ptx")
    ptx = dict(code=".version 7.0", code_type="ptx")
    base = _key(**ptx)
    for kw in ({"define_macro": "FOO"}, {"frandom_seed": "1234"}, {"ofast_compile": "min"}, {"std": "c++17"},
               {"disable_warnings": True}, {"debug": False}, {"lineinfo": False}, {"no_cache": False},
               {"ptxas_options": []}, {"include_path": "/usr/local/include"}):
        assert _key(options=_opts(**kw), **ptx) == base, kw
    assert _key(options=_opts(time=True), **ptx) == _key(options=_opts(time="timing.csv"), **ptx)
    assert _key(options=_opts(ptxas_options="-v"), **ptx) == _key(options=_opts(ptxas_options=("-v",)), **ptx)
    # name expressions count for NVRTC only, and are not checked elsewhere.
    assert _key(name_expressions=("foo", 123), **ptx) == base
    assert _key(code="abc", code_type="nvvm", target_type="ptx", name_expressions=(object(),)) == \
        _key(code="abc", code_type="nvvm", target_type="ptx")
    for ct, code, target in (("c++", "void k(){}", "cubin"), ("ptx", ".version 7.0", "cubin")):
        keys = {_key(code=code, code_type=ct, target_type=target, options=_opts(use_libdevice=v)) for v in (None, False, True)}
        assert len(keys) == 1
    assert _key(code="abc", code_type="nvvm", target_type="ptx", options=_opts(use_libdevice=False)) == \
        _key(code="abc", code_type="nvvm", target_type="ptx", options=_opts(use_libdevice=None))


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"code_type": "fortran"}, ValueError, "code_type"),
    ({"target_type": "exe"}, ValueError, "target_type"),
    ({"code": 12345}, TypeError, "code"),
    ({"code_type": "ptx", "target_type": "ltoir"}, ValueError, "not valid for code_type"),
    ({"code_type": "nvvm", "target_type": "cubin"}, ValueError, "not valid for code_type"),
    ({"code": b"abc"}, TypeError, "code must be str for code_type"),
    ({"code": b"abc", "code_type": "ptx"}, TypeError, "code must be str for code_type"),
    ({"options": _opts(extra_sources=[("foo.cu", "int x = 0;")])}, ValueError, "extra_sources"),
    ({"name_expressions": ("ok", 1.5)}, TypeError, "name_expressions"),
    ({"name_expressions": ("ok", bytearray(b"bad"))}, TypeError, "bytearray"),
    ({"options": _opts(include_path="/usr/local/include")}, ValueError, "extra_digest"),
    ({"options": _opts(pre_include="stdint.h")}, ValueError, "extra_digest"),
    ({"options": _opts(pch=True)}, ValueError, "extra_digest"),
    ({"options": _opts(pch_dir="pch-cache")}, ValueError, "extra_digest"),
    ({"options": _opts(use_pch=False)}, ValueError, "extra_digest"),
    ({"options": _opts(name="kernels/foo.cu")}, ValueError, "directory component"),
    ({"options": _opts(name="kernels\\foo.cu")}, ValueError, "directory component"),
    ({"options": _opts(create_pch="out.pch"), "extra_digest": b"x" * 32}, ValueError, "side effect"),
    ({"options": _opts(time=False)}, ValueError, "side effect"),
    ({"options": _opts(fdevice_time_trace="trace.json")}, ValueError, "side effect"),
    ({"code": "abc", "code_type": "nvvm", "target_type": "ptx", "options": _opts(use_libdevice=True)},
     ValueError, "libdevice"),
])
def test_refusals(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        _key(**kwargs)


def test_what_an_extra_digest_or_a_bare_name_allows():
    for name in ("foo.cu", "default_program", ""):
        _key(options=_opts(name=name))
    _key(options=_opts(name="kernels/foo.cu"), extra_digest=b"caller-fingerprint")
    for kw in ({"include_path": []}, {"include_path": ()}, {"pre_include": []}, {"include_path": False}):
        _key(options=_opts(**kw))
    a = _key(options=_opts(include_path="/usr/local/include"), extra_digest=b"header-a" * 4)
    b = _key(options=_opts(include_path="/usr/local/include"), extra_digest=b"header-b" * 4)
    assert a != b
    lib_a = _key(code="abc", code_type="nvvm", target_type="ptx", options=_opts(use_libdevice=True), extra_digest=b"a" * 8)
    lib_b = _key(code="abc", code_type="nvvm", target_type="ptx", options=_opts(use_libdevice=True), extra_digest=b"b" * 8)
    assert lib_a != lib_b
    _key(code=".version 7.0", code_type="ptx", options=_opts(time=True))  # no file for the linker's timing
    _key(code=".version 7.0", code_type="ptx", options=_opts(pch=True))  # NVRTC's options do not reach PTX
