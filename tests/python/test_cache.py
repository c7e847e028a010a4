"""Program caches: InMemoryProgramCache and FileStreamProgramCache (values, LRU
eviction, round trips, across processes), Program.compile through a cache (hits,
a header edit is a miss, a cache written in Python keyed as cucore's own),
make_program_cache_key, and cuda.core's documented behaviours one test each:
overwrites, values too large or empty, KeyError(key), the directory made, made
again and followed, the cap counting writes in flight, clear() racing writers
(threads and a process), and the key's argument checks. CPU only."""
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


# ---- cuda.core's documented behaviours, one test each (issue 26) -------------------------
import random
import shutil
import stat
import threading
import time

KINDS = ["memory", "file"]


def _make(kind, tmp_path, **kw):
    return InMemoryProgramCache(**kw) if kind == "memory" else FileStreamProgramCache(tmp_path / "fc", **kw)


def _payload(rng, n):
    return rng.randbytes(n)


@pytest.mark.parametrize("kind", KINDS)
def test_writing_a_key_that_exists_replaces_it_and_counts_once(kind, tmp_path):
    rng = random.Random(f"overwrite-{kind}")
    cache = _make(kind, tmp_path, max_size_bytes=5000)
    a, k1, k2, c = (_payload(rng, 2000) for _ in range(4))
    cache[b"a"] = a
    cache[b"k"] = k1
    cache[b"k"] = k2  # replaces: the cap holds a + k, not a + k + k
    assert cache[b"a"] == a and cache[b"k"] == k2 and len(cache) == 2
    # the rewrite is the newest use: `a` (read after it) is newer still, so c evicts k
    _ = cache[b"a"]
    cache[b"c"] = c
    assert cache.get(b"k") is None and cache[b"a"] == a and cache[b"c"] == c
    shorter = _payload(rng, 7)
    cache[b"a"] = shorter  # a shorter value leaves nothing of the longer one
    assert cache[b"a"] == shorter
    cache["a"] = a  # a str key is its UTF-8 bytes: the same entry
    assert cache[b"a"] == a and len(cache) == 2


@pytest.mark.parametrize("kind", KINDS)
def test_a_value_larger_than_the_cap_drops_its_key_and_keeps_the_others(kind, tmp_path):
    rng = random.Random(f"too-large-{kind}")
    cache = _make(kind, tmp_path, max_size_bytes=4000)
    others = {f"o{i}".encode(): _payload(rng, 1000) for i in range(3)}
    cache.update(others)
    cache[b"k"] = _payload(rng, 500)
    cache[b"k"] = _payload(rng, 4001)  # cannot fit: not stored, and the old value is not served
    assert cache.get(b"k") is None
    for k, v in others.items():
        assert cache[k] == v, k
    assert len(cache) == 3


@pytest.mark.parametrize("kind", KINDS)
def test_empty_and_non_contiguous_values_round_trip(kind, tmp_path):
    rng = random.Random(f"values-{kind}")
    cache = _make(kind, tmp_path)
    cache[b"empty"] = b""
    assert cache[b"empty"] == b"" and cache.get(b"empty", 1) == b"" and len(cache) == 1
    raw = _payload(rng, 3001)
    strided = memoryview(raw)[::3]  # not contiguous: its elements, in order
    cache[b"strided"] = strided
    assert cache[b"strided"] == raw[::3]
    if kind == "file":
        again = FileStreamProgramCache(tmp_path / "fc")
        assert again[b"empty"] == b"" and again[b"strided"] == raw[::3]
    del cache[b"empty"]
    assert cache.get(b"empty") is None


@pytest.mark.parametrize("kind", KINDS)
def test_key_errors_carry_the_key_itself(kind, tmp_path):
    cache = _make(kind, tmp_path)
    for key in (b"missing\x00key", "missing-str", bytearray(b"ba")):
        with pytest.raises(KeyError) as ei:
            cache[key]
        assert ei.value.args == (key,) and str(ei.value) == repr(key)
        with pytest.raises(KeyError) as ei:
            del cache[key]
        assert ei.value.args == (key,)


def test_file_cache_creates_its_directory_when_made(tmp_path):
    where = tmp_path / "a" / "b" / "cache"
    FileStreamProgramCache(where)
    assert where.is_dir() and stat.S_IMODE(where.stat().st_mode) == 0o700


