"""cucore.system (NVML, as cuda.core.system) and the doctor's one wording.

CPU tests run everywhere; where NVML is missing they check the error, where it
is present the values; through a substituted NVML table (ctypes callbacks) they
check that what NVML declines raises NotSupportedError, as cuda.core.system. GPU tests (the `gpu` fixture) compare against
nvidia-smi on the same machine, find this process in the compute-process list,
and watch utilization rise under a spinning kernel.
"""
import gc
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


# ---- what NVML declines raises, as cuda.core.system (any machine: a substituted NVML table) ----
NVML_SUCCESS, NVML_INVALID_ARGUMENT, NVML_NOT_SUPPORTED, NVML_NOT_READY = 0, 2, 3, 27
FAKE_HANDLE = 0x5EED00


class FakeNvml:
    """NVML as ctypes callbacks, through cucore's test seam (the Python side of
    tests/cpu/test_system.cpp's substituted table): one Hopper GPU that answers
    its count, handle, name and architecture; `answers` adds entry points, each
    (arity, code) to return `code`, or a ctypes function. Entry points left out
    are absent (NVML_ERROR_FUNCTION_NOT_FOUND)."""

    def __init__(self, answers):
        import ctypes

        self._keep = []
        self._text = ctypes.create_string_buffer(b"fake: declined")
        text_at = ctypes.addressof(self._text)

        def fn(restype, argtypes, body):
            cb = ctypes.CFUNCTYPE(restype, *argtypes)(body)
            self._keep.append(cb)
            return ctypes.cast(cb, ctypes.c_void_p).value

        def put(ptr, ctype, value):
            ctypes.cast(ptr, ctypes.POINTER(ctype))[0] = value
            return NVML_SUCCESS

        P, U = ctypes.c_void_p, ctypes.c_uint
        entries = {
            "nvmlErrorString": fn(P, [ctypes.c_int], lambda code: text_at),
            "nvmlDeviceGetCount_v2": fn(ctypes.c_int, [P], lambda out: put(out, U, 1)),
            "nvmlDeviceGetHandleByIndex_v2": fn(ctypes.c_int, [U, P],
                                                lambda i, out: put(out, P, FAKE_HANDLE) if i == 0 else 2),
            "nvmlDeviceGetName": fn(ctypes.c_int, [P, P, U],
                                    lambda h, buf, n: ctypes.memmove(buf, b"Fake GPU\0", 9) and NVML_SUCCESS),
            "nvmlDeviceGetArchitecture": fn(ctypes.c_int, [P, P], lambda h, out: put(out, U, 9)),
        }
        for name, answer in answers.items():
            if isinstance(answer, tuple):
                arity, code = answer
                entries[name] = fn(ctypes.c_int, [P] * arity, lambda *args, code=code: code)
            else:
                self._keep.append(answer)
                entries[name] = ctypes.cast(answer, ctypes.c_void_p).value
        self.entries = entries

    @staticmethod
    def function(argtypes, body):
        """An entry point of `argtypes` (ctypes types) answering body(*args)."""
        import ctypes

        return ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)(body)


@pytest.fixture
def fake_nvml():
    """Installs a FakeNvml (fake_nvml(answers) -> system.Device(0)); the real NVML is back after the test."""
    from cucore._core._system import _set_nvml_table_for_testing

    fakes = []

    def install(answers):
        fakes.append(FakeNvml(answers))
        _set_nvml_table_for_testing(fakes[-1].entries)
        return system.Device(0)

    yield install
    _set_nvml_table_for_testing(None)


