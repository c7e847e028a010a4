"""Green contexts in Python, with cuda.core 1.2's names: the options dataclasses
and the classes everywhere; splits, contexts, isolation and threads on a GPU
(skipped with a reason without one, failed under CUCORE_REQUIRE_GPU=1)."""
import dataclasses
import re
import threading
import warnings

import pytest

import cucore
from cucore import (
    Context,
    ContextOptions,
    Device,
    DeviceResources,
    LaunchConfig,
    Program,
    ProgramOptions,
    SMResource,
    SMResourceOptions,
    WorkqueueResource,
    WorkqueueResourceOptions,
    launch,
)

from conftest import require_gpu

np = pytest.importorskip("numpy")

SMID_SRC = r"""
extern "C" __global__ void record_smid(unsigned* smid, long long spin_cycles) {
    unsigned id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    long long start = clock64();
    while (clock64() - start < spin_cycles) {}
    if (threadIdx.x == 0) smid[blockIdx.x] = id;
}
extern "C" __global__ void saxpy(float a, const float* x, const float* y, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + y[i];
}
"""


# ---- everywhere ------------------------------------------------------------------------
def test_names_as_cuda_core_spells_them():
    for name in ("DeviceResources", "SMResource", "SMResourceOptions", "WorkqueueResource",
                 "WorkqueueResourceOptions", "ContextOptions", "Context"):
        assert hasattr(cucore, name), name
        assert name in cucore.__all__, name
    assert hasattr(Device, "resources") and hasattr(Device, "create_context")
    for attr in ("is_green", "resources", "create_stream", "close", "is_closed"):
        assert hasattr(Context, attr), attr
    assert hasattr(cucore.Stream, "resources")


def test_options_dataclasses():
    o = SMResourceOptions()
    assert (o.count, o.coscheduled_sm_count, o.preferred_coscheduled_sm_count, o.backfill) == (None, None, None, False)
    assert SMResourceOptions(count=[64, 64]).count == [64, 64]
    assert [f.name for f in dataclasses.fields(SMResourceOptions)] == [
        "count", "coscheduled_sm_count", "preferred_coscheduled_sm_count", "backfill"]
    w = WorkqueueResourceOptions(sharing_scope="green_ctx_balanced", concurrency_limit=4)
    assert (w.sharing_scope, w.concurrency_limit) == ("green_ctx_balanced", 4)
    assert WorkqueueResourceOptions().sharing_scope is None
    with pytest.raises(ValueError, match="not a valid sharing scope"):
        WorkqueueResourceOptions(sharing_scope="everything")
    with pytest.raises(ValueError, match="not a valid sharing scope"):
        WorkqueueResourceOptions(sharing_scope=["green_ctx_balanced"])
    with pytest.raises(ValueError, match=">= 1"):
        WorkqueueResourceOptions(concurrency_limit=0)
    with pytest.raises(TypeError):
        WorkqueueResourceOptions(concurrency_limit=2.5)
    assert ContextOptions([1, 2]).resources == [1, 2]
    with pytest.raises(TypeError):
        ContextOptions()  # resources is required, as in cuda.core


def test_resource_classes_are_not_constructible():
    for cls in (SMResource, WorkqueueResource, DeviceResources):
        with pytest.raises(RuntimeError, match="cannot be instantiated directly"):
            cls()


def test_feature_unavailable_is_a_not_implemented_error():
    # cuda.core raises NotImplementedError on drivers too old for green contexts.
    assert issubclass(cucore.FeatureUnavailableError, NotImplementedError)
    assert issubclass(cucore.FeatureUnavailableError, cucore.Error)


# ---- on a GPU --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dev():
    require_gpu()
    d = Device(0)
    d.set_current()
    return d


@pytest.fixture(scope="module")
def kernels(dev):
    arch = f"sm_{dev.compute_capability.major}{dev.compute_capability.minor}"
    code = Program(SMID_SRC, "c++", ProgramOptions(arch=arch)).compile("cubin")
    return code.get_kernel("record_smid"), code.get_kernel("saxpy")


def _counts(groups):
    return [g.sm_count for g in groups]


@pytest.mark.gpu
def test_device_resources(dev):
    sm = dev.resources.sm
    assert isinstance(sm, SMResource)
    assert sm.sm_count == dev.properties.multiprocessor_count
    assert sm.min_partition_size > 0 and sm.coscheduled_alignment > 0
    assert isinstance(sm.handle, int) and sm.handle != 0
    assert dev.context.resources.sm.sm_count == sm.sm_count
    assert dev.create_stream().resources.sm.sm_count == sm.sm_count


