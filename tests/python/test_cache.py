"""Program caches: InMemoryProgramCache and FileStreamProgramCache (values, LRU
eviction, round trips, across processes), Program.compile through a cache (hits,
a header edit is a miss, a cache written in Python keyed as cucore's own), and
make_program_cache_key. CPU only."""
import os
import subprocess
import sys

import pytest

from cucore import ObjectCode, Program, ProgramOptions
from cucore.utils import FileStreamProgramCache, InMemoryProgramCache, ProgramCacheResource, make_program_cache_key

from conftest import SAXPY_SRC


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