# (what, query, the NVML entry point it reaches, that entry point's arity)
DECLINED_QUERIES = [
    ("utilization", lambda d: d.utilization, "nvmlDeviceGetUtilizationRates", 2),
    ("memory_info", lambda d: d.memory_info, "nvmlDeviceGetMemoryInfo_v2", 2),
    ("bar1_memory_info", lambda d: d.bar1_memory_info, "nvmlDeviceGetBAR1MemoryInfo", 2),
    ("num_fans", lambda d: d.num_fans, "nvmlDeviceGetNumFans", 2),
    ("get_fan", lambda d: d.get_fan(0), "nvmlDeviceGetNumFans", 2),
    ("temperature", lambda d: d.temperature.get_sensor(), "nvmlDeviceGetTemperatureV", 2),
    ("performance_state", lambda d: d.performance_state, "nvmlDeviceGetPerformanceState", 2),
    ("serial", lambda d: d.serial, "nvmlDeviceGetSerial", 3),
    ("persistence mode", lambda d: d.is_persistence_mode_enabled, "nvmlDeviceGetPersistenceMode", 2),
    ("addressing_mode", lambda d: d.addressing_mode, "nvmlDeviceGetAddressingMode", 2),
    ("mig.mode", lambda d: d.mig.mode, "nvmlDeviceGetMigMode", 3),
    ("mig.device_count", lambda d: d.mig.device_count, "nvmlDeviceGetMaxMigDeviceCount", 2),
    ("mig.get_all_devices", lambda d: d.mig.get_all_devices(), "nvmlDeviceGetMaxMigDeviceCount", 2),
    ("mig.is_mig_device", lambda d: d.mig.is_mig_device, "nvmlDeviceIsMigDeviceHandle", 2),
    ("mig.get_device_by_index", lambda d: d.mig.get_device_by_index(0), "nvmlDeviceGetMigDeviceHandleByIndex", 3),
    ("pci_info", lambda d: d.pci_info, "nvmlDeviceGetPciInfoExt", 2),
    ("inforom.validate", lambda d: d.inforom.validate(), "nvmlDeviceValidateInforom", 1),
    ("inforom.image_version", lambda d: d.inforom.image_version, "nvmlDeviceGetInforomImageVersion", 3),
    ("max clock", lambda d: d.get_clock("sm").get_max_mhz(), "nvmlDeviceGetMaxClockInfo", 3),
    ("processes", lambda d: d.compute_running_processes, "nvmlDeviceGetComputeRunningProcesses_v3", 3),
    ("event types", lambda d: d.get_supported_event_types(), "nvmlDeviceGetSupportedEventTypes", 2),
    ("clock event reasons", lambda d: d.current_clock_event_reasons, "nvmlDeviceGetCurrentClocksEventReasons", 2),
    ("cpu affinity", lambda d: d.get_cpu_affinity(), "nvmlDeviceGetCpuAffinityWithinScope", 4),
    ("dynamic P-states", lambda d: d.dynamic_pstates_info, "nvmlDeviceGetDynamicPstatesInfo", 2),
    ("cooler", lambda d: d.cooler, "nvmlDeviceGetCoolerInfo", 2),
    ("power_usage_mw (cucore's)", lambda d: d.power_usage_mw, "nvmlDeviceGetPowerUsage", 2),
    ("ecc_mode (cucore's)", lambda d: d.ecc_mode, "nvmlDeviceGetEccMode", 3),
]


@pytest.mark.parametrize("what, query, entry, arity", DECLINED_QUERIES, ids=[q[0] for q in DECLINED_QUERIES])
def test_a_query_nvml_declines_raises_not_supported_error_naming_it(fake_nvml, what, query, entry, arity):
    sd = fake_nvml({entry: (arity, NVML_NOT_SUPPORTED)})
    assert sd.name == "Fake GPU"  # what the GPU supports still answers
    with pytest.raises(system.NotSupportedError, match=entry) as info:
        query(sd)
    e = info.value
    assert (e.code, e.name, e.call) == (NVML_NOT_SUPPORTED, "NVML_ERROR_NOT_SUPPORTED", entry)
    assert isinstance(e, system.NvmlError) and isinstance(e, cucore.Error)


def test_nvidias_unsupported_before_pattern_sees_the_exception(fake_nvml):
    # NVIDIA's tests wrap such queries in unsupported_before(device, arch): it
    # reads device._handle, skips when NotSupportedError comes from a GPU older
    # than `arch`, and lets it through otherwise. Its outcome needs the exception.
    import contextlib

    @contextlib.contextmanager
    def unsupported_before(device, arch):
        assert getattr(device, "_handle", device) == FAKE_HANDLE
        try:
            yield
        except system.NotSupportedError:
            if device.arch >= arch:
                raise
            pytest.skip(f"unsupported before {arch.name}")

    sd = fake_nvml({"nvmlDeviceGetNumFans": (2, NVML_NOT_SUPPORTED)})
    assert sd._handle == sd.handle == FAKE_HANDLE and type(sd._handle) is int
    assert sd.arch == st.DeviceArch.HOPPER
    outcomes = []
    for arch in (st.DeviceArch.BLACKWELL, st.DeviceArch.AMPERE):
        try:
            with unsupported_before(sd, arch):
                sd.num_fans
            outcomes.append("answered")
        except pytest.skip.Exception:
            outcomes.append("skipped")
        except system.NotSupportedError:
            outcomes.append("raised")
    assert outcomes == ["skipped", "raised"]


