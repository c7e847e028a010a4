"""cucore.compute against NVIDIA's cuda.compute (the cuda-cccl wheel), CuPy and
PyTorch at 2^28 elements, in one process on one stream, alternating after
warm-up (medians of event-timed samples): reduce, inclusive scan, radix sort
pairs, histogram (256 even bins: int32 samples all in range, int32 samples 3/4
out of range, bytes; the samples bench_compute makes), SAXPY. Then build times in fresh processes:
the first call of cucore.compute (cold, and warm from its disk cache: split into
make_reduce_into, the goal's "call to a runnable object", and the first call's
steps, with the libraries each step loaded) and of cuda.compute. Writes JSON
lines to $CUCORE_BENCH_JSON (as the C++ benchmarks do).
Exits 0 with a message when there is no GPU or no CuPy.

    PYTHONPATH=<build>/python python3 bench/python/bench_compute.py
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

N = 1 << 28
SAMPLES = int(os.environ.get("CUCORE_BENCH_ROUNDS", "7"))
SAXPY_RAW = r'''extern "C" __device__ void cucore_bench_saxpy(void* x, void* y, void* out) {
  *static_cast<float*>(out) = 2.0f * *static_cast<float*>(x) + *static_cast<float*>(y);
}'''


def skip(msg):
    print(f"bench_compute.py: skipped: {msg}")
    sys.exit(0)


try:
    import numpy as np
    import cupy as cp
except ImportError as e:
    skip(f"needs numpy and CuPy ({e})")
try:
    import cucore
    import cucore.compute as cuc

    if cucore.Device.count() == 0:
        skip("no CUDA device")
except Exception as e:
    skip(f"no usable GPU or cucore ({str(e).splitlines()[0]})")
try:
    import cuda.compute as ccc
except Exception as e:  # the peer is optional: carried as a wheel (scripts/carry-wheels)
    ccc = None
    print(f"bench_compute.py: cuda.compute is not importable ({e}); comparing with CuPy and PyTorch only")
try:
    import torch
except ImportError:
    torch = None

rows = []


def report(name, ours_ms, peer, peer_ms, goal=0.0):
    ratio = ours_ms / peer_ms if peer_ms else 0.0
    print(f"{name:<44} cucore {ours_ms:9.3f} ms   {peer:<16} {peer_ms:9.3f} ms   ratio {ratio:.3f}")
    rows.append({"name": name, "unit": "ms", "cucore": ours_ms, "peer": peer, "peer_value": peer_ms,
                 "ratio": ratio, "goal_ratio": goal})


def gpu_ms(fn, reps):
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for _ in range(reps):
        fn()
    stop.record()
    stop.synchronize()
    return cp.cuda.get_elapsed_time(start, stop) / reps


def compare(name, reps, cases):
    """cases: {label: fn}; the first is cucore. Alternating samples, medians."""
    for fn in cases.values():
        fn()
    times = {k: [] for k in cases}
    for i in range(SAMPLES):
        order = list(cases) if i % 2 else list(reversed(cases))
        for k in order:
            times[k].append(gpu_ms(cases[k], reps))
    med = {k: statistics.median(v) for k, v in times.items()}
    ours = med.pop("cucore")
    for peer, ms in med.items():
        report(f"py compute: {name}", ours, peer, ms, 1.0 if peer.startswith("cuda.compute") else 0.0)


def host_times(name, cases, reps=300):
    """Host microseconds per call of each case (its Python, argument reading and
    launches: what a loop of calls spends before the GPU gets the work), on an
    input small enough that the GPU keeps up, fewer launches than the driver
    queues; alternating samples, medians."""
    if len(cases) < 2:
        return
    for fn in cases.values():
        fn()
    cp.cuda.Device().synchronize()
    times = {k: [] for k in cases}
    for i in range(SAMPLES):
        for k in (list(cases) if i % 2 else list(reversed(cases))):
            t0 = time.perf_counter()
            for _ in range(reps):
                cases[k]()
            times[k].append((time.perf_counter() - t0) / reps * 1e6)
            cp.cuda.Device().synchronize()
    med = {k: statistics.median(v) for k, v in times.items()}
    ours = med.pop("cucore")
    for peer, us in med.items():
        ratio = ours / us if us else 0.0
        label = f"py compute: {name} call, host time (2^16 items)"
        print(f"{label:<44} cucore {ours:9.3f} us   {peer:<16} {us:9.3f} us   ratio {ratio:.3f}")
        rows.append({"name": label, "unit": "us", "cucore": ours, "peer": peer, "peer_value": us, "ratio": ratio,
                     "goal_ratio": 1.0})


def temp(nbytes):
    return cp.empty(max(int(nbytes), 1), np.uint8)


def main():
    ccc_name = "cuda.compute"
    if ccc is not None:
        try:
            from importlib.metadata import version

            ccc_name = f"cuda.compute {version('cuda-cccl')}"
        except Exception:
            pass
    print(f"bench_compute.py: cucore.compute builds CUB from CCCL {cuc.cccl_version()}; peer: {ccc_name}")
    a = cp.random.randint(0, 1024, N, dtype=np.int32)
    out1 = cp.empty(1, np.int32)
    init = np.array([0], np.int32)

    # reduce
    r = cuc.make_reduce_into(d_in=a, d_out=out1, op=cuc.OpKind.PLUS, h_init=init)
    t = temp(r(temp_storage=None, d_in=a, d_out=out1, num_items=N, h_init=init))
    cases = {"cucore": lambda: r(temp_storage=t, d_in=a, d_out=out1, num_items=N, h_init=init),
             "CuPy": lambda: cp.sum(a, out=out1[0])}
    if ccc is not None:
        rc = ccc.make_reduce_into(d_in=a, d_out=out1, op=ccc.OpKind.PLUS, h_init=init)
        tc = temp(rc(temp_storage=None, d_in=a, d_out=out1, num_items=N, op=ccc.OpKind.PLUS, h_init=init))
        cases[ccc_name] = lambda: rc(temp_storage=tc, d_in=a, d_out=out1, num_items=N, op=ccc.OpKind.PLUS, h_init=init)
    if torch is not None:
        ta = torch.as_tensor(a, device="cuda")
        cases["PyTorch"] = lambda: torch.sum(ta)
    compare("reduce sum int32 2^28", 20, cases)
    host_cases = {"cucore": lambda: r(temp_storage=t, d_in=a, d_out=out1, num_items=1 << 16, h_init=init)}
    if ccc is not None:
        host_cases[ccc_name] = lambda: rc(temp_storage=tc, d_in=a, d_out=out1, num_items=1 << 16,
                                          op=ccc.OpKind.PLUS, h_init=init)
    host_times("reduce", host_cases)

    # inclusive scan
    b = cp.empty(N, np.int32)
    s = cuc.make_inclusive_scan(d_in=a, d_out=b, op=cuc.OpKind.PLUS)
    ts = temp(s(temp_storage=None, d_in=a, d_out=b, num_items=N))
    cases = {"cucore": lambda: s(temp_storage=ts, d_in=a, d_out=b, num_items=N),
             "CuPy": lambda: cp.cumsum(a, out=b)}
    if ccc is not None:
        sc = ccc.make_inclusive_scan(d_in=a, d_out=b, op=ccc.OpKind.PLUS, init_value=None)
        tsc = temp(sc(temp_storage=None, d_in=a, d_out=b, op=ccc.OpKind.PLUS, init_value=None, num_items=N))
        cases[ccc_name] = lambda: sc(temp_storage=tsc, d_in=a, d_out=b, op=ccc.OpKind.PLUS, init_value=None,
                                     num_items=N)
    if torch is not None:
        tb = torch.as_tensor(b, device="cuda")
        cases["PyTorch"] = lambda: torch.cumsum(ta, 0, out=tb)
    compare("inclusive scan int32 2^28", 10, cases)
    del b, ts

    # radix sort pairs
    k = cp.random.randint(0, 1 << 31, N, dtype=np.int64).astype(np.uint32)
    v = cp.arange(N, dtype=np.uint32)
    ko, vo = cp.empty_like(k), cp.empty_like(v)
    rs = cuc.make_radix_sort(d_in_keys=k, d_out_keys=ko, d_in_values=v, d_out_values=vo, order=cuc.SortOrder.ASCENDING)
    tr = temp(rs(temp_storage=None, d_in_keys=k, d_out_keys=ko, d_in_values=v, d_out_values=vo, num_items=N))
    cases = {"cucore": lambda: rs(temp_storage=tr, d_in_keys=k, d_out_keys=ko, d_in_values=v, d_out_values=vo,
                                  num_items=N)}
    if ccc is not None:
        rsc = ccc.make_radix_sort(d_in_keys=k, d_out_keys=ko, d_in_values=v, d_out_values=vo,
                                  order=ccc.SortOrder.ASCENDING)
        trc = temp(rsc(temp_storage=None, d_in_keys=k, d_out_keys=ko, d_in_values=v, d_out_values=vo, num_items=N))
        cases[ccc_name] = lambda: rsc(temp_storage=trc, d_in_keys=k, d_out_keys=ko, d_in_values=v, d_out_values=vo,
                                      num_items=N)

    def cupy_pairs():
        idx = cp.argsort(k)
        cp.take(k, idx, out=ko)
        cp.take(v, idx, out=vo)

    cases["CuPy"] = cupy_pairs
    if torch is not None:
        tk = torch.as_tensor(k.view(np.int32), device="cuda")
        cases["PyTorch"] = lambda: torch.sort(tk)
    compare("radix sort pairs u32 2^28", 2, cases)
    del k, v, ko, vo, tr

    # histogram, 256 even bins: the samples of bench_compute (C++), made the
    # same way (a hash of the index), so the two runs' figures compare: masked
    # to the levels' range [0, 2^20) (every sample counted), then to [0, 2^22)
    # (3 in 4 outside), then bytes. Both libraries' histograms must agree.
    idx = cp.arange(N, dtype=np.uint32)
    hashed = cp.ElementwiseKernel(
        "uint32 k, uint32 mask, uint32 shift", "T out",
        "unsigned h = k * 2654435761u; h ^= h >> 15; h *= 2246822519u; h ^= h >> 13; out = (T)((h >> shift) & mask)",
        "cucore_bench_hash")
    hist = cp.empty(256, np.int32)
    hist_peer = cp.empty(256, np.int32)

    def histogram_case(label, hsamp, lo_v, hi_v, with_cupy):
        lv, lo, hi = np.array([257], np.int32), np.array([lo_v], np.int32), np.array([hi_v], np.int32)
        h = cuc.make_histogram_even(d_samples=hsamp, d_histogram=hist, h_num_output_levels=lv, h_lower_level=lo,
                                    h_upper_level=hi, num_samples=N)
        th = temp(h(temp_storage=None, d_samples=hsamp, d_histogram=hist, h_num_output_levels=lv, h_lower_level=lo,
                    h_upper_level=hi, num_samples=N))
        cases = {"cucore": lambda: h(temp_storage=th, d_samples=hsamp, d_histogram=hist, h_num_output_levels=lv,
                                     h_lower_level=lo, h_upper_level=hi, num_samples=N)}
        cases["cucore"]()
        counted = int(hist.sum())
        if ccc is not None:
            hc = ccc.make_histogram_even(d_samples=hsamp, d_histogram=hist_peer, h_num_output_levels=lv,
                                         h_lower_level=lo, h_upper_level=hi, num_samples=N)
            thc = temp(hc(temp_storage=None, d_samples=hsamp, d_histogram=hist_peer, h_num_output_levels=lv,
                          h_lower_level=lo, h_upper_level=hi, num_samples=N))
            cases[ccc_name] = lambda: hc(temp_storage=thc, d_samples=hsamp, d_histogram=hist_peer,
                                         h_num_output_levels=lv, h_lower_level=lo, h_upper_level=hi, num_samples=N)
            cases[ccc_name]()
            if not bool((hist == hist_peer).all()):
                print(f"py compute: {label}: cucore's histogram differs from cuda.compute's; not timed")
                return
        print(f"py compute: {label}: {counted} of {N} samples counted"
              + (", histograms equal" if ccc is not None else ""))
        if with_cupy:
            cases["CuPy"] = lambda: cp.histogram(hsamp, bins=256, range=(lo_v, hi_v))
            if torch is not None:
                tf = torch.as_tensor(hsamp, device="cuda").float()
                cases["PyTorch"] = lambda: torch.histc(tf, bins=256, min=lo_v, max=hi_v)
        compare(label, 20, cases)

    hsamp = cp.empty(N, np.int32)
    hashed(idx, np.uint32(0xfffff), np.uint32(0), hsamp)
    histogram_case("histogram even 256 bins int32 2^28 (uniform in range)", hsamp, 0, 1 << 20, True)
    hashed(idx, np.uint32(0x3fffff), np.uint32(0), hsamp)
    histogram_case("histogram even 256 bins int32 2^28 (3/4 out of range)", hsamp, 0, 1 << 20, False)
    del hsamp
    bsamp = cp.empty(N, np.uint8)
    hashed(idx, np.uint32(0xff), np.uint32(24), bsamp)
    histogram_case("histogram even 256 bins uint8 2^28 (uniform)", bsamp, 0, 256, False)
    del bsamp, idx

    # SAXPY
    x = cp.random.random(N, dtype=np.float32)
    y = cp.random.random(N, dtype=np.float32)
    z = cp.empty_like(x)
    t2 = cuc.make_binary_transform(d_in1=x, d_in2=y, d_out=z,
                                   op=cuc.CppOp("[](float a, float b) { return 2.0f * a + b; }"))
    cases = {"cucore": lambda: t2(d_in1=x, d_in2=y, d_out=z, num_items=N),
             "CuPy": lambda: cp.add(2.0 * x, y, out=z)}
    if ccc is not None:
        try:
            from cuda.compute.op import RawOp

            dev = cucore.Device(0)
            arch = f"sm_{dev.compute_capability.major}{dev.compute_capability.minor}"
            lto = cucore.Program(SAXPY_RAW, "c++", cucore.ProgramOptions(arch=arch, relocatable_device_code=True))
            raw = RawOp(ltoir=bytes(lto.compile("ltoir").code), name="cucore_bench_saxpy")
            tc2 = ccc.make_binary_transform(d_in1=x, d_in2=y, d_out=z, op=raw)
            cases[ccc_name] = lambda: tc2(d_in1=x, d_in2=y, d_out=z, op=raw, num_items=N)
        except Exception as e:
            print(f"bench_compute.py: cuda.compute SAXPY skipped ({str(e).splitlines()[0]})")
    if torch is not None:
        tx, ty, tz = (torch.as_tensor(q, device="cuda") for q in (x, y, z))
        cases["PyTorch"] = lambda: torch.add(ty, tx, alpha=2, out=tz)
    compare("SAXPY float 2^28", 10, cases)


# A fresh process's first reduce, step by step: make_reduce_into (the call to
# a runnable object: the goal's definition), then the first call after it (the
# temporary storage size, its allocation by CuPy, the call, the sync), with the
# shared libraries each step loaded. Prints one JSON line.
CHILD = r'''
import json, sys, time
import numpy as np, cupy as cp
which = sys.argv[1]
d_in = cp.arange(1000, dtype=np.int32); d_out = cp.empty(1, np.int32); cp.cuda.Device().synchronize()
if which == "cucore":
    import cucore.compute as m
else:
    import cuda.compute as m


def libs():
    with open("/proc/self/maps") as f:
        return {line.split()[-1] for line in f if ".so" in line}


steps, loaded = {}, {}
seen = libs()


def step(name, fn):
    global seen
    t = time.perf_counter()
    r = fn()
    steps[name] = (time.perf_counter() - t) * 1e3
    now = libs()
    if now - seen:
        loaded[name] = sorted(p.rsplit("/", 1)[-1] for p in now - seen)
    seen = now
    return r


init = np.array([0], np.int32)
r = step("make", lambda: m.make_reduce_into(d_in=d_in, d_out=d_out, op=m.OpKind.PLUS, h_init=init))
call = dict(d_in=d_in, d_out=d_out, num_items=1000, op=m.OpKind.PLUS, h_init=init)
n = step("size", lambda: r(temp_storage=None, **call))
tmp = step("alloc", lambda: cp.empty(max(n, 1), np.uint8))
step("call", lambda: r(temp_storage=tmp, **call))
step("sync", lambda: cp.cuda.Device().synchronize())
assert int(d_out.get()[0]) == 499500
print(json.dumps({"steps": steps, "loaded": loaded}))
'''

FIRST_CALL_STEPS = [("size", "temporary storage size"), ("alloc", "its allocation (CuPy)"),
                    ("call", "the call (host)"), ("sync", "sync")]


def child_run(which, env):
    r = subprocess.run([sys.executable, "-c", CHILD, which], env=env, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        print(f"bench_compute.py: {which} build child failed: {r.stderr.strip().splitlines()[-1:]}")
        return None
    run = json.loads(r.stdout.strip().splitlines()[-1])
    s = run["steps"]
    run["first_call"] = sum(s[k] for k, _ in FIRST_CALL_STEPS)
    run["total"] = s["make"] + run["first_call"]
    return run


def median_of(runs, fn):
    return statistics.median(fn(r) for r in runs)


def build_times():
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, CUCORE_PROGRAM_CACHE_DIR=d)
        cold = child_run("cucore", env)
        warm = [child_run("cucore", env) for _ in range(5)]
    peer = [child_run("cuda.compute", dict(os.environ)) for _ in range(2)] if ccc is not None else []
    peer = [p for p in peer if p is not None]
    warm = [w for w in warm if w is not None]
    peer_ms = median_of(peer, lambda r: r["total"]) if peer else None
    if cold is not None and peer:
        report("py compute: first call, cold build (reduce)", cold["total"], "cuda.compute", peer_ms)
    if warm:
        def value(name, ms, goal=0.0):
            print(f"{name:<44} cucore {ms:9.3f} ms" + (f"   (goal <= {goal:g} ms)" if goal else ""))
            rows.append({"name": name, "unit": "ms", "cucore": ms, "goal": goal})

        value("py compute: first call, warm disk cache (fresh process)", median_of(warm, lambda r: r["total"]), 5.0)
        value("  of which make_reduce_into (to a runnable object)", median_of(warm, lambda r: r["steps"]["make"]),
              5.0)
        value("  of which the first call after it", median_of(warm, lambda r: r["first_call"]))
        for key, what in FIRST_CALL_STEPS:
            value(f"    {key}: {what}", median_of(warm, lambda r: r["steps"][key]))
        for step_name, files in warm[0]["loaded"].items():
            print(f"      libraries the {step_name} loaded: {' '.join(files)}")
        if peer:
            report("py compute: first call, second process (reduce)", median_of(warm, lambda r: r["total"]),
                   "cuda.compute", peer_ms)
            report("py compute: make_reduce_into, second process", median_of(warm, lambda r: r["steps"]["make"]),
                   "cuda.compute", median_of(peer, lambda r: r["steps"]["make"]))


if __name__ == "__main__":
    main()
    build_times()
    out = os.environ.get("CUCORE_BENCH_JSON")
    if out:
        with open(out, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