def test_file_cache_refuses_an_empty_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # "" would be the working directory

    class EmptyPath:
        def __fspath__(self):
            return ""

    for empty in ("", EmptyPath()):
        with pytest.raises(ValueError, match="empty"):
            FileStreamProgramCache(empty)
    assert list(tmp_path.iterdir()) == []


def test_file_cache_remakes_its_directory_and_follows_a_remade_one(tmp_path):
    rng = random.Random("remade")
    where = tmp_path / "fc"
    cache = FileStreamProgramCache(where)
    first = _payload(rng, 100)
    cache[b"a"] = first
    shutil.rmtree(where)  # someone clears the cache by hand
    assert cache.get(b"a") is None and len(cache) == 0
    second = _payload(rng, 100)
    cache[b"b"] = second  # remade on the next write
    assert where.is_dir() and cache[b"b"] == second and cache.get(b"a") is None
    # Removed and made again by another cache object (another process) before
    # each operation: this one counts, deletes, clears and reads what is there now.
    def remake():
        shutil.rmtree(where)
        other = FileStreamProgramCache(where)
        other[b"c"], other[b"d"] = third, fourth

    third, fourth = _payload(rng, 100), _payload(rng, 100)
    remake()
    assert len(cache) == 2
    remake()
    del cache[b"d"]
    assert FileStreamProgramCache(where).get(b"d") is None
    remake()
    cache.clear()
    assert len(FileStreamProgramCache(where)) == 0
    remake()
    assert cache[b"c"] == third


def test_the_size_cap_counts_temporary_files_in_flight(tmp_path):
    rng = random.Random("in-flight")
    where = tmp_path / "fc"
    cache = FileStreamProgramCache(where, max_size_bytes=1000)
    one, two = _payload(rng, 300), _payload(rng, 300)
    cache[b"1"] = one
    cache[b"2"] = two
    # Another writer's temporary file (young): it will land, so it counts.
    (where / ".tmp-4242-0-0123456789abcdef").write_bytes(_payload(rng, 350))
    # Things that are not a writer's file do not count: a FIFO (never opened),
    # a symlink to a large file (its own size), a stale temporary (swept).
    os.mkfifo(where / ".tmp-fifo")
    big = tmp_path / "big"
    big.write_bytes(b"x" * 100_000)
    os.symlink(big, where / ".tmp-link")
    stale = where / ".tmp-1-1-stale"
    stale.write_bytes(b"s" * 5000)
    old = time.time() - 7200
    os.utime(stale, (old, old))
    three = _payload(rng, 300)
    cache[b"3"] = three  # 300 * 3 + 350 > 1000: the least recently read goes
    assert cache.get(b"1") is None
    assert cache[b"2"] == two and cache[b"3"] == three
    assert not stale.exists() and big.stat().st_size == 100_000
    assert cache.size_bytes + 350 <= 1000  # the entries left room for the write in flight


@pytest.mark.parametrize("kind", KINDS)
def test_clear_while_other_threads_write(kind, tmp_path):
    rng = random.Random(f"clear-threads-{kind}")
    cache = _make(kind, tmp_path)
    values = {f"{w}-{i}".encode(): _payload(rng, rng.randrange(1, 4000)) for w in range(3) for i in range(60)}
    errors = []

    def writer(w):
        try:
            for i in range(60):
                k = f"{w}-{i}".encode()
                cache[k] = values[k]
                time.sleep(0)  # lets the clearing thread run between writes
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    clears = 0
    while any(t.is_alive() for t in threads):
        cache.clear()
        clears += 1
    for t in threads:
        t.join()
    assert errors == [] and clears > 0
    assert cache.stats["errors"] == 0  # no write was lost to a clear (its temporary file kept)
    for k, v in values.items():  # whatever survived is whole
        got = cache.get(k)
        assert got is None or got == v, k
    cache[b"after"] = values[b"0-0"]
    assert cache[b"after"] == values[b"0-0"]