def test_fan_info_reads_and_sets_what_nvml_answers(fake_nvml):
    """FanInfo's queries and setters as cuda.core 1.2's (speed_rpm, target_speed,
    min_max_speed, control_policy, the speed setter, set_default_speed), each
    reaching its NVML entry point for its fan; random values, every one checked."""
    import ctypes
    import random

    rng = random.Random(7)
    fans = 3
    rpm = [rng.randint(500, 9000) for _ in range(fans)]
    target = [rng.randint(1, 100) for _ in range(fans)]
    policy = [rng.randint(0, 1) for _ in range(fans)]
    lo, hi = rng.randint(0, 30), rng.randint(60, 100)
    sets = []
    P, U = ctypes.c_void_p, ctypes.c_uint

    def uint_at(ptr, value, offset=0):
        ctypes.c_uint.from_address(ptr + offset).value = value
        return NVML_SUCCESS

    def rpm_body(h, info):  # nvmlFanSpeedInfo_v1_t {version, fan, speed}
        fan = ctypes.c_uint.from_address(info + 4).value
        return uint_at(info, rpm[fan], 8) if fan < fans else NVML_INVALID_ARGUMENT

    answers = {
        "nvmlDeviceGetNumFans": FakeNvml.function([P, P], lambda h, out: uint_at(out, fans)),
        "nvmlDeviceGetFanSpeedRPM": FakeNvml.function([P, P], rpm_body),
        "nvmlDeviceGetTargetFanSpeed": FakeNvml.function(
            [P, U, P], lambda h, f, out: uint_at(out, target[f]) if f < fans else NVML_INVALID_ARGUMENT),
        "nvmlDeviceGetMinMaxFanSpeed": FakeNvml.function(
            [P, P, P], lambda h, a, b: uint_at(a, lo) or uint_at(b, hi)),
        "nvmlDeviceGetFanControlPolicy_v2": FakeNvml.function(
            [P, U, P], lambda h, f, out: uint_at(out, policy[f]) if f < fans else NVML_INVALID_ARGUMENT),
        "nvmlDeviceSetFanSpeed_v2": FakeNvml.function([P, U, U], lambda h, f, v: sets.append((f, v)) or NVML_SUCCESS),
        "nvmlDeviceSetDefaultFanSpeed_v2": FakeNvml.function([P, U], lambda h, f: sets.append((f, None)) or NVML_SUCCESS),
        "nvmlDeviceGetBAR1MemoryInfo": FakeNvml.function(
            [P, P], lambda h, m: [ctypes.c_ulonglong.from_address(m + 8 * i).__setattr__("value", v)
                                  for i, v in enumerate((1 << 34, 1 << 33, 1 << 32))] and NVML_SUCCESS),
    }
    sd = fake_nvml(answers)
    expected_policy = {0: st.FanControlPolicy.TEMPERATURE_CONTROLLED, 1: st.FanControlPolicy.MANUAL}
    for f in range(fans):
        fan = sd.get_fan(f)
        assert fan.speed_rpm == rpm[f]
        assert fan.target_speed == target[f]
        assert fan.min_max_speed == (lo, hi)
        assert fan.control_policy is expected_policy[policy[f]]
    sd.get_fan(2).speed = target[0]
    sd.get_fan(1).set_default_speed()
    assert sets == [(2, target[0]), (1, None)]
    bar1 = sd.bar1_memory_info
    assert (bar1.total, bar1.free, bar1.used, bar1.reserved) == (1 << 34, 1 << 33, 1 << 32, (1 << 34) - (3 << 32))


def test_nvlink_count_field_nvml_declines_raises_as_cuda_core(fake_nvml):
    import ctypes

    def field_values(handle, n, values):
        # nvmlFieldValue_t is 40 bytes; nvmlReturn at offset 28.
        for i in range(n):
            ctypes.c_uint.from_address(values + 40 * i + 28).value = NVML_NOT_SUPPORTED
        return NVML_SUCCESS

    sd = fake_nvml({"nvmlDeviceGetFieldValues": FakeNvml.function(
        [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t], field_values)})
    for query in (sd.get_nvlink_count, sd.get_nvlinks, lambda: sd.get_nvlink(0)):
        with pytest.raises(system.NotSupportedError, match="NVML_FI_DEV_NVLINK_LINK_COUNT"):
            query()
    values = sd.get_field_values([st.FieldId.DEV_NVLINK_LINK_COUNT])
    with pytest.raises(system.NotSupportedError):
        values[0].value


def test_declined_and_unknown_answers_follow_cuda_core(fake_nvml):
    import ctypes

    def put_uint(value, offset=0):  # an entry point (device, out) writing `value` at out + offset
        def body(handle, out):
            ctypes.c_uint.from_address(out + offset).value = value
            return NVML_SUCCESS

        return FakeNvml.function([ctypes.c_void_p, ctypes.c_size_t], body)

    # Before the run's first flush NVML is NOT_READY: NotReadyError, as cuda.core.
    sd = fake_nvml({"nvmlDeviceGetLastBBXFlushTime": (3, NVML_NOT_READY)})
    with pytest.raises(system.NotReadyError, match="nvmlDeviceGetLastBBXFlushTime"):
        sd.inforom.bbx_flush_time
    # A device without PCI attributes of its own (INVALID_ARGUMENT, a MIG
    # device): cuda.core's RuntimeError, not an NVML class.
    sd = fake_nvml({"nvmlDeviceGetPciInfoExt": (2, NVML_INVALID_ARGUMENT)})
    with pytest.raises(RuntimeError, match="no PCI attributes") as info:
        sd.pci_info
    assert not isinstance(info.value, system.NvmlError)
    # An unknown P-state (NVML_PSTATE_UNKNOWN, 32) and no addressing mode
    # (NONE) are None, as in cuda.core; they answered.
    sd = fake_nvml({"nvmlDeviceGetPerformanceState": put_uint(32),
                    "nvmlDeviceGetAddressingMode": put_uint(0, offset=4)})  # nvmlDeviceAddressingMode_v1.value
    assert sd.performance_state is None
    assert sd.addressing_mode is None
    # No fans counted: get_fan is cuda.core's ValueError.
    sd = fake_nvml({"nvmlDeviceGetNumFans": put_uint(0)})
    assert sd.num_fans == 0
    with pytest.raises(ValueError, match="out of range"):
        sd.get_fan(0)
    # An entry point this NVML lacks is FunctionNotFoundError, also naming it.
    sd = fake_nvml({})
    with pytest.raises(system.FunctionNotFoundError, match="nvmlDeviceGetUtilizationRates"):
        sd.utilization


