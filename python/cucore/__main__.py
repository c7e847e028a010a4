"""python -m cucore doctor [--json]: what this machine offers cucore.

The same report as the CLI's `cucore doctor` (tools/cmd_doctor.cpp), built from
the same libcucore calls (cucore.pathfinder.report(), Device, DeviceProperties)
and formatted here, so it works from a wheel that ships no CLI.
"""
from __future__ import annotations

import argparse
import json
import sys


def _doctor(as_json: bool) -> int:
    import cucore

    components = cucore.pathfinder.report()
    devices = []
    device_error = ""
    count = 0
    try:
        count = cucore.Device.count()
        for i in range(count):
            d = cucore.Device(i)
            p = d.properties
            devices.append(
                {
                    "ordinal": i,
                    "name": d.name,
                    "arch": "sm_" + d.arch,
                    "uuid": "GPU-" + d.uuid,
                    "pci_bus_id": d.pci_bus_id,
                    "multiprocessor_count": p.multiprocessor_count,
                    "max_threads_per_block": p.max_threads_per_block,
                    "warp_size": p.warp_size,
                    "max_shared_memory_per_block": p.max_shared_memory_per_block,
                    "max_shared_memory_per_block_optin": p.max_shared_memory_per_block_optin,
                    "l2_cache_size": p.l2_cache_size,
                    "memory_clock_rate_khz": p.memory_clock_rate,
                    "global_memory_bus_width": p.global_memory_bus_width,
                    "total_memory": p.total_memory,
                    "cooperative_launch": p.cooperative_launch,
                    "cluster_launch": p.cluster_launch,
                    "memory_pools_supported": p.memory_pools_supported,
                }
            )
    except Exception as e:  # no driver, no device: say so
        device_error = str(e)

    found = {c.name: c.found for c in components}
    can_compile = found.get("nvrtc", False)
    can_link = found.get("nvjitlink", False)
    status = 0
    if devices:
        n = len(devices)
        verdict = f"ready: {n} GPU{'' if n == 1 else 's'}" + (
            ", run-time compilation available" if can_compile else ", but NVRTC is missing: no run-time compilation"
        )
        status = 0 if can_compile else 1
    elif can_compile:
        why = device_error.split("\n")[0] if device_error else "no CUDA device"
        verdict = f"compile-only: no GPU usable here ({why}); compiling and linking for an explicit arch works"
    else:
        verdict = "not usable: no GPU and no NVRTC"
        status = 1

    if as_json:
        out = {
            "components": [
                {
                    "name": c.name,
                    "found": c.found,
                    "path": c.path,
                    "version": c.version,
                    "found_by": c.found_by,
                    "searched": list(c.searched),
                    "hint": c.hint,
                }
                for c in components
            ],
            "device_count": count,
            "device_error": device_error,
            "devices": devices,
            "can_compile": can_compile,
            "can_link": can_link,
            "verdict": verdict,
        }
        print(json.dumps(out, indent=2))
        return status

    print(f"cucore {cucore.__version__}\n\nComponents")
    for c in components:
        if c.found:
            print(f"  {c.name:<13} {c.version or '-':<12} {c.path}  ({c.found_by})")
        else:
            print(f"  {c.name:<13} NOT FOUND; searched:")
            for s in c.searched:
                print(f"                  {s}")
            if c.hint:
                print(f"                hint: {c.hint}")
    print("\nDevices")
    if not devices:
        print(f"  none: {device_error or 'the driver reports no CUDA device'}")
    for d in devices:
        print(f"  [{d['ordinal']}] {d['name']}  {d['arch']}  {d['pci_bus_id']}  {d['uuid']}")
        print(
            f"      {d['multiprocessor_count']} SMs, {d['total_memory'] / (1 << 30):.1f} GiB, "
            f"{d['global_memory_bus_width']}-bit bus at {d['memory_clock_rate_khz'] // 1000} MHz, "
            f"L2 {d['l2_cache_size'] // 1024} KiB, smem/block {d['max_shared_memory_per_block'] // 1024} KiB "
            f"(opt-in {d['max_shared_memory_per_block_optin'] // 1024} KiB)"
        )
        yn = lambda b: "yes" if b else "no"  # noqa: E731
        print(
            f"      max threads/block {d['max_threads_per_block']}, warp {d['warp_size']}, "
            f"cooperative {yn(d['cooperative_launch'])}, clusters {yn(d['cluster_launch'])}, "
            f"memory pools {yn(d['memory_pools_supported'])}"
        )
    print(f"\nverdict: {verdict}")
    return status


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cucore", description="cucore's Python module")
    sub = parser.add_subparsers(dest="command", required=True)
    doctor = sub.add_parser("doctor", help="what this machine offers cucore (components, devices, verdict)")
    doctor.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)
    if args.command == "doctor":
        return _doctor(args.json)
    return 2


if __name__ == "__main__":
    sys.exit(main())