def test_clear_while_another_process_writes(tmp_path):
    where = tmp_path / "fc"
    cache = FileStreamProgramCache(where)
    code = (
        "import random, sys; from cucore.utils import FileStreamProgramCache;"
        f"c = FileStreamProgramCache({str(where)!r}); rng = random.Random('child');"
        "vals = [rng.randbytes(rng.randrange(1, 5000)) for _ in range(300)];"
        "[c.__setitem__(b'k%d' % i, v) for i, v in enumerate(vals)];"
        "bad = [i for i, v in enumerate(vals) if c.get(b'k%d' % i) not in (None, v)];"
        "print(c.stats['errors'], len(bad))"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    clears = 0
    while child.poll() is None:
        cache.clear()
        clears += 1
    out, err = child.communicate()
    assert child.returncode == 0, err
    assert out.split() == ["0", "0"] and clears > 0, (out, err)
    rng = random.Random("child")
    vals = [rng.randbytes(rng.randrange(1, 5000)) for _ in range(300)]
    for i, v in enumerate(vals):
        assert cache.get(b"k%d" % i) in (None, v), i
    assert not [n for n in os.listdir(where) if n.startswith(".tmp-")]  # the child left no temporary file


# ---- make_program_cache_key's argument checks, as cuda.core's ----------------------------
def _k(**kw):
    base = dict(code="a", code_type="c++", options=ProgramOptions(arch="sm_90"), target_type="cubin")
    return make_program_cache_key(**{**base, **kw})


@pytest.mark.parametrize("field", ["code_type", "target_type"])
@pytest.mark.parametrize("bad", [None, 3, "fortran", "fatbin"])
def test_key_refuses_unknown_code_and_target_types_as_cuda_core(field, bad):
    if field == "code_type" and bad == "fatbin":
        bad = "cubin"
    with pytest.raises(ValueError) as ei:
        _k(**{field: bad})
    msg = str(ei.value)
    assert f"{field}={bad!r}" in msg and "not supported" in msg
    valid = ["c++", "nvvm", "ptx"] if field == "code_type" else ["cubin", "ltoir", "ptx"]
    assert str(valid) in msg


def test_key_takes_bytes_or_bytearray_code_for_nvvm_only():
    rng = random.Random("nvvm-code")
    ir = rng.randbytes(200)
    nvvm = dict(code_type="nvvm", target_type="ptx")
    assert _k(code=bytearray(ir), **nvvm) == _k(code=ir, **nvvm) != _k(code=ir[:-1], **nvvm)
    for ct, target in (("c++", "cubin"), ("ptx", "cubin")):
        for code in (ir, bytearray(ir)):
            with pytest.raises(TypeError, match="nvvm") as ei:
                _k(code=code, code_type=ct, target_type=target)
            assert "code must be str" in str(ei.value)
    with pytest.raises(TypeError, match="code must be str or bytes, got memoryview"):
        _k(code=memoryview(ir), **nvvm)


def test_key_extra_digest_is_bytes_like_and_an_empty_one_is_not_none():
    rng = random.Random("extra")
    digest = rng.randbytes(32)
    k = _k(extra_digest=digest)
    assert _k(extra_digest=bytearray(digest)) == k == _k(extra_digest=memoryview(digest))
    assert k != _k() and k != _k(extra_digest=digest[:-1])
    for bad in ("a str digest", 5, 1.5, [1, 2]):
        with pytest.raises(TypeError, match="extra_digest") as ei:
            _k(extra_digest=bad)
        assert type(bad).__name__ in str(ei.value)
    # b"" is a digest (cuda.core tests `is None`): its own key, and it stands for external files
    assert _k(extra_digest=b"") != _k()
    with_includes = ProgramOptions(arch="sm_90", include_path="/usr/include")
    assert len(_k(options=with_includes, extra_digest=b"")) == 32
    with pytest.raises(ValueError, match="extra_digest"):
        _k(options=with_includes)


def test_key_name_expressions_are_checked_where_nvrtc_takes_them():
    nvvm = dict(code="abc", code_type="nvvm", target_type="ptx")
    ptx = dict(code=".version 8.0", code_type="ptx")
    # ignored, unchecked, for the code types whose compiler takes none
    assert _k(name_expressions=None, **nvvm) == _k(**nvvm) == _k(name_expressions=5, **nvvm)
    assert _k(name_expressions=None, **ptx) == _k(**ptx)
    for bad, what in ((None, "NoneType"), (5, "int")):
        with pytest.raises(TypeError, match="name_expressions") as ei:
            _k(name_expressions=bad)
        assert what in str(ei.value)
    assert _k(name_expressions=["k<1>", b"k<2>"]) == _k(name_expressions=(b"k<2>", "k<1>"))