def test_a_process_outside_mig_has_no_instance_ids_as_cuda_core(fake_nvml):
    import ctypes

    class Proc(ctypes.Structure):  # nvmlProcessInfo_t
        _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                    ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]

    listed = [Proc(41, 2**64 - 1, 0xFFFFFFFF, 0xFFFFFFFF), Proc(42, 1 << 30, 1, 2)]

    def processes(handle, count, infos):
        n = ctypes.c_uint.from_address(count)
        if n.value < len(listed):
            n.value = len(listed)
            return 7  # NVML_ERROR_INSUFFICIENT_SIZE
        n.value = len(listed)
        for i, p in enumerate(listed):
            ctypes.memmove(infos + i * ctypes.sizeof(Proc), ctypes.addressof(p), ctypes.sizeof(Proc))
        return NVML_SUCCESS

    sd = fake_nvml({"nvmlDeviceGetComputeRunningProcesses_v3": FakeNvml.function(
        [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t], processes)})
    outside, inside = sd.compute_running_processes
    assert (outside.pid, inside.pid) == (41, 42)
    # Outside MIG, cuda.core raises NotSupportedError for the instance ids.
    with pytest.raises(system.NotSupportedError, match="gpu_instance_id"):
        outside.gpu_instance_id
    with pytest.raises(system.NotSupportedError, match="compute_instance_id"):
        outside.compute_instance_id
    assert (inside.gpu_instance_id, inside.compute_instance_id) == (1, 2)
    # NVML cannot tell the memory: None (cuda.core passes NVML_VALUE_NOT_AVAILABLE through).
    assert outside.used_gpu_memory is None and inside.used_gpu_memory == 1 << 30


def test_the_test_seam_refuses_names_cucore_does_not_call():
    from cucore._core._system import _set_nvml_table_for_testing

    with pytest.raises(ValueError, match="does not call"):
        _set_nvml_table_for_testing({"nvmlDeviceGetSomethingElse": 1})
    with pytest.raises(TypeError, match="dict"):
        _set_nvml_table_for_testing([1])
    _set_nvml_table_for_testing(None)


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


def _or_unsupported(query):
    """query()'s value, or None where the GPU does not support it (NotSupportedError, as cuda.core raises)."""
    try:
        return query()
    except system.NotSupportedError:
        return None


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
        for field, value in (("power.limit", _or_unsupported(lambda: sd.power_management_limit_mw)),
                             ("enforced.power.limit", _or_unsupported(lambda: sd.enforced_power_limit_mw))):
            if _na(row[field]):
                assert value is None, field
            else:
                assert value is not None and abs(value / 1000 - float(row[field])) < 0.01, (field, value, row[field])
        for field, clock in (("clocks.max.sm", st.ClockType.SM), ("clocks.max.memory", st.ClockType.MEMORY)):
            value = _or_unsupported(sd.get_clock(clock).get_max_mhz)
            assert (value is None) if _na(row[field]) else value == int(row[field]), (field, value)
        if not _na(row["pstate"]):  # it may change between the two reads: a valid one is enough
            assert 0 <= sd.performance_state <= 15
        if _na(row["fan.speed"]):  # no fan (an H200): NotSupportedError, or no fan to ask
            assert _or_unsupported(lambda: sd.num_fans) in (None, 0) or _or_unsupported(
                lambda: sd.get_fan(0).speed) is None
        else:
            assert isinstance(sd.get_fan(0).speed, int)
        if _na(row["mig.mode.current"]):
            with pytest.raises(system.NotSupportedError, match="nvmlDeviceGetMigMode"):
                sd.mig.mode
        else:
            assert sd.mig.mode == (row["mig.mode.current"] == "Enabled")
        assert abs(sd.temperature.get_sensor() - int(row["temperature.gpu"])) <= 5
        if not _na(row["persistence_mode"]):
            assert sd.is_persistence_mode_enabled == (row["persistence_mode"] == "Enabled")


