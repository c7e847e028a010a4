"""IPC from Python: cucore against NVIDIA's cuda.core, side by side.

Export: a buffer's and an event's IPC descriptor (in this process; both
libraries make each once per object and keep it), read the way cuda.core's
objects offer it (the `ipc_descriptor` property in 1.x), the same on both. Import: a spawned child
maps both libraries' pools (sent by multiprocessing), then times importing a
buffer from its descriptor, closing it and syncing the stream, alternating
the libraries over several rounds after warm-up. Medians per call and the
ratio cucore / cuda.core; one JSON line per case to $CUCORE_BENCH_JSON (as
bench_vs_cuda_core.py). Exits 0 with a message without a GPU or cuda.core.

    PYTHONPATH=<build>/python python3 bench/python/bench_ipc.py
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import statistics
import sys
import time

from _common import import_cucore, import_cuda_core

ROUNDS = int(os.environ.get("CUCORE_BENCH_ROUNDS", "15"))
NUMBER = 200


def per_call(fn, number):
    t0 = time.perf_counter_ns()
    fn(number)
    return (time.perf_counter_ns() - t0) / number


def compare(name, ours, theirs, number, goal):
    ours(max(1, number // 10))
    theirs(max(1, number // 10))
    a, b = [], []
    for _ in range(ROUNDS):
        a.append(per_call(ours, number))
        b.append(per_call(theirs, number))
    ma, mb = statistics.median(a), statistics.median(b)
    ratio = round(ma / mb, 3) if mb else None
    return {"bench": "python_ipc_vs_cuda_core", "case": name, "cucore_ns": round(ma, 1),
            "cuda_core_ns": round(mb, 1), "ratio": ratio, "goal": goal,
            "pass": ratio is not None and ratio <= float(goal[2:-1])}


def descriptor(buf):
    # cuda.core names it a method in some releases and a property in others; cucore has both.
    get = getattr(buf, "get_ipc_descriptor", None)
    return get() if callable(get) else buf.ipc_descriptor


def _child(queue, mr_ours, d_ours, mr_cc, d_cc):
    try:
        import cucore
        import cuda.core as cc

        cucore.Device(0).set_current()
        cc.Device(0).set_current()
        s_ours = cucore.Device(0).create_stream()
        s_cc = cc.Device(0).create_stream()

        def import_ours(k):
            for _ in range(k):
                cucore.Buffer.from_ipc_descriptor(mr_ours, d_ours, stream=s_ours).close()
                s_ours.sync()

        def import_cc(k):
            for _ in range(k):
                cc.Buffer.from_ipc_descriptor(mr_cc, d_cc, stream=s_cc).close()
                s_cc.sync()

        queue.put(("ok", compare("IPC import+close of one buffer (child process)", import_ours, import_cc,
                                 NUMBER, "<=1.05x")))
    except BaseException as e:  # reported by the parent
        queue.put(("error", f"{type(e).__name__}: {e}"))


def main() -> int:
    cucore = import_cucore("bench_ipc")
    cc = import_cuda_core("bench_ipc")

    dev_ours, dev_cc = cucore.Device(0), cc.Device(0)
    dev_ours.set_current()
    dev_cc.set_current()
    s_ours, s_cc = dev_ours.create_stream(), dev_cc.create_stream()
    mr_ours = cucore.DeviceMemoryResource(0, cucore.DeviceMemoryResourceOptions(ipc_enabled=True))
    mr_cc = cc.DeviceMemoryResource(0, cc.DeviceMemoryResourceOptions(ipc_enabled=True))
    b_ours = mr_ours.allocate(1 << 20, stream=s_ours)
    b_cc = mr_cc.allocate(1 << 20, stream=s_cc)
    s_ours.sync()
    s_cc.sync()
    rows = []

    # Both sides in the form cuda.core's objects offer (cucore has both): a
    # property in cuda.core 1.x, a method in earlier releases. The same loop
    # for both, so neither pays a lookup the other skips.
    def exports(obj, method):
        def by_method(k):
            for _ in range(k):
                obj.get_ipc_descriptor()

        def by_property(k):
            for _ in range(k):
                obj.ipc_descriptor
        return by_method if method else by_property

    def compare_exports(name, ours, theirs):
        method = callable(getattr(theirs, "get_ipc_descriptor", None))
        form = ".get_ipc_descriptor()" if method else ".ipc_descriptor"
        print(f"bench_ipc: {name} as cuda.core {cc.__version__} offers it: {form}")
        return compare(name, exports(ours, method), exports(theirs, method), 2000, "<=1.05x")

    rows.append(compare_exports("IPC buffer descriptor (export)", b_ours, b_cc))
    e_ours = s_ours.record(options=cucore.EventOptions(ipc_enabled=True))
    e_cc = s_cc.record(options=cc.EventOptions(ipc_enabled=True))
    rows.append(compare_exports("IPC event descriptor (export)", e_ours, e_cc))

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(q, mr_ours, descriptor(b_ours), mr_cc, descriptor(b_cc)))
    p.start()
    status, row = q.get(timeout=300)
    p.join(60)
    if status != "ok":
        print(f"bench_ipc: the child failed: {row}")
        return 1
    rows.append(row)

    out = os.environ.get("CUCORE_BENCH_JSON")
    for r in rows:
        print(f"{r['case']}: cucore {r['cucore_ns'] / 1000:.2f} us, cuda.core {r['cuda_core_ns'] / 1000:.2f} us, "
              f"ratio {r['ratio']} (goal {r['goal']})")
        if out:
            with open(out, "a") as f:
                f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
