"""cucore.system (NVML, as cuda.core.system) and the doctor's one wording.

CPU tests run everywhere; where NVML is missing they check the error, where it
is present the values. GPU tests (the `gpu` fixture) compare against
nvidia-smi on the same machine, find this process in the compute-process list,
and watch utilization rise under a spinning kernel.
"""
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

import cucore
from cucore import system
from cucore.system import typing as st

from conftest import REQUIRE_GPU

HAS_NVML = cucore.pathfinder.find("nvml").found


# ---- names, shapes, exceptions (any machine) -------------------------------------------
def test_names_as_cuda_core_system():
    for name in (
        "get_num_devices",
        "get_user_mode_driver_version",
        "get_kernel_mode_driver_version",
        "get_nvml_version",
        "get_driver_branch",
        "get_process_name",
        "get_topology_common_ancestor",
        "get_p2p_status",
        "Device",
        "NvlinkInfo",
        "NvmlError",
        "NotSupportedError",
        "InvalidArgumentError",
        "NotFoundError",
        "TimeoutError",
        "LibraryNotFoundError",
        "CUDA_BINDINGS_NVML_IS_COMPATIBLE",
    ):
        assert name in system.__all__, name
        assert hasattr(system, name), name
    assert cucore.system is system
    assert "system" in cucore.__all__
    assert hasattr(cucore.Device, "to_system_device")
    import cucore.system.typing as typing_module  # a real submodule, as cuda.core.system.typing

    assert typing_module is st
    for prop in ("index", "uuid", "uuid_without_prefix", "pci_bus_id", "pci_info", "name", "brand", "serial",
                 "arch", "cuda_compute_capability", "numa_node_id", "module_id", "minor_number",
                 "is_persistence_mode_enabled", "memory_info", "bar1_memory_info", "utilization", "temperature",
                 "performance_state", "supported_pstates", "compute_running_processes", "mig", "num_fans",
                 "current_clock_event_reasons", "supported_clock_event_reasons"):
        assert isinstance(getattr(system.Device, prop), property), prop
    for method in ("get_clock", "get_fan", "get_nvlink", "get_nvlink_count", "get_nvlinks", "register_events",
                   "get_supported_event_types", "to_cuda_device", "get_device_count", "get_all_devices"):
        assert callable(getattr(system.Device, method)), method
    assert system.NvlinkInfo.max_links == 18


def test_exception_classes_follow_nvml_return_codes():
    from cucore.system import exceptions

    codes = {
        1: "UninitializedError", 2: "InvalidArgumentError", 3: "NotSupportedError", 4: "NoPermissionError",
        5: "AlreadyInitializedError", 6: "NotFoundError", 7: "InsufficientSizeError", 8: "InsufficientPowerError",
        9: "DriverNotLoadedError", 10: "TimeoutError", 11: "IrqIssueError", 12: "LibraryNotFoundError",
        13: "FunctionNotFoundError", 14: "CorruptedInforomError", 15: "GpuIsLostError", 16: "ResetRequiredError",
        17: "OperatingSystemError", 18: "LibRmVersionMismatchError", 19: "InUseError", 20: "MemoryError",
        21: "NoDataError", 22: "VgpuEccNotSupportedError", 23: "InsufficientResourcesError",
        24: "FreqNotSupportedError", 25: "ArgumentVersionMismatchError", 26: "DeprecatedError",
        27: "NotReadyError", 28: "GpuNotFoundError", 29: "InvalidStateError", 30: "ResetTypeNotSupportedError",
        999: "UnknownError",
    }
    for code, name in codes.items():
        cls = getattr(system, name)
        assert exceptions._exception_for_code(code) is cls
        assert issubclass(cls, system.NvmlError) and issubclass(cls, cucore.Error)
    assert exceptions._exception_for_code(4242) is system.NvmlError
    assert issubclass(system.LibraryNotFoundError, cucore.LibraryNotFoundError)
    assert issubclass(system.NvmlError, RuntimeError)