def test_every_value_is_a_value_or_not_supported(gpu):
    sd = cucore.Device(0).to_system_device()
    checks = {
        "serial": str, "module_id": int, "minor_number": int, "numa_node_id": int, "performance_state": int,
        "supported_pstates": list, "num_fans": int, "power_usage_mw": int, "total_energy_consumption_mj": int,
        "bar1_memory_info": system.BAR1MemoryInfo, "encoder_utilization": system.EngineUtilization,
        "ecc_mode": tuple, "compute_running_processes": list, "current_clock_event_reasons": list,
    }
    for name, typ in checks.items():
        try:
            value = getattr(sd, name)
        except system.NotSupportedError as e:  # as cuda.core: never None for "not supported"
            assert e.code == 3 and e.call.startswith("nvml"), (name, e)
            continue
        assert isinstance(value, typ) or (name == "performance_state" and value is None), (name, value)
    # Never vacuous: what every GPU reports is there.
    assert isinstance(sd.arch, st.DeviceArch) and sd.arch != st.DeviceArch.UNKNOWN
    assert sd.cuda_compute_capability == tuple(cucore.Device(0).compute_capability)
    assert sd.utilization is not None and 0 <= sd.utilization.gpu <= 100
    assert all(isinstance(r, st.ClocksEventReasons) for r in _or_unsupported(lambda: sd.current_clock_event_reasons) or [])
    p = sd.pci_info
    assert p.vendor_id == 0x10DE and p.bus_id.lower().endswith(cucore.Device(0).pci_bus_id.lower()[4:])
    for link in _or_unsupported(sd.get_nvlinks) or []:
        assert _or_unsupported(lambda: link.state) in (True, False, None)
    # cuda.core's Device._handle: the NVML handle NVIDIA's tests hand to cuda.bindings.
    assert type(sd._handle) is int and sd._handle == sd.handle == system.Device(index=sd.index)._handle
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
    if not _or_unsupported(lambda: sd.mig.mode):  # outside MIG there are no instance ids: NotSupportedError, as cuda.core
        with pytest.raises(system.NotSupportedError, match="gpu_instance_id"):
            mine.gpu_instance_id
        with pytest.raises(system.NotSupportedError, match="compute_instance_id"):
            mine.compute_instance_id
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
    supported = _or_unsupported(sd.get_supported_event_types)
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


# ---- affinity, topology, field values, modes, InfoROM ------------------------------------------
def test_new_names_are_declared_as_cuda_core_declares_them():
    for prop in ("addressing_mode", "attributes", "inforom", "is_auto_boosted_clocks_enabled", "is_c2c_enabled",
                 "is_display_active", "is_display_connected", "repair_status"):
        assert isinstance(getattr(system.Device, prop), property), prop
    assert system.Device.is_persistence_mode_enabled.fset is not None  # a setter, as cuda.core has
    for method in ("get_cpu_affinity", "get_memory_affinity", "set_cpu_affinity", "clear_cpu_affinity",
                   "get_topology_nearest_gpus", "get_field_values", "clear_field_values"):
        assert callable(getattr(system.Device, method)), method
    assert callable(system.Device.get_all_devices_with_cpu_affinity)
    for cls in ("FieldValue", "FieldValues", "DeviceAttributes", "RepairStatus", "InforomInfo"):
        assert isinstance(getattr(system, cls), type), cls
    assert [e.value for e in st.AffinityScope] == ["node", "socket"]
    assert [e.value for e in st.AddressingMode] == ["hmm", "ats"]
    assert [e.value for e in st.InforomObject] == ["oem", "ecc", "power", "den"]


def test_new_queries_without_nvml_raise_the_typed_error():
    if not HAS_NVML:
        with pytest.raises(system.LibraryNotFoundError, match="libnvidia-ml.so.1"):
            system.Device.get_all_devices_with_cpu_affinity(0)
        return
    everyone = system.Device.get_all_devices()
    near = system.Device.get_all_devices_with_cpu_affinity(0)
    assert all(d in everyone for d in near)


def _sysfs_pci(sd):
    # sysfs spells the bus id with a 4-digit domain, lower case: 0000:3b:00.0.
    domain, rest = sd.pci_bus_id.lower().split(":", 1)
    return os.path.join("/sys/bus/pci/devices", f"{int(domain, 16):04x}:{rest}")


def _cpulist(text):
    cpus = []
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def test_cpu_affinity_is_the_kernels_local_cpus(gpu):
    sd = cucore.Device(0).to_system_device()
    cpus = sd.get_cpu_affinity()
    assert cpus is not None, "Linux GPUs report a CPU affinity"
    assert cpus == sorted(cpus) and cpus
    local = os.path.join(_sysfs_pci(sd), "local_cpulist")
    if os.path.exists(local):
        with open(local) as f:
            kernel = _cpulist(f.read())
        # NVML narrows to the device's NUMA node; the kernel's list is the same CPUs.
        assert set(cpus) == set(kernel), (cpus, kernel)
    socket = sd.get_cpu_affinity(st.AffinityScope.SOCKET)
    assert set(cpus) <= set(socket)
    assert sd.get_cpu_affinity("node") == cpus
    with pytest.raises(ValueError, match="affinity scope"):
        sd.get_cpu_affinity("rack")
    for cpu in cpus[:4]:
        assert sd in system.Device.get_all_devices_with_cpu_affinity(cpu)
    nodes = sd.get_memory_affinity()
    assert nodes is not None and nodes == sorted(nodes)
    numa_file = os.path.join(_sysfs_pci(sd), "numa_node")
    if os.path.exists(numa_file):
        with open(numa_file) as f:
            node = int(f.read())
        if node >= 0:
            assert node in nodes, (node, nodes)


def test_set_cpu_affinity_binds_this_thread_to_the_devices_cpus(gpu):
    sd = cucore.Device(0).to_system_device()
    before = os.sched_getaffinity(0)
    try:
        sd.set_cpu_affinity()
        bound = os.sched_getaffinity(0)
        assert bound <= set(sd.get_cpu_affinity(st.AffinityScope.SOCKET)), bound
        assert bound & set(sd.get_cpu_affinity())
        sd.clear_cpu_affinity()
        assert os.sched_getaffinity(0) >= bound
    finally:
        os.sched_setaffinity(0, before)


