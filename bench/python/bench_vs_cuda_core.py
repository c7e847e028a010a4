"""cucore's Python module against NVIDIA's cuda.core, side by side in one process.

Each case runs cucore and cuda.core alternately (several rounds, after warm-up)
and reports per-call medians and the ratio cucore / cuda.core; the goal column
is the issue's target ratio (or absolute figure). Writes one JSON line per case
to $CUCORE_BENCH_JSON (appended) when it is set. Exits 0 with a message when
there is no GPU or no cuda.core.

    PYTHONPATH=<build>/python python3 bench/python/bench_vs_cuda_core.py
"""
from __future__ import annotations

import ctypes
import json
import os
import statistics
import subprocess
import sys
import time

from _common import import_cucore, import_cuda_core, skip

SAXPY = r"""
extern "C" __global__ void saxpy(float alpha, const float* __restrict__ x,
                                 const float* __restrict__ y, float* out, int n) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) out[idx] = alpha * x[idx] + y[idx];
}
"""

ROUNDS = int(os.environ.get("CUCORE_BENCH_ROUNDS", "15"))


BENCH = "bench_vs_cuda_core"
try:
    import numpy as np
except ImportError:
    skip(BENCH, "numpy is not installed")
cucore = import_cucore(BENCH)
try:
    from cucore.utils import StridedMemoryView as CuView
except ImportError as e:
    skip(BENCH, f"cucore is not importable ({e})")
cc = import_cuda_core(BENCH)
try:
    from cuda.core.utils import StridedMemoryView as CcView
except Exception as e:
    skip(BENCH, f"NVIDIA's cuda.core is not installed ({e})")


def per_call(fn, number: int) -> float:
    t0 = time.perf_counter_ns()
    fn(number)
    return (time.perf_counter_ns() - t0) / number