@pytest.mark.gpu
def test_halves_never_give_fewer_groups(dev):
    sm = dev.resources.sm
    n = sm.sm_count
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        groups, rest = sm.split(SMResourceOptions(count=[n // 2, n // 2]))
    assert len(groups) == 2
    assert all(g.sm_count <= n // 2 for g in groups)
    assert sum(_counts(groups)) + rest.sm_count == n
    rounded = [w for w in caught if issubclass(w.category, UserWarning)]
    assert len(rounded) == (1 if groups[0].sm_count != n // 2 else 0)
    if n == 132:
        assert _counts(groups) == [64, 64] and rest.sm_count == 4
        assert "rounded down to [64, 64]" in str(rounded[0].message)
        assert rounded[0].filename == __file__, "the warning points at the caller's line"
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(UserWarning):
                sm.split(SMResourceOptions(count=[66, 66]))


@pytest.mark.gpu
def test_split_options_as_cuda_core_takes_them(dev):
    sm = dev.resources.sm
    m = sm.min_partition_size
    one, rest = sm.split(SMResourceOptions(count=m))
    assert _counts(one) == [m] and rest.sm_count == sm.sm_count - m
    assert _counts(sm.split(SMResourceOptions())[0]) == [m]  # None: the smallest group
    assert _counts(sm.split(SMResourceOptions(count=(m, 2 * m)))[0]) == [m, 2 * m]
    dry, dry_rest = sm.split(SMResourceOptions(count=[m, m]), dry_run=True)
    assert _counts(dry) == [m, m] and not dry[0].is_usable
    with pytest.raises(TypeError):
        sm.split(SMResourceOptions(count=[m, m]), True)  # dry_run is keyword-only
    with pytest.raises(TypeError, match="SMResourceOptions"):
        sm.split(m)  # a dict of the fields is taken (cuda.core's check_or_create_options); an int is not
    with pytest.raises(TypeError, match="int, Sequence, or None"):
        sm.split(SMResourceOptions(count=8.0))
    with pytest.raises(ValueError, match="empty"):
        sm.split(SMResourceOptions(count=[]))
    with pytest.raises(ValueError, match="non-negative"):
        sm.split(SMResourceOptions(count=[m, -1]))
    with pytest.raises(ValueError, match="expected 2"):
        sm.split(SMResourceOptions(count=[m, m], coscheduled_sm_count=[m]))
    with pytest.raises(ValueError, match="count is a single value"):
        sm.split(SMResourceOptions(count=m, backfill=[True]))
    with pytest.raises(NotImplementedError, match="13.1"):
        sm.split(SMResourceOptions(count=m, coscheduled_sm_count=m))
    with pytest.raises(ValueError) as e:
        sm.split(SMResourceOptions(count=sm.sm_count + m))
    msg = str(e.value)
    assert "SMs in all" in msg and "minimum partition" in msg
    fix = re.search(r"count=(\[[0-9, ]+\])", msg)
    assert fix, msg
    assert len(sm.split(SMResourceOptions(count=eval(fix.group(1))))[0]) >= 1  # the suggestion works
    with pytest.raises(ValueError, match="below the minimum partition"):
        sm.split(SMResourceOptions(count=[m, max(1, m // 2)]))


@pytest.mark.gpu
def test_green_contexts_run_on_their_sms_only(dev, kernels):
    record_smid, _ = kernels
    n = dev.resources.sm.sm_count
    groups, _ = dev.resources.sm.split(SMResourceOptions(count=[n // 2, n // 2]))
    ctxs = [dev.create_context(ContextOptions([g])) for g in groups]
    assert all(c.is_green and not c.is_primary for c in ctxs)
    assert [c.resources.sm.sm_count for c in ctxs] == _counts(groups)
    blocks = 8 * n
    used = []
    streams = [c.create_stream() for c in ctxs]
    bufs = [dev.allocate(blocks * 4, stream=s) for s in streams]
    for s, b in zip(streams, bufs):
        launch(s, LaunchConfig(grid=blocks, block=128), record_smid, b, np.int64(100_000))
    for s, b in zip(streams, bufs):
        host = np.empty(blocks, dtype=np.uint32)
        b.copy_to(host, stream=s)
        s.sync()
        used.append(set(host.tolist()))
    for g, u in zip(groups, used):
        assert len(u) <= g.sm_count, f"blocks left their group of {g.sm_count} SMs: {len(u)} used"
        assert 4 * len(u) >= 3 * g.sm_count
    assert not (used[0] & used[1]), "the two groups share SMs"
    for s in streams:
        assert s.context.is_green and s.resources.sm.sm_count in _counts(groups)
        s.close()
    for c in ctxs:
        c.close()
        assert c.is_closed


@pytest.mark.gpu
def test_two_threads_two_green_contexts(dev, kernels):
    _, saxpy = kernels
    n_sm = dev.resources.sm.sm_count
    groups, _ = dev.resources.sm.split(SMResourceOptions(count=[n_sm // 2, n_sm // 2]))
    errors = []
    N = 1_000_003
    rng = np.random.default_rng(3)
    data = [(rng.uniform(-100, 100, N).astype(np.float32), rng.uniform(-100, 100, N).astype(np.float32))
            for _ in range(2)]

    def task(i, a):
        try:
            Device(0).set_current()
            ctx = dev.create_context(ContextOptions([groups[i]]))
            s = ctx.create_stream()
            x, y = data[i]
            bx, by, bo = (dev.allocate(N * 4, stream=s) for _ in range(3))
            bx.copy_from(x, stream=s)
            by.copy_from(y, stream=s)
            for _ in range(10):
                launch(s, LaunchConfig(grid=(N + 255) // 256, block=256), saxpy, np.float32(a), bx, by, bo, np.int32(N))
            out = np.empty(N, dtype=np.float32)
            bo.copy_to(out, stream=s)
            s.sync()
            np.testing.assert_allclose(out, np.float32(a) * x + y, rtol=1e-5, atol=1e-4)
            ctx.close()
        except BaseException as e:  # reported in the main thread
            errors.append(f"thread {i}: {e!r}")

    threads = [threading.Thread(target=task, args=(i, a)) for i, a in ((0, 3.0), (1, 5.0))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@pytest.mark.gpu
def test_closing_a_context_while_its_stream_lives(dev, kernels):
    _, saxpy = kernels
    groups, _ = dev.resources.sm.split(SMResourceOptions(count=dev.resources.sm.min_partition_size * 2))
    ctx = dev.create_context(ContextOptions([groups[0]]))
    s = ctx.create_stream()
    ctx.close()
    assert ctx.is_closed
    with pytest.raises(cucore.ClosedError):
        ctx.create_stream()
    N = 4099
    rng = np.random.default_rng(9)
    x = rng.uniform(-10, 10, N).astype(np.float32)
    y = rng.uniform(-10, 10, N).astype(np.float32)
    bx, by, bo = (dev.allocate(N * 4, stream=s) for _ in range(3))
    bx.copy_from(x, stream=s)
    by.copy_from(y, stream=s)
    launch(s, LaunchConfig(grid=(N + 127) // 128, block=128), saxpy, np.float32(-2.0), bx, by, bo, np.int32(N))
    out = np.empty(N, dtype=np.float32)
    bo.copy_to(out, stream=s)
    s.sync()
    np.testing.assert_allclose(out, np.float32(-2.0) * x + y, rtol=1e-5, atol=1e-4)
    assert s.context.is_green
    assert s.resources.sm.sm_count == groups[0].sm_count
    s.close()


@pytest.mark.gpu
def test_create_context_refuses_bad_resources(dev):
    sm = dev.resources.sm
    m = sm.min_partition_size
    a, _ = sm.split(SMResourceOptions(count=[m, m]))
    b, _ = sm.split(SMResourceOptions(count=[m, m]))
    with pytest.raises(ValueError, match="same split"):
        dev.create_context(ContextOptions([a[0], b[0]]))
    with pytest.raises(ValueError, match="empty"):
        dev.create_context(ContextOptions([]))
    with pytest.raises(TypeError, match="SMResource or WorkqueueResource"):
        dev.create_context(ContextOptions([42]))
    dry, _ = sm.split(SMResourceOptions(count=m), dry_run=True)
    with pytest.raises(ValueError, match="dry-run"):
        dev.create_context(ContextOptions(dry))
    both = dev.create_context(ContextOptions(a))  # two groups of one split: one context
    assert both.resources.sm.sm_count == 2 * a[0].sm_count
    both.close()


@pytest.mark.gpu
def test_workqueue_on_this_driver(dev):
    try:
        wq = dev.resources.workqueue
    except cucore.FeatureUnavailableError as e:
        assert "13.1" in e.requirement
        return
    assert wq.sharing_scope in ("device_ctx", "green_ctx_balanced")
    assert wq.concurrency_limit >= 1
    wq.configure(WorkqueueResourceOptions(sharing_scope="green_ctx_balanced", concurrency_limit=2))
    assert (wq.sharing_scope, wq.concurrency_limit) == ("green_ctx_balanced", 2)