def test_nearest_gpus_are_within_the_level_asked(gpu):
    sd = system.Device(0)
    everyone = system.Device.get_all_devices()
    order = [e.value for e in st.GpuTopologyLevel]
    for level in st.GpuTopologyLevel:
        near = sd.get_topology_nearest_gpus(level)
        assert sd not in near
        for other in near:
            assert other in everyone
            got = system.get_topology_common_ancestor(sd, other)
            assert order.index(got.value) <= order.index(level.value), (level, got)
    if len(everyone) >= 2:
        assert set(sd.get_topology_nearest_gpus("system")) == set(everyone) - {sd}
    with pytest.raises(ValueError, match="topology level"):
        sd.get_topology_nearest_gpus("galaxy")


NVML_FI_DEV_NVLINK_LINK_COUNT = 91
NVML_FI_DEV_PCIE_REPLAY_COUNTER = 94


def test_field_values_agree_with_the_single_queries(gpu):
    sd = system.Device(0)
    values = sd.get_field_values([NVML_FI_DEV_NVLINK_LINK_COUNT, (NVML_FI_DEV_PCIE_REPLAY_COUNTER, 0), 100000])
    assert len(values) == 3
    assert [v.field_id for v in values] == [NVML_FI_DEV_NVLINK_LINK_COUNT, NVML_FI_DEV_PCIE_REPLAY_COUNTER, 100000]
    # Ids NVML names come back as FieldId members (cuda.core's FieldValue.field_id), others as ints.
    assert values[0].field_id is st.FieldId.DEV_NVLINK_LINK_COUNT
    assert values[1].field_id is st.FieldId.DEV_PCIE_REPLAY_COUNTER
    assert type(values[2].field_id) is int
    # FieldId members are accepted as the ints they are, alone or with a scope.
    by_enum = sd.get_field_values([st.FieldId.DEV_NVLINK_LINK_COUNT, (st.FieldId.DEV_PCIE_REPLAY_COUNTER, 0)])
    assert [v.field_id for v in by_enum] == [st.FieldId.DEV_NVLINK_LINK_COUNT, st.FieldId.DEV_PCIE_REPLAY_COUNTER]
    link_count = values[0]
    try:
        assert link_count.value == sd.get_nvlink_count()
    except system.NotSupportedError:
        with pytest.raises(system.NotSupportedError):  # NVML says no NVLink: the count raises too, as cuda.core
            sd.get_nvlink_count()
    replay = _or_unsupported(lambda: sd.pci_info.replay_counter)
    try:
        assert abs(values[1].value - replay) <= 1  # a counter: it may tick between the reads
        assert values[1].timestamp > 1_600_000_000 * 10**6  # microseconds since 1970
    except system.NotSupportedError:
        assert replay is None
    with pytest.raises(system.NvmlError):  # no field 100000: that value alone fails
        values[2].value
    with pytest.raises(system.NvmlError):
        values.validate()
    with pytest.raises(system.NvmlError):
        values.get_all_values()
    assert values[-1].field_id == 100000
    assert len(sd.get_field_values([])) == 0
    sd.clear_field_values([])
    with pytest.raises(TypeError, match="field_ids"):
        sd.get_field_values(91)