def test_enumerations_carry_cuda_cores_values():
    assert st.ClockType.SM == "sm" and st.ClockType("memory") is st.ClockType.MEMORY
    assert [e.value for e in st.GpuTopologyLevel] == ["internal", "single", "multiple", "hostbridge", "node", "system"]
    assert st.EventType.XID_CRITICAL_ERROR == "xid_critical_error"
    assert st.DeviceArch.KEPLER < st.DeviceArch.AMPERE < st.DeviceArch.HOPPER < st.DeviceArch.BLACKWELL
    assert int(st.DeviceArch.HOPPER) == 9


def test_device_arguments_are_checked_before_nvml_loads():
    with pytest.raises(ValueError, match="either a device"):
        system.Device()
    with pytest.raises(ValueError, match="only one of"):
        system.Device(0, uuid="GPU-x")
    with pytest.raises(ValueError, match="only one of"):
        system.Device(uuid="a", pci_bus_id="b")
    with pytest.raises(TypeError):
        system.Device("0")
    with pytest.raises(TypeError):
        system.Device(True)


def test_without_nvml_a_clear_error_or_with_it_the_devices():
    if not HAS_NVML:
        for call in (system.get_num_devices, lambda: system.Device(0), system.get_kernel_mode_driver_version):
            with pytest.raises(system.LibraryNotFoundError) as info:
                call()
            e = info.value
            assert isinstance(e, cucore.LibraryNotFoundError) and isinstance(e, system.NvmlError)
            assert e.component == "nvml"
            assert e.searched and all("libnvidia-ml.so.1" in s for s in e.searched)
            assert "NVIDIA driver" in str(e)
        return
    n = system.get_num_devices()
    assert n == system.Device.get_device_count() == len(system.Device.get_all_devices())
    assert [d.index for d in system.Device.get_all_devices()] == list(range(n))
    with pytest.raises(system.InvalidArgumentError, match=f"NVML reports {n} device"):
        system.Device(n)
    with pytest.raises(system.NotFoundError):
        system.Device(uuid="GPU-00000000-0000-0000-0000-000000000000")
    # NVML decides whether a malformed UUID is invalid or merely unknown (driver
    # 580 says NOT_FOUND); either way a typed error that names the UUID.
    with pytest.raises((system.InvalidArgumentError, system.NotFoundError), match="GPU-not-a-uuid"):
        system.Device(uuid="GPU-not-a-uuid")


def _run_module(*args):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(cucore.__file__)), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "cucore", *args], capture_output=True, text=True, env=env)


def _fresh_report():
    # The library's report from a fresh process, as `python -m cucore doctor`
    # sees the machine: this process may have loaded libraries (PyTorch loads
    # nvJitLink) that the report would rightly call "already loaded".
    code = ("import json, sys, cucore; r = cucore.pathfinder.doctor(); "
            "json.dump({'text': r.text(), 'json': r.json(), 'exit_status': r.exit_status, "
            "'nvml': r.nvml.available, 'verdict': r.verdict}, sys.stdout)")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(cucore.__file__)), env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_doctor_prints_the_librarys_report_as_is():
    # The CLI is held to the same report in tests/cpu/test_cli_doctor.cpp: one wording.
    report = _fresh_report()
    text = _run_module("doctor")
    assert text.stdout == report["text"], text.stderr
    assert text.returncode == report["exit_status"]
    js = _run_module("doctor", "--json")
    data = json.loads(js.stdout)
    assert js.stdout == report["json"]
    assert data["nvml"]["available"] == report["nvml"] == HAS_NVML
    assert data["verdict"] == report["verdict"] and report["text"].rstrip().endswith("verdict: " + report["verdict"])


# ---- against nvidia-smi (the GPU machine) ---------------------------------------------------
SMI_FIELDS = ["index", "name", "uuid", "pci.bus_id", "memory.total", "driver_version", "power.limit",
              "enforced.power.limit", "clocks.max.sm", "clocks.max.memory", "pstate", "fan.speed",
              "mig.mode.current", "temperature.gpu", "persistence_mode"]