def compare(name, ours, theirs, number, goal=None, sync=None):
    """ours/theirs: callables taking a repeat count; returns the result row."""
    ours(max(1, number // 10))
    theirs(max(1, number // 10))
    a, b = [], []
    for _ in range(ROUNDS):
        a.append(per_call(ours, number))
        if sync:
            sync()
        b.append(per_call(theirs, number))
        if sync:
            sync()
    ma, mb = statistics.median(a), statistics.median(b)
    row = {"bench": "python_vs_cuda_core", "case": name, "cucore_ns": round(ma, 1), "cuda_core_ns": round(mb, 1),
           "ratio": round(ma / mb, 3) if mb else None, "goal": goal}
    if isinstance(goal, str) and goal.startswith("<="):
        target = goal[2:].strip()
        if target.endswith("x"):
            row["pass"] = row["ratio"] is not None and row["ratio"] <= float(target[:-1])
        elif target.endswith("ns"):
            row["pass"] = ma <= float(target[:-2])
        elif target.endswith("us"):
            row["pass"] = ma <= float(target[:-2]) * 1000
    return row


def main() -> int:
    rows = []
    # ---- set-up, both libraries on device 0 ----
    d_ours = cucore.Device(0)
    d_ours.set_current()
    d_cc = cc.Device(0)
    d_cc.set_current()
    arch = f"sm_{d_ours.compute_capability.major}{d_ours.compute_capability.minor}"
    s_ours = d_ours.create_stream()
    s_cc = d_cc.create_stream()
    k_ours = cucore.Program(SAXPY, "c++", cucore.ProgramOptions(arch=arch)).compile("cubin").get_kernel("saxpy")
    k_cc = cc.Program(SAXPY, "c++", cc.ProgramOptions(arch=arch)).compile("cubin").get_kernel("saxpy")
    n = 1 << 10
    bo = [d_ours.allocate(n * 4, stream=s_ours) for _ in range(3)]
    bc = [d_cc.allocate(n * 4, stream=s_cc) for _ in range(3)]
    cfg_ours = cucore.LaunchConfig(grid=(n + 255) // 256, block=256)
    cfg_cc = cc.LaunchConfig(grid=(n + 255) // 256, block=256)
    alpha = np.float32(2.0)
    nn = np.int32(n)

    def sync():
        s_ours.sync()
        s_cc.sync()

    # launch, SAXPY's 5 arguments (float, 3 Buffers, int)
    def launch_ours(k):
        launch, s, cfg, ker, x, y, o = cucore.launch, s_ours, cfg_ours, k_ours, bo[0], bo[1], bo[2]
        for _ in range(k):
            launch(s, cfg, ker, alpha, x, y, o, nn)

    def launch_cc(k):
        launch, s, cfg, ker, x, y, o = cc.launch, s_cc, cfg_cc, k_cc, bc[0], bc[1], bc[2]
        for _ in range(k):
            launch(s, cfg, ker, alpha, x, y, o, nn)

    rows.append(compare("launch saxpy (5 args)", launch_ours, launch_cc, 2000, "<= 0.8x", sync))

    # Device(0)
    def dev_ours(k):
        D = cucore.Device
        for _ in range(k):
            D(0)

    def dev_cc(k):
        D = cc.Device
        for _ in range(k):
            D(0)

    rows.append(compare("Device(0)", dev_ours, dev_cc, 100_000, "<= 100ns"))

    # create_stream / create_event (+ close)
    def stream_ours(k):
        for _ in range(k):
            d_ours.create_stream().close()

    def stream_cc(k):
        for _ in range(k):
            d_cc.create_stream().close()

    rows.append(compare("create_stream+close", stream_ours, stream_cc, 2000, "<= 1.0x"))

    def event_ours(k):
        for _ in range(k):
            d_ours.create_event().close()

    def event_cc(k):
        for _ in range(k):
            d_cc.create_event().close()

    rows.append(compare("create_event+close", event_ours, event_cc, 5000, "<= 1.0x"))

    # 1 MiB allocate + close through the device's memory resource, stream-ordered
    mr_ours = cucore.DeviceMemoryResource(0)
    mr_cc = cc.DeviceMemoryResource(0)

    def alloc_ours(k):
        for _ in range(k):
            mr_ours.allocate(1 << 20, stream=s_ours).close()

    def alloc_cc(k):
        for _ in range(k):
            mr_cc.allocate(1 << 20, stream=s_cc).close()

    rows.append(compare("allocate+close 1 MiB", alloc_ours, alloc_cc, 5000, "<= 0.7x", sync))

    # StridedMemoryView of a PyTorch tensor: cucore reads it through the DLPack
    # C exchange API (torch.Tensor.__dlpack_c_exchange_api__), cuda.core through
    # its own entry (from_any_interface, its recommended one).
    try:
        import torch

        t = torch.zeros(1024, device="cuda")
        if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
            print("(this PyTorch has no DLPack C exchange API: cucore falls back to __dlpack__)")

        def view_ours(k):
            f = CuView.from_any_interface
            for _ in range(k):
                f(t, -1)

        def view_cc(k):
            f = CcView.from_any_interface
            for _ in range(k):
                f(t, -1)

        rows.append(compare("StridedMemoryView(torch tensor)", view_ours, view_cc, 20000, "<= 0.5x"))

        # The same with stream ordering: the consumer stream waits for PyTorch's current stream.
        consumer_ours, consumer_cc = int(s_ours.handle), int(s_cc.handle)  # stream_ptr is an int in both

        def view_ordered_ours(k):
            f = CuView.from_any_interface
            for _ in range(k):
                f(t, consumer_ours)

        def view_ordered_cc(k):
            f = CcView.from_any_interface
            for _ in range(k):
                f(t, consumer_cc)

        rows.append(compare("StridedMemoryView(torch tensor, stream)", view_ordered_ours, view_ordered_cc, 5000,
                            None, sync))

        # DLPack both ways, the pair: StridedMemoryView.from_dlpack of a tensor, and
        # PyTorch taking a Buffer (zero-copy both, checked once before timing).
        assert CuView.from_dlpack(t, -1).ptr == t.data_ptr() == CcView.from_dlpack(t, -1).ptr
        assert torch.from_dlpack(bo[0]).data_ptr() == bo[0].handle
        assert torch.from_dlpack(bc[0]).data_ptr() == int(bc[0].handle)

        def from_dlpack_ours(k):
            f = CuView.from_dlpack
            for _ in range(k):
                f(t, -1)

        def from_dlpack_cc(k):
            f = CcView.from_dlpack
            for _ in range(k):
                f(t, -1)

        rows.append(compare("StridedMemoryView.from_dlpack(torch tensor)", from_dlpack_ours, from_dlpack_cc, 20000,
                            "<= 0.5x"))

        def torch_ours(k):
            f, b = torch.from_dlpack, bo[0]
            for _ in range(k):
                f(b)

        def torch_cc(k):
            f, b = torch.from_dlpack, bc[0]
            for _ in range(k):
                f(b)

        rows.append(compare("torch.from_dlpack(Buffer)", torch_ours, torch_cc, 20000, "<= 0.5x"))

        # What torch.from_dlpack asks of the producer (the part a library controls):
        # __dlpack_device__, then __dlpack__ with torch's keywords, the capsule dropped
        # unconsumed (its deleter runs as after a consumer).
        kw = {"max_version": (1, 0), "stream": 1}

        def producer_ours(k):
            b = bo[0]
            for _ in range(k):
                b.__dlpack_device__()
                b.__dlpack__(**kw)

        def producer_cc(k):
            b = bc[0]
            for _ in range(k):
                b.__dlpack_device__()
                b.__dlpack__(**kw)

        rows.append(compare("Buffer.__dlpack_device__ + __dlpack__ (torch's calls)", producer_ours, producer_cc,
                            20000))

        # torch's own floor: the same conversion of one of its own tensors (its producer side
        # is C++). cucore / this ratio near 1 means torch's consumer cost dominates.
        def torch_self(k):
            f = torch.from_dlpack
            for _ in range(k):
                f(t)

        rows.append(compare("torch.from_dlpack(Buffer) [peer: torch.from_dlpack(torch tensor)]", torch_ours, torch_self,
                            20000))
    except ImportError:
        print("(PyTorch not installed: no StridedMemoryView case)")

    # cache hit: InMemoryProgramCache.get
    from cucore.utils import InMemoryProgramCache as CuCache
    from cuda.core.utils import InMemoryProgramCache as CcCache

    obj_o = cucore.Program(SAXPY, "c++", cucore.ProgramOptions(arch=arch)).compile("cubin")
    obj_c = cc.Program(SAXPY, "c++", cc.ProgramOptions(arch=arch)).compile("cubin")
    c_o, c_c = CuCache(), CcCache()
    c_o["k"] = obj_o
    c_c["k"] = obj_c

    def get_ours(k):
        g = c_o.get
        for _ in range(k):
            g("k")

    def get_cc(k):
        g = c_c.get
        for _ in range(k):
            g("k")

    rows.append(compare("InMemoryProgramCache.get hit", get_ours, get_cc, 20000, None))

    # cache hit: FileStreamProgramCache.get, the same cubin, each in its own directory
    import tempfile

    from cucore.utils import FileStreamProgramCache as CuFile
    from cuda.core.utils import FileStreamProgramCache as CcFile

    with tempfile.TemporaryDirectory() as d_o, tempfile.TemporaryDirectory() as d_c:
        f_o, f_c = CuFile(d_o), CcFile(d_c)
        f_o["k"] = obj_o
        f_c["k"] = obj_c
        assert bytes(f_o.get("k")) == bytes(f_c.get("k"))

        def fget_ours(k):
            g = f_o.get
            for _ in range(k):
                g("k")

        def fget_cc(k):
            g = f_c.get
            for _ in range(k):
                g("k")

        rows.append(compare("FileStreamProgramCache.get hit", fget_ours, fget_cc, 2000, None))

    # import time, in fresh interpreters
    def import_time(mod: str) -> float:
        code = f"import time; t=time.perf_counter(); import {mod}; print(time.perf_counter()-t)"
        vals = []
        for _ in range(5):
            r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
            if r.returncode == 0:
                vals.append(float(r.stdout.strip()) * 1e9)
        return statistics.median(vals) if vals else float("nan")

    io_, ic = import_time("cucore"), import_time("cuda.core")
    rows.append({"bench": "python_vs_cuda_core", "case": "import", "cucore_ns": round(io_), "cuda_core_ns": round(ic),
                 "ratio": round(io_ / ic, 3), "goal": "<= 1.0x", "pass": io_ <= ic})

    for b in bo:
        b.close()
    for b in bc:
        b.close()
    sync()

    print(f"{'case':34} {'cucore':>12} {'cuda.core':>12} {'ratio':>7}  goal")
    for r in rows:
        fmt = lambda ns: f"{ns / 1000:.3f} us" if ns >= 1000 else f"{ns:.0f} ns"  # noqa: E731
        verdict = "" if "pass" not in r else ("  ok" if r["pass"] else "  MISSED")
        print(f"{r['case']:34} {fmt(r['cucore_ns']):>12} {fmt(r['cuda_core_ns']):>12} {r['ratio']:>7}  "
              f"{r['goal'] or ''}{verdict}")
    out = os.environ.get("CUCORE_BENCH_JSON")
    if out:
        with open(out, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