def _smi_one(field):
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    r = subprocess.run([exe, "-i", "0", "--query-gpu=" + field, "--format=csv,noheader,nounits"],
                       capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def test_modes_and_inforom_match_nvidia_smi(gpu):
    d = cucore.Device(0)
    sd = system.Device(0) if system.Device(0).uuid_without_prefix == d.uuid else d.to_system_device()
    props = d.properties
    mode = _or_unsupported(lambda: sd.addressing_mode)
    assert mode in (None, st.AddressingMode.HMM, st.AddressingMode.ATS)
    # CUDA's view of the same thing: pageable memory is device-accessible under
    # HMM and ATS, through the host's page tables under ATS alone.
    assert (mode is not None) == bool(props.pageable_memory_access), (mode, props.pageable_memory_access)
    assert (mode == st.AddressingMode.ATS) == bool(props.pageable_memory_access_uses_host_page_tables)
    assert _or_unsupported(lambda: sd.is_c2c_enabled) in (True, False, None)
    for name, field in (("is_display_connected", "display_mode"), ("is_display_active", "display_active")):
        value = _or_unsupported(lambda: getattr(sd, name))
        smi = _smi_one(field)
        if smi and not _na(smi) and value is not None:
            assert value == (smi in ("Enabled", "Connected")), (name, value, smi)
    boost = _or_unsupported(lambda: sd.is_auto_boosted_clocks_enabled)
    assert boost is None or (len(boost) == 2 and all(isinstance(b, bool) for b in boost))
    attrs = _or_unsupported(lambda: sd.attributes)
    if attrs is not None:
        assert attrs.multiprocessor_count == props.multiprocessor_count
        assert abs(attrs.memory_size_mb - sd.memory_info.total // (1 << 20)) <= 1024
    rs = _or_unsupported(lambda: sd.repair_status)
    assert rs is None or (isinstance(rs.tpc_repair_pending, bool) and isinstance(rs.channel_repair_pending, bool))
    inf = sd.inforom
    image = _or_unsupported(lambda: inf.image_version)
    smi_image = _smi_one("inforom.img")
    if image is not None and smi_image and not _na(smi_image):
        assert image == smi_image
    smi_ecc = _smi_one("inforom.ecc")
    ecc = _or_unsupported(lambda: inf.get_version(st.InforomObject.ECC))
    if ecc is not None and smi_ecc and not _na(smi_ecc):
        assert ecc == smi_ecc
    with pytest.raises(ValueError, match="InfoROM object"):
        inf.get_version("bios")
    checksum = _or_unsupported(lambda: inf.configuration_checksum)
    assert checksum is None or isinstance(checksum, int)
    if image is not None:
        inf.validate()  # a healthy board: no CorruptedInforomError
    try:  # NotReadyError before the first flush of this run, as cuda.core's own test expects
        bbx = inf.bbx_flush_time
        assert len(bbx) == 2 and bbx[0] > 0
    except (system.NotSupportedError, system.NotReadyError):
        pass
    part = _or_unsupported(lambda: inf.board_part_number)
    assert part is None or part.strip()


def test_persistence_mode_setter_writes_nvmls_state(gpu):
    sd = system.Device(0)
    current = sd.is_persistence_mode_enabled
    assert current is not None, "Linux GPUs report their persistence mode"
    try:
        sd.is_persistence_mode_enabled = current  # the value it has: no change to the machine
    except system.NoPermissionError:
        assert os.geteuid() != 0, "root may set persistence mode"
        return
    assert sd.is_persistence_mode_enabled == current


def test_pstates_cooler_and_thermal_sensors(gpu):
    sd = system.Device(0)
    info = _or_unsupported(lambda: sd.dynamic_pstates_info)
    if info is not None:
        assert len(info) == 8
        for u in (info[i] for i in range(len(info))):
            assert isinstance(u.is_present, bool)
            if u.is_present:
                assert 0 <= u.percentage <= 100
        assert info[-1].is_present == info[7].is_present
        with pytest.raises(IndexError):
            info[8]
    cooler = _or_unsupported(lambda: sd.cooler)
    if cooler is not None:
        assert cooler.signal_type in (None, st.CoolerControl.TOGGLE, st.CoolerControl.VARIABLE)
        assert all(isinstance(t, st.CoolerTarget) for t in cooler.target)
    elif not _or_unsupported(lambda: sd.num_fans):
        pass  # a passively cooled board (an H200) has no cooler to describe
    settings = _or_unsupported(lambda: sd.temperature.get_thermal_settings(st.ThermalTarget.ALL))
    if settings is not None:
        assert len(settings) <= 3
        gpu_temp = _or_unsupported(sd.temperature.get_sensor)
        for i in range(len(settings)):
            sensor = settings[i]
            assert isinstance(sensor.controller, st.ThermalController)
            assert isinstance(sensor.target, st.ThermalTarget)
            if sensor.target == st.ThermalTarget.GPU and gpu_temp is not None:
                assert abs(sensor.current_temp - gpu_temp) <= 5, (sensor.current_temp, gpu_temp)
    with pytest.raises(ValueError, match="thermal sensor index"):
        sd.temperature.get_thermal_settings("toaster")


# ---- system events, clock offsets, field ids, exception names ----------------------------------
# cuda.core.system's exception names (cuda.core 1.2.2's exceptions.__all__).
CUDA_CORE_EXCEPTIONS = (
    "AlreadyInitializedError ArgumentVersionMismatchError CorruptedInforomError DeprecatedError DriverNotLoadedError "
    "FreqNotSupportedError FunctionNotFoundError GpuIsLostError GpuNotFoundError InUseError InsufficientPowerError "
    "InsufficientResourcesError InsufficientSizeError InvalidArgumentError InvalidStateError IrqIssueError "
    "LibRmVersionMismatchError LibraryNotFoundError MemoryError NoDataError NoPermissionError NotFoundError "
    "NotReadyError NotSupportedError NvmlError OperatingSystemError ResetRequiredError ResetTypeNotSupportedError "
    "TimeoutError UninitializedError UnknownError VgpuEccNotSupportedError"
).split()


def test_every_cuda_core_exception_class_is_there_under_its_name():
    import builtins

    from cucore.system import exceptions

    assert sorted(exceptions.__all__) == sorted(CUDA_CORE_EXCEPTIONS)
    for name in CUDA_CORE_EXCEPTIONS:
        cls = getattr(system, name)
        assert cls is getattr(exceptions, name) and name in system.__all__, name
        assert issubclass(cls, system.NvmlError) or cls is system.NvmlError, name
    # The two exported under a builtin's name are cuda.bindings' Nvml* classes,
    # never the builtins (an NVML timeout is not an OSError).
    assert system.TimeoutError.__name__ == "NvmlTimeoutError"
    assert system.MemoryError.__name__ == "NvmlMemoryError"
    assert system.TimeoutError is not builtins.TimeoutError and not issubclass(system.TimeoutError, OSError)
    assert system.MemoryError is not builtins.MemoryError
    assert system.NotSupportedError.__name__ == "NotSupportedError"


def test_system_events_clock_offsets_and_field_ids_are_declared_as_cuda_core():
    assert "register_events" in system.__all__ and callable(system.register_events)
    for cls in ("RegisteredSystemEvents", "SystemEvent", "SystemEvents", "ClockOffsets"):
        assert isinstance(getattr(system, cls), type), cls
    assert callable(system.RegisteredSystemEvents.wait)
    for prop in ("event_type", "gpu_id", "device"):
        assert isinstance(getattr(system.SystemEvent, prop), property), prop
    for prop in ("clock_offset_mhz", "max_offset_mhz", "min_offset_mhz"):
        assert isinstance(getattr(system.ClockOffsets, prop), property), prop
    for method in ("get_offsets", "get_min_max_clock_of_pstate_mhz"):
        assert callable(getattr(system.ClockInfo, method)), method
    for name in ("FieldId", "SystemEventType", "FanControlPolicy"):
        assert name in st.__all__, name
    assert [e.value for e in st.SystemEventType] == ["unbind", "bind"]
    assert [e.value for e in st.FanControlPolicy] == ["temperature_controlled", "manual"]


def test_field_id_is_nvmls_numbers_by_cuda_cores_names():
    import enum

    F = st.FieldId
    assert issubclass(F, enum.IntEnum)
    assert len(F) == 293 and len(F.__members__) == 295  # two ids have a second name
    assert F.DEV_ECC_CURRENT == 1 and F(1) is F.DEV_ECC_CURRENT
    assert F(91) is F.DEV_NVLINK_LINK_COUNT
    assert F.DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP is F.DEV_PERF_POLICY_POWER  # nvml.h's alias
    assert F(74).name == "DEV_PERF_POLICY_POWER"
    assert F.DEV_PENDING_BANK_REMAPPING == 307  # the newest ids too
    assert isinstance(F.DEV_ECC_CURRENT, int)
    with pytest.raises(ValueError):
        F(100000)
    assert F.__module__ == "cucore.system.typing"


def test_system_register_events_checks_its_argument_before_nvml():
    with pytest.raises(TypeError, match="SystemEventType"):
        system.register_events(1)
    with pytest.raises(ValueError, match="unbind, bind"):
        system.register_events(["xid_critical_error"])  # a device event, not a system one
    with pytest.raises(ValueError, match="unbind, bind"):
        system.register_events("unbound")
    if not HAS_NVML:
        with pytest.raises(system.LibraryNotFoundError, match="libnvidia-ml.so.1"):
            system.register_events([st.SystemEventType.UNBIND, "bind"])


def test_system_events_register_and_time_out(gpu):
    try:
        events = system.register_events([st.SystemEventType.UNBIND, "bind"])
    except (system.NotSupportedError, system.NoPermissionError, system.FunctionNotFoundError) as e:
        pytest.skip(f"this driver records no system events for this process: {e}")
    assert isinstance(events, system.RegisteredSystemEvents)
    t0 = time.monotonic()
    with pytest.raises(system.TimeoutError):  # no GPU is bound or unbound during the test
        events.wait(timeout_ms=300, buffer_size=4)
    assert time.monotonic() - t0 >= 0.25
    with pytest.raises(ValueError, match="buffer_size"):
        events.wait(timeout_ms=1, buffer_size=0)
    # NVML (driver 580) answers a second registration in the same process with
    # NVML_ERROR_UNKNOWN, even after the first set is freed: one per test
    # process, and the set's free is checked against a substituted table
    # (SystemFake in tests/cpu/test_system.cpp).
    del events


def test_clock_offsets_and_pstate_clocks(gpu):
    sd = cucore.Device(0).to_system_device()
    p = _or_unsupported(lambda: sd.performance_state)
    if p is None:
        pytest.skip("this GPU reports no P-state")
    for clock_type in (st.ClockType.GRAPHICS, st.ClockType.SM, st.ClockType.MEMORY):
        c = sd.get_clock(clock_type)
        mm = _or_unsupported(lambda: c.get_min_max_clock_of_pstate_mhz(p))
        if mm is not None:
            lo, hi = mm
            assert type(lo) is int and 0 < hi and lo <= hi
        # NVML keeps offsets for the graphics and memory domains only (the SM
        # clock follows the graphics one): its Invalid Argument for SM is the driver's word.
        if clock_type == st.ClockType.SM:
            continue
        o = _or_unsupported(lambda: c.get_offsets(p))
        if o is not None:  # NotSupportedError on many boards
            assert isinstance(o, system.ClockOffsets)
            assert o.min_offset_mhz <= o.clock_offset_mhz <= o.max_offset_mhz
        for bad in (-1, 16, 2**70):
            with pytest.raises(ValueError, match="Invalid P-state"):
                c.get_offsets(bad)
            with pytest.raises(ValueError, match="Invalid P-state"):
                c.get_min_max_clock_of_pstate_mhz(bad)
        with pytest.raises(TypeError, match="pstate"):
            c.get_offsets("0")