def _nvidia_smi():
    exe = shutil.which("nvidia-smi")
    if exe is None:
        if REQUIRE_GPU:
            pytest.fail("nvidia-smi is not on PATH; the GPU machine has it")
        pytest.skip("no nvidia-smi to compare with")
    out = subprocess.run([exe, "--query-gpu=" + ",".join(SMI_FIELDS), "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.strip().splitlines():
        rows.append(dict(zip(SMI_FIELDS, (v.strip() for v in line.split(",")))))
    return rows


def _na(v):
    return v.startswith("[") or v in ("N/A", "")  # "[N/A]", "[Not Supported]"


@pytest.fixture
def smi_rows(gpu):
    return _nvidia_smi()


def test_values_match_nvidia_smi(smi_rows):
    assert len(smi_rows) == system.get_num_devices()
    for row in smi_rows:
        sd = system.Device(int(row["index"]))
        assert sd.name == row["name"]
        assert sd.uuid == row["uuid"]
        assert sd.pci_bus_id.lower() == row["pci.bus_id"].lower()
        mem = sd.memory_info
        assert abs(mem.total // (1 << 20) - int(row["memory.total"])) <= 1, (mem.total, row["memory.total"])
        assert mem.total == mem.used + mem.free + mem.reserved
        assert ".".join(str(v) for v in system.get_kernel_mode_driver_version()) == ".".join(
            str(int(p)) for p in row["driver_version"].split("."))
        for field, value in (("power.limit", sd.power_management_limit_mw),
                             ("enforced.power.limit", sd.enforced_power_limit_mw)):
            if _na(row[field]):
                assert value is None, field
            else:
                assert value is not None and abs(value / 1000 - float(row[field])) < 0.01, (field, value, row[field])
        for field, clock in (("clocks.max.sm", st.ClockType.SM), ("clocks.max.memory", st.ClockType.MEMORY)):
            value = sd.get_clock(clock).get_max_mhz()
            assert (value is None) if _na(row[field]) else value == int(row[field]), (field, value)
        if not _na(row["pstate"]):  # it may change between the two reads: a valid one is enough
            assert 0 <= sd.performance_state <= 15
        if _na(row["fan.speed"]):  # no fan (an H200): nothing to read, and no exception for it
            assert sd.num_fans in (None, 0) or sd.get_fan(0).speed is None
        else:
            assert sd.get_fan(0).speed is not None
        if _na(row["mig.mode.current"]):
            assert sd.mig.mode is None
        else:
            assert sd.mig.mode == (row["mig.mode.current"] == "Enabled")
        assert abs(sd.temperature.get_sensor() - int(row["temperature.gpu"])) <= 5
        if not _na(row["persistence_mode"]):
            assert sd.is_persistence_mode_enabled == (row["persistence_mode"] == "Enabled")


def test_every_value_is_a_value_or_none(gpu):
    sd = cucore.Device(0).to_system_device()
    checks = {
        "serial": str, "module_id": int, "minor_number": int, "numa_node_id": int, "performance_state": int,
        "supported_pstates": list, "num_fans": int, "power_usage_mw": int, "total_energy_consumption_mj": int,
        "bar1_memory_info": system.BAR1MemoryInfo, "encoder_utilization": system.EngineUtilization,
        "ecc_mode": tuple, "compute_running_processes": list, "current_clock_event_reasons": list,
    }
    for name, typ in checks.items():
        value = getattr(sd, name)
        assert value is None or isinstance(value, typ), (name, value)
    # Never vacuous: what every GPU reports is there.
    assert isinstance(sd.arch, st.DeviceArch) and sd.arch != st.DeviceArch.UNKNOWN
    assert sd.cuda_compute_capability == tuple(cucore.Device(0).compute_capability)
    assert sd.utilization is not None and 0 <= sd.utilization.gpu <= 100
    assert all(isinstance(r, st.ClocksEventReasons) for r in sd.current_clock_event_reasons or [])
    p = sd.pci_info
    assert p.vendor_id == 0x10DE and p.bus_id.lower().endswith(cucore.Device(0).pci_bus_id.lower()[4:])
    for link in sd.get_nvlinks():
        assert link.state in (True, False, None)
    if system.get_num_devices() >= 2:
        a, b = system.Device(0), system.Device(1)
        assert isinstance(system.get_topology_common_ancestor(a, b), st.GpuTopologyLevel)
        assert isinstance(system.get_p2p_status(a, b, "read"), st.GpuP2PStatus)
    assert "python" in system.get_process_name(os.getpid())
    assert system.get_driver_branch()
    nv = system.get_nvml_version()
    assert list(nv[1:]) == list(system.get_kernel_mode_driver_version())
    major, minor = system.get_user_mode_driver_version()
    assert cucore.pathfinder.find("driver").version.startswith(f"{major}.{minor}")


def test_to_system_device_and_back(gpu):
    for d in cucore.Device.get_all_devices():
        sd = d.to_system_device()
        assert isinstance(sd, system.Device)
        assert sd.uuid_without_prefix == d.uuid
        assert sd.to_cuda_device() is d  # cucore's per-thread singleton
        assert system.Device(uuid=d.uuid) == sd == system.Device(pci_bus_id=sd.pci_bus_id)


def test_example3_prints_what_nvidia_smi_reports(smi_rows):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(cucore.__file__)), env.get("PYTHONPATH", "")])
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python", "example3_nvml.py")
    r = subprocess.run([sys.executable, example], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"Devices: {len(smi_rows)}"
    d0 = next(row for row in smi_rows if system.Device(int(row["index"])).uuid == cucore.Device(0).to_system_device().uuid)
    assert lines[1].startswith(d0["name"] + ": GPU ")
    total_mb = int(lines[2].split("/")[1].split()[0])
    assert abs(total_mb - int(d0["memory.total"])) <= 1


def test_own_process_is_listed_with_its_memory(gpu):
    d = cucore.Device(0)
    d.set_current()
    s = d.create_stream()
    size = 256 << 20
    buf = cucore.DeviceMemoryResource(d).allocate(size, stream=s)
    buf.fill(1, stream=s)
    s.sync()
    sd = d.to_system_device()
    mine = None
    for _ in range(30):  # NVML's list can lag the allocation briefly
        procs = sd.compute_running_processes
        assert procs is not None, "NVML does not list processes on this GPU"
        mine = next((p for p in procs if p.pid == os.getpid()), None)
        if mine is not None and (mine.used_gpu_memory or 0) >= size:
            break
        time.sleep(0.1)
    assert mine is not None, [p.pid for p in procs]
    assert mine.used_gpu_memory is not None and mine.used_gpu_memory >= size, mine
    if not sd.mig.mode:  # outside MIG there are no instance ids: None, not a number
        assert mine.gpu_instance_id is None and mine.compute_instance_id is None
    buf.close()


SPIN_SRC = r"""
extern "C" __global__ void spin(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
}
"""


def test_utilization_rises_while_a_kernel_spins(gpu):
    import numpy as np

    d = cucore.Device(0)
    d.set_current()
    cc = d.compute_capability
    kernel = cucore.Program(SPIN_SRC, "c++", cucore.ProgramOptions(arch=f"sm_{cc.major}{cc.minor}")).compile(
        "cubin").get_kernel("spin")
    sd = d.to_system_device()
    s = d.create_stream()
    cucore.launch(s, cucore.LaunchConfig(grid=1, block=1), kernel, np.uint64(3_000_000_000))  # 3 s
    samples = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < 2.5:
        samples.append(sd.utilization.gpu)
        time.sleep(0.1)
    s.sync()
    assert max(samples) >= 50, samples


def test_xid_events_register_and_time_out(gpu):
    sd = cucore.Device(0).to_system_device()
    supported = sd.get_supported_event_types()
    if supported is not None and st.EventType.XID_CRITICAL_ERROR in supported:
        events = sd.register_events([st.EventType.XID_CRITICAL_ERROR])
        with pytest.raises(system.TimeoutError):
            events.wait(timeout_ms=300)
        events = sd.register_events("xid_critical_error")
        with pytest.raises(system.TimeoutError):
            events.wait(timeout_ms=100)
    else:
        with pytest.raises(system.NotSupportedError):
            sd.register_events([st.EventType.XID_CRITICAL_ERROR])
    with pytest.raises(TypeError):
        sd.register_events(0)
    with pytest.raises(ValueError, match="xid_critical_error"):
        sd.register_events(["xid"])
