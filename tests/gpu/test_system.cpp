// cucore::system on the GPU machine: values against nvidia-smi run from the
// test, this process in the compute-process list with the memory it holds, GPU
// utilization rising under a spinning kernel, the CUDA <-> NVML device mapping,
// XID events, and every NVML type, constant and signature cucore declares
// (src/loader/nvml_types.hpp) against the real nvml.h.
#if __has_include(<nvml.h>)
#include <nvml.h>
#define CUCORE_TEST_HAVE_NVML_H 1
#endif

#include <cucore/buffer.hpp>
#include <cucore/device.hpp>
#include <cucore/launch.hpp>
#include <cucore/memory.hpp>
#include <cucore/program.hpp>
#include <cucore/stream.hpp>
#include <cucore/system.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "common/gpu.hpp"
#include "common/run_command.hpp"
#include "loader/toolkit.hpp"

namespace {

namespace sys = cucore::system;

std::string trim(std::string s) {
  s.erase(0, s.find_first_not_of(" \t"));
  s.erase(s.find_last_not_of(" \t\r") + 1);
  return s;
}

// nvidia-smi's view of each GPU: field -> value, one map per GPU in its order.
std::vector<std::vector<std::string>> nvidia_smi(const std::vector<std::string>& fields) {
  std::string q;
  for (const auto& f : fields) q += (q.empty() ? "" : ",") + f;
  auto smi = cucore::test::run_command("nvidia-smi --query-gpu=" + q + " --format=csv,noheader,nounits 2>&1");
  std::vector<std::vector<std::string>> rows;
  if (smi.status != 0) {
    ADD_FAILURE() << "nvidia-smi failed (" << smi.status << "): " << smi.out;
    return rows;
  }
  std::istringstream lines(smi.out);
  std::string line;
  while (std::getline(lines, line)) {
    std::vector<std::string> row;
    std::istringstream cells(line);
    std::string cell;
    while (std::getline(cells, cell, ',')) row.push_back(trim(cell));
    EXPECT_EQ(row.size(), fields.size()) << line;
    rows.push_back(row);
  }
  return rows;
}

bool not_available(const std::string& v) { return v.empty() || v[0] == '[' || v == "N/A"; }

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

TEST(SystemGpu, ValuesMatchNvidiaSmi) {
  CUCORE_REQUIRE_GPU();
  const std::vector<std::string> fields = {"index", "name", "memory.total", "driver_version", "power.limit",
                                           "pci.bus_id", "uuid"};
  auto rows = nvidia_smi(fields);
  ASSERT_EQ(rows.size(), static_cast<size_t>(sys::get_num_devices()));
  for (const auto& row : rows) {
    if (row.size() != fields.size()) continue;
    SCOPED_TRACE(row[1]);
    sys::Device d(static_cast<unsigned>(std::stoul(row[0])));
    EXPECT_EQ(d.index(), std::stoul(row[0]));
    EXPECT_EQ(d.name(), row[1]);
    auto mem = d.memory_info();
    ASSERT_TRUE(mem);
    EXPECT_LE(std::llabs(static_cast<long long>(mem->total >> 20) - std::stoll(row[2])), 1) << mem->total;
    EXPECT_EQ(mem->total, mem->used + mem->free + mem->reserved);
    EXPECT_EQ(sys::driver_version(), row[3]);
    auto kmd = sys::get_kernel_mode_driver_version();
    ASSERT_GE(kmd.size(), 2u);
    EXPECT_EQ(kmd[0], std::stoi(row[3]));
    auto limit = d.power_management_limit_mw();
    if (not_available(row[4])) {
      EXPECT_FALSE(limit) << *limit;  // nvidia-smi has none: neither has cucore
    } else {
      ASSERT_TRUE(limit);
      EXPECT_NEAR(*limit / 1000.0, std::stod(row[4]), 0.01);
    }
    EXPECT_EQ(lower(d.pci_bus_id()), lower(row[5]));
    EXPECT_EQ(d.uuid(), row[6]);
  }
}

TEST(SystemGpu, ToSystemDeviceAndBack) {
  CUCORE_REQUIRE_GPU();
  for (const cucore::Device& cd : cucore::Device::all()) {
    sys::Device sd = cd.to_system_device();
    EXPECT_EQ(sd.uuid(), cd.uuid_string());
    EXPECT_EQ(sd.to_cuda_device(), cd);
    // CUDA's bus id has a 4-digit domain, NVML's 8.
    EXPECT_EQ(lower(sd.pci_bus_id().substr(4)), lower(cd.pci_bus_id()));
    EXPECT_EQ(sd.cuda_compute_capability(), cd.compute_capability());
    EXPECT_EQ(sys::Device::from_uuid(cd.uuid_string().substr(4)), sd);  // CUDA's form, without "GPU-"
    EXPECT_EQ(sys::Device::from_pci_bus_id(sd.pci_bus_id()), sd);
  }
  EXPECT_THROW(sys::Device(static_cast<unsigned>(sys::get_num_devices())), std::out_of_range);
  EXPECT_THROW(sys::Device::from_uuid("GPU-00000000-0000-0000-0000-000000000000"), std::out_of_range);
}

TEST(SystemGpu, OwnProcessIsListedWithTheMemoryItHolds) {
  CUCORE_REQUIRE_GPU();
  cucore::Device dev(0);
  dev.set_current();
  cucore::Stream s = dev.create_stream();
  const std::size_t size = std::size_t(256) << 20;
  cucore::Buffer b = dev.memory_resource().allocate(size, s);
  b.fill(std::uint8_t{0x5a}, s);
  s.sync();
  sys::Device sd = dev.to_system_device();
  std::optional<sys::ProcessInfo> mine;
  std::vector<unsigned> seen;
  for (int attempt = 0; attempt < 30; ++attempt) {  // NVML's list can lag an allocation briefly
    auto procs = sd.compute_running_processes();
    ASSERT_TRUE(procs) << "NVML does not list processes on this GPU";
    seen.clear();
    mine.reset();
    for (const auto& p : *procs) {
      seen.push_back(p.pid);
      if (p.pid == static_cast<unsigned>(getpid())) mine = p;
    }
    if (mine && mine->used_gpu_memory.value_or(0) >= size) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(mine) << "pid " << getpid() << " not among " << ::testing::PrintToString(seen);
  ASSERT_TRUE(mine->used_gpu_memory) << "NVML reports no memory figure for this process";
  EXPECT_GE(*mine->used_gpu_memory, size);
  std::string name = sys::get_process_name(static_cast<unsigned>(getpid()));
  EXPECT_NE(name.find("cucore_gpu_test"), std::string::npos) << name;  // comm is cut at 15 characters
}

// Spins until `ns` nanoseconds of the GPU's global timer have passed.
constexpr const char* kSpin = R"(
extern "C" __global__ void spin(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
}
)";

TEST(SystemGpu, UtilizationRisesWhileAKernelSpins) {
  CUCORE_REQUIRE_GPU();
  cucore::Device dev(0);
  dev.set_current();
  cucore::ObjectCode code = cucore::Program(kSpin, "c++", {.arch = "sm_" + dev.arch()}).compile(cucore::CodeType::cubin);
  cucore::Kernel spin = code.get_kernel("spin");
  cucore::Stream s = dev.create_stream();
  sys::Device sd = dev.to_system_device();
  cucore::launch(s, {.grid = 1, .block = 1}, spin, static_cast<unsigned long long>(3'000'000'000ULL));  // 3 s
  std::vector<unsigned> samples;
  auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(2500)) {
    auto u = sd.utilization();
    ASSERT_TRUE(u) << "utilization is NOT_SUPPORTED on this GPU";
    samples.push_back(u->gpu);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  s.sync();
  EXPECT_GE(*std::max_element(samples.begin(), samples.end()), 50u) << ::testing::PrintToString(samples);
}

TEST(SystemGpu, SampleMatchesTheSingleQueries) {
  CUCORE_REQUIRE_GPU();
  sys::Sample s = sys::sample();
  EXPECT_EQ(s.driver_version, sys::driver_version());
  ASSERT_EQ(s.devices.size(), static_cast<size_t>(sys::get_num_devices()));
  for (const auto& ds : s.devices) {
    sys::Device d(ds.index);
    EXPECT_TRUE(ds.errors.empty()) << ::testing::PrintToString(ds.errors);
    EXPECT_EQ(ds.name, d.name());
    EXPECT_EQ(ds.uuid, d.uuid());
    ASSERT_TRUE(ds.memory);
    EXPECT_EQ(ds.memory->total, d.memory_info()->total);
    EXPECT_EQ(ds.max_sm_clock_mhz, d.get_clock(sys::ClockType::sm).get_max_mhz());
    EXPECT_EQ(ds.power_limit_mw, d.power_management_limit_mw());
    ASSERT_TRUE(ds.temperature_c);
    EXPECT_GT(*ds.temperature_c, 0u);
  }
}

TEST(SystemGpu, XidEventsRegisterAndTimeOut) {
  CUCORE_REQUIRE_GPU();
  sys::Device sd = cucore::Device(0).to_system_device();
  auto supported = sd.supported_event_types();
  if (supported && (*supported & sys::event_types::xid_critical_error)) {
    sys::DeviceEvents ev = sd.register_events(sys::event_types::xid_critical_error);
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_FALSE(ev.wait(300));  // nothing happens: a timeout after about the time asked
    EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(250));
  } else {
    try {
      (void)sd.register_events(sys::event_types::xid_critical_error);
      ADD_FAILURE() << "registered an event type the device does not report";
    } catch (const cucore::NvmlError& e) {
      EXPECT_EQ(e.code(), cucore::detail::nvml::ERROR_NOT_SUPPORTED) << e.what();
    }
  }
}

TEST(SystemGpu, ClockOffsetsAndPstateClocksOfTheCurrentPstate) {
  CUCORE_REQUIRE_GPU();
  sys::Device sd = cucore::Device(0).to_system_device();
  auto p = sd.performance_state();
  if (!p) GTEST_SKIP() << "this GPU reports no P-state";
  for (auto type : {sys::ClockType::graphics, sys::ClockType::sm, sys::ClockType::memory}) {
    sys::ClockInfo c = sd.get_clock(type);
    if (auto mm = c.get_min_max_clock_of_pstate_mhz(*p)) {
      EXPECT_LE(mm->first, mm->second);
      EXPECT_GT(mm->second, 0u);
      if (auto max = c.get_max_mhz()) {
        EXPECT_LE(mm->second, *max + 1);
      }
    }
    // NVML keeps offsets for the graphics and memory domains only: SM's is Invalid Argument.
    if (type == sys::ClockType::sm) continue;
    if (auto o = c.get_offsets(*p)) {  // NOT_SUPPORTED on many boards (an H200's memory clock)
      EXPECT_LE(o->min_offset_mhz, o->clock_offset_mhz);
      EXPECT_LE(o->clock_offset_mhz, o->max_offset_mhz);
    }
  }
}

TEST(SystemGpu, SystemEventsRegisterAndTimeOut) {
  CUCORE_REQUIRE_GPU();
  try {
    sys::RegisteredSystemEvents ev = sys::register_events(sys::system_event_types::gpu_driver_unbind |
                                                          sys::system_event_types::gpu_driver_bind);
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_FALSE(ev.wait(300));  // no GPU is bound or unbound during the test
    EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(250));
  } catch (const cucore::NvmlError& e) {
    // An older driver, or one without system events: the action is refused with NVML's code.
    EXPECT_TRUE(e.code() == cucore::detail::nvml::ERROR_NOT_SUPPORTED ||
                e.code() == cucore::detail::nvml::ERROR_FUNCTION_NOT_FOUND ||
                e.code() == cucore::detail::nvml::ERROR_NO_PERMISSION)
        << e.what();
  }
}

// ---- the declared ABI against nvml.h ------------------------------------------------------

#ifdef CUCORE_TEST_HAVE_NVML_H
template <typename T, typename = void>
struct is_complete : std::false_type {};
template <typename T>
struct is_complete<T, std::void_t<decltype(sizeof(T))>> : std::true_type {};

// Same ABI for one parameter: both pointers (to same-sized objects, when
// complete) or both same-sized values of the same kind.
template <typename A, typename B>
constexpr bool same_param() {
  if constexpr (std::is_pointer_v<A> != std::is_pointer_v<B>) {
    return false;
  } else if constexpr (std::is_pointer_v<A>) {
    using PA = std::remove_cv_t<std::remove_pointer_t<A>>;
    using PB = std::remove_cv_t<std::remove_pointer_t<B>>;
    if constexpr (is_complete<PA>::value && is_complete<PB>::value) return sizeof(PA) == sizeof(PB);
    else return is_complete<PA>::value == is_complete<PB>::value;
  } else {
    return sizeof(A) == sizeof(B) && std::is_floating_point_v<A> == std::is_floating_point_v<B>;
  }
}

template <typename A, typename B>
struct same_shape : std::false_type {};
template <typename RA, typename... A, typename RB, typename... B>
struct same_shape<RA (*)(A...), RB (*)(B...)> {
  static constexpr bool value = [] {
    if constexpr (sizeof...(A) != sizeof...(B)) return false;
    else return sizeof(RA) == sizeof(RB) && (same_param<A, B>() && ...);
  }();
};
#endif

#ifndef CUCORE_TEST_HAVE_NVML_H
// Where an nvml.h might be on this machine (for the failure message).
std::string nvml_h_candidates() {
  std::vector<std::filesystem::path> dirs = {"/usr/local/cuda/include", "/usr/include"};
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* v = std::getenv(var); v && std::filesystem::path(v) / "include" != dirs[0])
      dirs.emplace_back(std::filesystem::path(v) / "include");
  std::string found;
  std::error_code ec;
  for (const auto& d : dirs)
    found += "\n  " + (d / "nvml.h").string() + (std::filesystem::exists(d / "nvml.h", ec) ? " - EXISTS" : " - absent");
  return found;
}
#endif

TEST(SystemAbi, DeclaredTypesMatchNvmlH) {
#ifndef CUCORE_TEST_HAVE_NVML_H
  std::string msg = "nvml.h was not on the include path when this test was built:" + nvml_h_candidates() +
                    "\n(install the toolkit's NVML headers (cuda-nvml-dev) or the nvidia-nvml-dev wheel, or configure with "
                    "-DCUCORE_NVML_INCLUDE_DIR=..., and rebuild)";
  if (cucore::test::gpu_required_by_environment()) FAIL() << msg;
  GTEST_SKIP() << msg;
#else
  namespace nvml = cucore::detail::nvml;
#define CUCORE_SAME_SIZE(ours, theirs)        \
  EXPECT_EQ(sizeof(nvml::ours), sizeof(theirs)) << #ours; \
  EXPECT_EQ(alignof(nvml::ours), alignof(theirs)) << #ours
#define CUCORE_SAME_FIELD(ours, theirs, field)                                        \
  EXPECT_EQ(offsetof(nvml::ours, field), offsetof(theirs, field)) << #ours "." #field; \
  EXPECT_EQ(sizeof(nvml::ours::field), sizeof(theirs::field)) << #ours "." #field
  CUCORE_SAME_SIZE(Memory_v2, nvmlMemory_v2_t);
  CUCORE_SAME_FIELD(Memory_v2, nvmlMemory_v2_t, version);
  CUCORE_SAME_FIELD(Memory_v2, nvmlMemory_v2_t, total);
  CUCORE_SAME_FIELD(Memory_v2, nvmlMemory_v2_t, reserved);
  CUCORE_SAME_FIELD(Memory_v2, nvmlMemory_v2_t, free);
  CUCORE_SAME_FIELD(Memory_v2, nvmlMemory_v2_t, used);
  EXPECT_EQ(nvml::kMemory_v2, nvmlMemory_v2);
  CUCORE_SAME_SIZE(BAR1Memory, nvmlBAR1Memory_t);
  CUCORE_SAME_FIELD(BAR1Memory, nvmlBAR1Memory_t, bar1Total);
  CUCORE_SAME_FIELD(BAR1Memory, nvmlBAR1Memory_t, bar1Free);
  CUCORE_SAME_FIELD(BAR1Memory, nvmlBAR1Memory_t, bar1Used);
  CUCORE_SAME_SIZE(Utilization, nvmlUtilization_t);
  CUCORE_SAME_FIELD(Utilization, nvmlUtilization_t, gpu);
  CUCORE_SAME_FIELD(Utilization, nvmlUtilization_t, memory);
  CUCORE_SAME_SIZE(ProcessInfo, nvmlProcessInfo_t);
  CUCORE_SAME_FIELD(ProcessInfo, nvmlProcessInfo_t, pid);
  CUCORE_SAME_FIELD(ProcessInfo, nvmlProcessInfo_t, usedGpuMemory);
  CUCORE_SAME_FIELD(ProcessInfo, nvmlProcessInfo_t, gpuInstanceId);
  CUCORE_SAME_FIELD(ProcessInfo, nvmlProcessInfo_t, computeInstanceId);
  CUCORE_SAME_SIZE(PciInfo, nvmlPciInfo_t);
  CUCORE_SAME_FIELD(PciInfo, nvmlPciInfo_t, busIdLegacy);
  CUCORE_SAME_FIELD(PciInfo, nvmlPciInfo_t, domain);
  CUCORE_SAME_FIELD(PciInfo, nvmlPciInfo_t, bus);
  CUCORE_SAME_FIELD(PciInfo, nvmlPciInfo_t, device);
  CUCORE_SAME_FIELD(PciInfo, nvmlPciInfo_t, pciDeviceId);
  CUCORE_SAME_FIELD(PciInfo, nvmlPciInfo_t, pciSubSystemId);
  CUCORE_SAME_FIELD(PciInfo, nvmlPciInfo_t, busId);
  CUCORE_SAME_SIZE(PciInfoExt_v1, nvmlPciInfoExt_v1_t);
  CUCORE_SAME_FIELD(PciInfoExt_v1, nvmlPciInfoExt_v1_t, version);
  CUCORE_SAME_FIELD(PciInfoExt_v1, nvmlPciInfoExt_v1_t, domain);
  CUCORE_SAME_FIELD(PciInfoExt_v1, nvmlPciInfoExt_v1_t, bus);
  CUCORE_SAME_FIELD(PciInfoExt_v1, nvmlPciInfoExt_v1_t, device);
  CUCORE_SAME_FIELD(PciInfoExt_v1, nvmlPciInfoExt_v1_t, pciDeviceId);
  CUCORE_SAME_FIELD(PciInfoExt_v1, nvmlPciInfoExt_v1_t, pciSubSystemId);
  CUCORE_SAME_FIELD(PciInfoExt_v1, nvmlPciInfoExt_v1_t, baseClass);
  CUCORE_SAME_FIELD(PciInfoExt_v1, nvmlPciInfoExt_v1_t, subClass);
  CUCORE_SAME_FIELD(PciInfoExt_v1, nvmlPciInfoExt_v1_t, busId);
  EXPECT_EQ(nvml::kPciInfoExt_v1, nvmlPciInfoExt_v1);
  CUCORE_SAME_SIZE(SystemDriverBranchInfo_v1, nvmlSystemDriverBranchInfo_v1_t);
  CUCORE_SAME_FIELD(SystemDriverBranchInfo_v1, nvmlSystemDriverBranchInfo_v1_t, version);
  CUCORE_SAME_FIELD(SystemDriverBranchInfo_v1, nvmlSystemDriverBranchInfo_v1_t, branch);
  EXPECT_EQ(nvml::kSystemDriverBranchInfo_v1, nvmlSystemDriverBranchInfo_v1);
  CUCORE_SAME_SIZE(Temperature_v1, nvmlTemperature_v1_t);
  CUCORE_SAME_FIELD(Temperature_v1, nvmlTemperature_v1_t, version);
  CUCORE_SAME_FIELD(Temperature_v1, nvmlTemperature_v1_t, sensorType);
  CUCORE_SAME_FIELD(Temperature_v1, nvmlTemperature_v1_t, temperature);
  EXPECT_EQ(nvml::kTemperature_v1, nvmlTemperature_v1);
  CUCORE_SAME_SIZE(MarginTemperature_v1, nvmlMarginTemperature_v1_t);
  CUCORE_SAME_FIELD(MarginTemperature_v1, nvmlMarginTemperature_v1_t, version);
  CUCORE_SAME_FIELD(MarginTemperature_v1, nvmlMarginTemperature_v1_t, marginTemperature);
  EXPECT_EQ(nvml::kMarginTemperature_v1, nvmlMarginTemperature_v1);
  CUCORE_SAME_SIZE(EventData, nvmlEventData_t);
  CUCORE_SAME_FIELD(EventData, nvmlEventData_t, device);
  CUCORE_SAME_FIELD(EventData, nvmlEventData_t, eventType);
  CUCORE_SAME_FIELD(EventData, nvmlEventData_t, eventData);
  CUCORE_SAME_FIELD(EventData, nvmlEventData_t, gpuInstanceId);
  CUCORE_SAME_FIELD(EventData, nvmlEventData_t, computeInstanceId);
  CUCORE_SAME_SIZE(Value, nvmlValue_t);
  CUCORE_SAME_SIZE(FieldValue, nvmlFieldValue_t);
  CUCORE_SAME_FIELD(FieldValue, nvmlFieldValue_t, fieldId);
  CUCORE_SAME_FIELD(FieldValue, nvmlFieldValue_t, scopeId);
  CUCORE_SAME_FIELD(FieldValue, nvmlFieldValue_t, timestamp);
  CUCORE_SAME_FIELD(FieldValue, nvmlFieldValue_t, latencyUsec);
  CUCORE_SAME_FIELD(FieldValue, nvmlFieldValue_t, valueType);
  CUCORE_SAME_FIELD(FieldValue, nvmlFieldValue_t, nvmlReturn);
  CUCORE_SAME_FIELD(FieldValue, nvmlFieldValue_t, value);
  CUCORE_SAME_SIZE(C2cModeInfo_v1, nvmlC2cModeInfo_v1_t);
  CUCORE_SAME_FIELD(C2cModeInfo_v1, nvmlC2cModeInfo_v1_t, isC2cEnabled);
  CUCORE_SAME_SIZE(DeviceAddressingMode_v1, nvmlDeviceAddressingMode_v1_t);
  CUCORE_SAME_FIELD(DeviceAddressingMode_v1, nvmlDeviceAddressingMode_v1_t, version);
  CUCORE_SAME_FIELD(DeviceAddressingMode_v1, nvmlDeviceAddressingMode_v1_t, value);
  EXPECT_EQ(nvml::kDeviceAddressingMode_v1, nvmlDeviceAddressingMode_v1);
  CUCORE_SAME_SIZE(RepairStatus_v1, nvmlRepairStatus_v1_t);
  CUCORE_SAME_FIELD(RepairStatus_v1, nvmlRepairStatus_v1_t, version);
  CUCORE_SAME_FIELD(RepairStatus_v1, nvmlRepairStatus_v1_t, bChannelRepairPending);
  CUCORE_SAME_FIELD(RepairStatus_v1, nvmlRepairStatus_v1_t, bTpcRepairPending);
  EXPECT_EQ(nvml::kRepairStatus_v1, nvmlRepairStatus_v1);
  CUCORE_SAME_SIZE(DeviceAttributes, nvmlDeviceAttributes_t);
  CUCORE_SAME_FIELD(DeviceAttributes, nvmlDeviceAttributes_t, multiprocessorCount);
  CUCORE_SAME_FIELD(DeviceAttributes, nvmlDeviceAttributes_t, sharedOfaCount);
  CUCORE_SAME_FIELD(DeviceAttributes, nvmlDeviceAttributes_t, computeInstanceSliceCount);
  CUCORE_SAME_FIELD(DeviceAttributes, nvmlDeviceAttributes_t, memorySizeMB);
  CUCORE_SAME_SIZE(GpuDynamicPstatesInfo, nvmlGpuDynamicPstatesInfo_t);
  CUCORE_SAME_FIELD(GpuDynamicPstatesInfo, nvmlGpuDynamicPstatesInfo_t, flags);
  CUCORE_SAME_FIELD(GpuDynamicPstatesInfo, nvmlGpuDynamicPstatesInfo_t, utilization);
  CUCORE_SAME_SIZE(CoolerInfo_v1, nvmlCoolerInfo_v1_t);
  CUCORE_SAME_FIELD(CoolerInfo_v1, nvmlCoolerInfo_v1_t, version);
  CUCORE_SAME_FIELD(CoolerInfo_v1, nvmlCoolerInfo_v1_t, index);
  CUCORE_SAME_FIELD(CoolerInfo_v1, nvmlCoolerInfo_v1_t, signalType);
  CUCORE_SAME_FIELD(CoolerInfo_v1, nvmlCoolerInfo_v1_t, target);
  EXPECT_EQ(nvml::kCoolerInfo_v1, nvmlCoolerInfo_v1);
  CUCORE_SAME_SIZE(GpuThermalSettings, nvmlGpuThermalSettings_t);
  CUCORE_SAME_FIELD(GpuThermalSettings, nvmlGpuThermalSettings_t, count);
  CUCORE_SAME_FIELD(GpuThermalSettings, nvmlGpuThermalSettings_t, sensor);
  CUCORE_SAME_SIZE(ClockOffset_v1, nvmlClockOffset_v1_t);
  CUCORE_SAME_FIELD(ClockOffset_v1, nvmlClockOffset_v1_t, version);
  CUCORE_SAME_FIELD(ClockOffset_v1, nvmlClockOffset_v1_t, type);
  CUCORE_SAME_FIELD(ClockOffset_v1, nvmlClockOffset_v1_t, pstate);
  CUCORE_SAME_FIELD(ClockOffset_v1, nvmlClockOffset_v1_t, clockOffsetMHz);
  CUCORE_SAME_FIELD(ClockOffset_v1, nvmlClockOffset_v1_t, minClockOffsetMHz);
  CUCORE_SAME_FIELD(ClockOffset_v1, nvmlClockOffset_v1_t, maxClockOffsetMHz);
  EXPECT_EQ(nvml::kClockOffset_v1, nvmlClockOffset_v1);
  CUCORE_SAME_SIZE(SystemEventSetCreateRequest_v1, nvmlSystemEventSetCreateRequest_v1_t);
  CUCORE_SAME_FIELD(SystemEventSetCreateRequest_v1, nvmlSystemEventSetCreateRequest_v1_t, version);
  CUCORE_SAME_FIELD(SystemEventSetCreateRequest_v1, nvmlSystemEventSetCreateRequest_v1_t, set);
  EXPECT_EQ(nvml::kSystemEventSetCreateRequest_v1, nvmlSystemEventSetCreateRequest_v1);
  CUCORE_SAME_SIZE(SystemEventSetFreeRequest_v1, nvmlSystemEventSetFreeRequest_v1_t);
  CUCORE_SAME_FIELD(SystemEventSetFreeRequest_v1, nvmlSystemEventSetFreeRequest_v1_t, version);
  CUCORE_SAME_FIELD(SystemEventSetFreeRequest_v1, nvmlSystemEventSetFreeRequest_v1_t, set);
  EXPECT_EQ(nvml::kSystemEventSetFreeRequest_v1, nvmlSystemEventSetFreeRequest_v1);
  CUCORE_SAME_SIZE(SystemRegisterEventRequest_v1, nvmlSystemRegisterEventRequest_v1_t);
  CUCORE_SAME_FIELD(SystemRegisterEventRequest_v1, nvmlSystemRegisterEventRequest_v1_t, version);
  CUCORE_SAME_FIELD(SystemRegisterEventRequest_v1, nvmlSystemRegisterEventRequest_v1_t, eventTypes);
  CUCORE_SAME_FIELD(SystemRegisterEventRequest_v1, nvmlSystemRegisterEventRequest_v1_t, set);
  EXPECT_EQ(nvml::kSystemRegisterEventRequest_v1, nvmlSystemRegisterEventRequest_v1);
  CUCORE_SAME_SIZE(SystemEventData_v1, nvmlSystemEventData_v1_t);
  CUCORE_SAME_FIELD(SystemEventData_v1, nvmlSystemEventData_v1_t, eventType);
  CUCORE_SAME_FIELD(SystemEventData_v1, nvmlSystemEventData_v1_t, gpuId);
  CUCORE_SAME_SIZE(SystemEventSetWaitRequest_v1, nvmlSystemEventSetWaitRequest_v1_t);
  CUCORE_SAME_FIELD(SystemEventSetWaitRequest_v1, nvmlSystemEventSetWaitRequest_v1_t, version);
  CUCORE_SAME_FIELD(SystemEventSetWaitRequest_v1, nvmlSystemEventSetWaitRequest_v1_t, timeoutms);
  CUCORE_SAME_FIELD(SystemEventSetWaitRequest_v1, nvmlSystemEventSetWaitRequest_v1_t, set);
  CUCORE_SAME_FIELD(SystemEventSetWaitRequest_v1, nvmlSystemEventSetWaitRequest_v1_t, data);
  CUCORE_SAME_FIELD(SystemEventSetWaitRequest_v1, nvmlSystemEventSetWaitRequest_v1_t, dataSize);
  CUCORE_SAME_FIELD(SystemEventSetWaitRequest_v1, nvmlSystemEventSetWaitRequest_v1_t, numEvent);
  EXPECT_EQ(nvml::kSystemEventSetWaitRequest_v1, nvmlSystemEventSetWaitRequest_v1);
#undef CUCORE_SAME_SIZE
#undef CUCORE_SAME_FIELD
  EXPECT_EQ(nvml::kMaxGpuUtilizations, NVML_MAX_GPU_UTILIZATIONS);
  EXPECT_EQ(nvml::kMaxThermalSensorsPerGpu, NVML_MAX_THERMAL_SENSORS_PER_GPU);
  EXPECT_EQ(nvml::kDeviceInforomVersionBufferSize, NVML_DEVICE_INFOROM_VERSION_BUFFER_SIZE);
  EXPECT_EQ(nvml::kDevicePartNumberBufferSize, NVML_DEVICE_PART_NUMBER_BUFFER_SIZE);
  EXPECT_EQ(static_cast<int>(cucore::system::AffinityScope::socket), NVML_AFFINITY_SCOPE_SOCKET);
  EXPECT_EQ(static_cast<int>(cucore::system::AddressingMode::ats), NVML_DEVICE_ADDRESSING_MODE_ATS);
  EXPECT_EQ(static_cast<int>(cucore::system::InforomObject::den), NVML_INFOROM_DEN);

  // Constants and buffer sizes.
  EXPECT_EQ(nvml::kSystemDriverVersionBufferSize, NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE);
  EXPECT_EQ(nvml::kSystemNvmlVersionBufferSize, NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE);
  EXPECT_EQ(nvml::kDeviceNameV2BufferSize, NVML_DEVICE_NAME_V2_BUFFER_SIZE);
  EXPECT_EQ(nvml::kDeviceUuidV2BufferSize, NVML_DEVICE_UUID_V2_BUFFER_SIZE);
  EXPECT_EQ(nvml::kDeviceSerialBufferSize, NVML_DEVICE_SERIAL_BUFFER_SIZE);
  EXPECT_EQ(nvml::kDevicePciBusIdBufferSize, NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE);
  EXPECT_EQ(nvml::kNvlinkMaxLinks, NVML_NVLINK_MAX_LINKS);
  EXPECT_EQ(nvml::kValueNotAvailable, static_cast<unsigned long long>(NVML_VALUE_NOT_AVAILABLE));
  EXPECT_EQ(nvml::kFieldNvlinkLinkCount, NVML_FI_DEV_NVLINK_LINK_COUNT);
  EXPECT_EQ(nvml::kFeatureEnabled, NVML_FEATURE_ENABLED);
  EXPECT_EQ(nvml::kTemperatureGpu, NVML_TEMPERATURE_GPU);
  EXPECT_EQ(nvml::kPstateUnknown, NVML_PSTATE_UNKNOWN);
  EXPECT_EQ(nvml::kPcieUtilTxBytes, NVML_PCIE_UTIL_TX_BYTES);
  EXPECT_EQ(nvml::kPcieUtilRxBytes, NVML_PCIE_UTIL_RX_BYTES);
  EXPECT_EQ(nvml::kMaxPstates, NVML_MAX_GPU_PERF_PSTATES);
  EXPECT_EQ(nvml::VALUE_TYPE_UNSIGNED_INT, NVML_VALUE_TYPE_UNSIGNED_INT);
  EXPECT_EQ(nvml::VALUE_TYPE_UNSIGNED_LONG_LONG, NVML_VALUE_TYPE_UNSIGNED_LONG_LONG);
  EXPECT_EQ(nvml::VALUE_TYPE_SIGNED_INT, NVML_VALUE_TYPE_SIGNED_INT);

  // Return codes: NvmlError names each as nvml.h does.
  const std::pair<int, const char*> returns[] = {
      {NVML_SUCCESS, "NVML_SUCCESS"},
      {NVML_ERROR_UNINITIALIZED, "NVML_ERROR_UNINITIALIZED"},
      {NVML_ERROR_INVALID_ARGUMENT, "NVML_ERROR_INVALID_ARGUMENT"},
      {NVML_ERROR_NOT_SUPPORTED, "NVML_ERROR_NOT_SUPPORTED"},
      {NVML_ERROR_NO_PERMISSION, "NVML_ERROR_NO_PERMISSION"},
      {NVML_ERROR_ALREADY_INITIALIZED, "NVML_ERROR_ALREADY_INITIALIZED"},
      {NVML_ERROR_NOT_FOUND, "NVML_ERROR_NOT_FOUND"},
      {NVML_ERROR_INSUFFICIENT_SIZE, "NVML_ERROR_INSUFFICIENT_SIZE"},
      {NVML_ERROR_INSUFFICIENT_POWER, "NVML_ERROR_INSUFFICIENT_POWER"},
      {NVML_ERROR_DRIVER_NOT_LOADED, "NVML_ERROR_DRIVER_NOT_LOADED"},
      {NVML_ERROR_TIMEOUT, "NVML_ERROR_TIMEOUT"},
      {NVML_ERROR_IRQ_ISSUE, "NVML_ERROR_IRQ_ISSUE"},
      {NVML_ERROR_LIBRARY_NOT_FOUND, "NVML_ERROR_LIBRARY_NOT_FOUND"},
      {NVML_ERROR_FUNCTION_NOT_FOUND, "NVML_ERROR_FUNCTION_NOT_FOUND"},
      {NVML_ERROR_CORRUPTED_INFOROM, "NVML_ERROR_CORRUPTED_INFOROM"},
      {NVML_ERROR_GPU_IS_LOST, "NVML_ERROR_GPU_IS_LOST"},
      {NVML_ERROR_RESET_REQUIRED, "NVML_ERROR_RESET_REQUIRED"},
      {NVML_ERROR_OPERATING_SYSTEM, "NVML_ERROR_OPERATING_SYSTEM"},
      {NVML_ERROR_LIB_RM_VERSION_MISMATCH, "NVML_ERROR_LIB_RM_VERSION_MISMATCH"},
      {NVML_ERROR_IN_USE, "NVML_ERROR_IN_USE"},
      {NVML_ERROR_MEMORY, "NVML_ERROR_MEMORY"},
      {NVML_ERROR_NO_DATA, "NVML_ERROR_NO_DATA"},
      {NVML_ERROR_VGPU_ECC_NOT_SUPPORTED, "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED"},
      {NVML_ERROR_INSUFFICIENT_RESOURCES, "NVML_ERROR_INSUFFICIENT_RESOURCES"},
      {NVML_ERROR_FREQ_NOT_SUPPORTED, "NVML_ERROR_FREQ_NOT_SUPPORTED"},
      {NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "NVML_ERROR_ARGUMENT_VERSION_MISMATCH"},
      {NVML_ERROR_DEPRECATED, "NVML_ERROR_DEPRECATED"},
      {NVML_ERROR_NOT_READY, "NVML_ERROR_NOT_READY"},
      {NVML_ERROR_GPU_NOT_FOUND, "NVML_ERROR_GPU_NOT_FOUND"},
      {NVML_ERROR_INVALID_STATE, "NVML_ERROR_INVALID_STATE"},
      {NVML_ERROR_UNKNOWN, "NVML_ERROR_UNKNOWN"},
  };
  for (const auto& [code, name] : returns) EXPECT_EQ(cucore::NvmlError(code, "x").name(), name) << code;
  EXPECT_EQ(nvml::ERROR_NOT_SUPPORTED, NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(nvml::ERROR_INSUFFICIENT_SIZE, NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(nvml::ERROR_TIMEOUT, NVML_ERROR_TIMEOUT);

  // Enumerations cucore::system passes to NVML by value.
  EXPECT_EQ(static_cast<int>(sys::ClockType::graphics), NVML_CLOCK_GRAPHICS);
  EXPECT_EQ(static_cast<int>(sys::ClockType::sm), NVML_CLOCK_SM);
  EXPECT_EQ(static_cast<int>(sys::ClockType::memory), NVML_CLOCK_MEM);
  EXPECT_EQ(static_cast<int>(sys::ClockType::video), NVML_CLOCK_VIDEO);
  EXPECT_EQ(static_cast<int>(sys::ClockId::current), NVML_CLOCK_ID_CURRENT);
  EXPECT_EQ(static_cast<int>(sys::ClockId::customer_boost_max), NVML_CLOCK_ID_CUSTOMER_BOOST_MAX);
  EXPECT_EQ(static_cast<int>(sys::TemperatureThresholds::shutdown), NVML_TEMPERATURE_THRESHOLD_SHUTDOWN);
  EXPECT_EQ(static_cast<int>(sys::TemperatureThresholds::slowdown), NVML_TEMPERATURE_THRESHOLD_SLOWDOWN);
  EXPECT_EQ(static_cast<int>(sys::TemperatureThresholds::mem_max), NVML_TEMPERATURE_THRESHOLD_MEM_MAX);
  EXPECT_EQ(static_cast<int>(sys::TemperatureThresholds::gpu_max), NVML_TEMPERATURE_THRESHOLD_GPU_MAX);
  EXPECT_EQ(static_cast<int>(sys::TemperatureThresholds::acoustic_min), NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MIN);
  EXPECT_EQ(static_cast<int>(sys::TemperatureThresholds::acoustic_curr), NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_CURR);
  EXPECT_EQ(static_cast<int>(sys::TemperatureThresholds::acoustic_max), NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MAX);
  EXPECT_EQ(static_cast<int>(sys::TemperatureThresholds::gps_curr), NVML_TEMPERATURE_THRESHOLD_GPS_CURR);
  EXPECT_EQ(static_cast<int>(sys::GpuTopologyLevel::internal), NVML_TOPOLOGY_INTERNAL);
  EXPECT_EQ(static_cast<int>(sys::GpuTopologyLevel::single), NVML_TOPOLOGY_SINGLE);
  EXPECT_EQ(static_cast<int>(sys::GpuTopologyLevel::multiple), NVML_TOPOLOGY_MULTIPLE);
  EXPECT_EQ(static_cast<int>(sys::GpuTopologyLevel::hostbridge), NVML_TOPOLOGY_HOSTBRIDGE);
  EXPECT_EQ(static_cast<int>(sys::GpuTopologyLevel::node), NVML_TOPOLOGY_NODE);
  EXPECT_EQ(static_cast<int>(sys::GpuTopologyLevel::system), NVML_TOPOLOGY_SYSTEM);
  EXPECT_EQ(static_cast<int>(sys::GpuP2PCapsIndex::read), NVML_P2P_CAPS_INDEX_READ);
  EXPECT_EQ(static_cast<int>(sys::GpuP2PCapsIndex::write), NVML_P2P_CAPS_INDEX_WRITE);
  EXPECT_EQ(static_cast<int>(sys::GpuP2PCapsIndex::nvlink), NVML_P2P_CAPS_INDEX_NVLINK);
  EXPECT_EQ(static_cast<int>(sys::GpuP2PCapsIndex::atomics), NVML_P2P_CAPS_INDEX_ATOMICS);
  EXPECT_EQ(static_cast<int>(sys::GpuP2PCapsIndex::pci), NVML_P2P_CAPS_INDEX_PCI);
  EXPECT_EQ(static_cast<int>(sys::GpuP2PCapsIndex::unknown), NVML_P2P_CAPS_INDEX_UNKNOWN);
  EXPECT_EQ(static_cast<int>(sys::GpuP2PStatus::ok), NVML_P2P_STATUS_OK);
  EXPECT_EQ(static_cast<int>(sys::GpuP2PStatus::chipset_not_supported), NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED);
  EXPECT_EQ(static_cast<int>(sys::GpuP2PStatus::gpu_not_supported), NVML_P2P_STATUS_GPU_NOT_SUPPORTED);
  EXPECT_EQ(static_cast<int>(sys::GpuP2PStatus::ioh_topology_not_supported),
            NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED);
  EXPECT_EQ(static_cast<int>(sys::GpuP2PStatus::disabled_by_regkey), NVML_P2P_STATUS_DISABLED_BY_REGKEY);
  EXPECT_EQ(static_cast<int>(sys::GpuP2PStatus::not_supported), NVML_P2P_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(static_cast<int>(sys::GpuP2PStatus::unknown), NVML_P2P_STATUS_UNKNOWN);
  EXPECT_EQ(static_cast<int>(sys::MemoryErrorType::corrected), NVML_MEMORY_ERROR_TYPE_CORRECTED);
  EXPECT_EQ(static_cast<int>(sys::MemoryErrorType::uncorrected), NVML_MEMORY_ERROR_TYPE_UNCORRECTED);
  EXPECT_EQ(static_cast<int>(sys::EccCounterType::volatile_ecc), NVML_VOLATILE_ECC);
  EXPECT_EQ(static_cast<int>(sys::EccCounterType::aggregate_ecc), NVML_AGGREGATE_ECC);
  EXPECT_EQ(static_cast<unsigned>(sys::DeviceArch::kepler), NVML_DEVICE_ARCH_KEPLER);
  EXPECT_EQ(static_cast<unsigned>(sys::DeviceArch::ampere), NVML_DEVICE_ARCH_AMPERE);
  EXPECT_EQ(static_cast<unsigned>(sys::DeviceArch::hopper), NVML_DEVICE_ARCH_HOPPER);
#ifdef NVML_DEVICE_ARCH_BLACKWELL
  EXPECT_EQ(static_cast<unsigned>(sys::DeviceArch::blackwell), NVML_DEVICE_ARCH_BLACKWELL);
#endif
  EXPECT_EQ(static_cast<unsigned>(sys::DeviceArch::unknown), NVML_DEVICE_ARCH_UNKNOWN);

  // Event and clocks-event bits (older names kept by nvml.h as aliases).
  EXPECT_EQ(sys::event_types::single_bit_ecc_error, static_cast<std::uint64_t>(nvmlEventTypeSingleBitEccError));
  EXPECT_EQ(sys::event_types::double_bit_ecc_error, static_cast<std::uint64_t>(nvmlEventTypeDoubleBitEccError));
  EXPECT_EQ(sys::event_types::pstate, static_cast<std::uint64_t>(nvmlEventTypePState));
  EXPECT_EQ(sys::event_types::xid_critical_error, static_cast<std::uint64_t>(nvmlEventTypeXidCriticalError));
  EXPECT_EQ(sys::event_types::clock, static_cast<std::uint64_t>(nvmlEventTypeClock));
  EXPECT_EQ(sys::event_types::power_source_change, static_cast<std::uint64_t>(nvmlEventTypePowerSourceChange));
  EXPECT_EQ(sys::event_types::mig_config_change, static_cast<std::uint64_t>(nvmlEventMigConfigChange));
#ifdef nvmlEventTypeGpuRecoveryAction
  EXPECT_EQ(sys::event_types::single_bit_ecc_error_storm, static_cast<std::uint64_t>(nvmlEventTypeSingleBitEccErrorStorm));
  EXPECT_EQ(sys::event_types::dram_retirement_event, static_cast<std::uint64_t>(nvmlEventTypeDramRetirementEvent));
  EXPECT_EQ(sys::event_types::dram_retirement_failure, static_cast<std::uint64_t>(nvmlEventTypeDramRetirementFailure));
  EXPECT_EQ(sys::event_types::non_fatal_poison_error, static_cast<std::uint64_t>(nvmlEventTypeNonFatalPoisonError));
  EXPECT_EQ(sys::event_types::fatal_poison_error, static_cast<std::uint64_t>(nvmlEventTypeFatalPoisonError));
  EXPECT_EQ(sys::event_types::gpu_unavailable_error, static_cast<std::uint64_t>(nvmlEventTypeGpuUnavailableError));
  EXPECT_EQ(sys::event_types::gpu_recovery_action, static_cast<std::uint64_t>(nvmlEventTypeGpuRecoveryAction));
#endif
  EXPECT_EQ(sys::clocks_event_reasons::gpu_idle, static_cast<std::uint64_t>(nvmlClocksThrottleReasonGpuIdle));
  EXPECT_EQ(sys::clocks_event_reasons::applications_clocks_setting,
            static_cast<std::uint64_t>(nvmlClocksThrottleReasonApplicationsClocksSetting));
  EXPECT_EQ(sys::clocks_event_reasons::sw_power_cap, static_cast<std::uint64_t>(nvmlClocksThrottleReasonSwPowerCap));
  EXPECT_EQ(sys::clocks_event_reasons::hw_slowdown, static_cast<std::uint64_t>(nvmlClocksThrottleReasonHwSlowdown));
  EXPECT_EQ(sys::clocks_event_reasons::sync_boost, static_cast<std::uint64_t>(nvmlClocksThrottleReasonSyncBoost));
  EXPECT_EQ(sys::clocks_event_reasons::sw_thermal_slowdown,
            static_cast<std::uint64_t>(nvmlClocksThrottleReasonSwThermalSlowdown));
  EXPECT_EQ(sys::clocks_event_reasons::hw_thermal_slowdown,
            static_cast<std::uint64_t>(nvmlClocksThrottleReasonHwThermalSlowdown));
  EXPECT_EQ(sys::clocks_event_reasons::hw_power_brake_slowdown,
            static_cast<std::uint64_t>(nvmlClocksThrottleReasonHwPowerBrakeSlowdown));
  EXPECT_EQ(sys::clocks_event_reasons::display_clock_setting,
            static_cast<std::uint64_t>(nvmlClocksThrottleReasonDisplayClockSetting));

  EXPECT_EQ(sys::system_event_types::gpu_driver_unbind, static_cast<std::uint64_t>(nvmlSystemEventTypeGpuDriverUnbind));
  EXPECT_EQ(sys::system_event_types::gpu_driver_bind, static_cast<std::uint64_t>(nvmlSystemEventTypeGpuDriverBind));
  EXPECT_EQ(static_cast<int>(NVML_PSTATE_15), 15);  // ClockInfo passes P-states 0..15 as nvmlPstates_t

  // Field ids: each row the value nvml.h gives its NVML_FI_ name. A row whose
  // name this nvml.h lacks stringizes to the name itself; it must then be an
  // id newer than this header (at least its NVML_FI_MAX).
#define CUCORE_STR2(x) #x
#define CUCORE_STR(x) CUCORE_STR2(x)
  struct FieldRow {
    unsigned id;
    const char* name;
    const char* header;  // the macro's expansion, or its own name when undefined
  };
  const FieldRow field_rows[] = {
#define CUCORE_NVML_FIELD(id, name) {id, #name, CUCORE_STR(NVML_FI_##name)},
#include "loader/nvml_fields.inc"
#undef CUCORE_NVML_FIELD
  };
#undef CUCORE_STR
#undef CUCORE_STR2
  int in_header = 0;
  for (const auto& row : field_rows) {
    std::string expansion = row.header;
    if (expansion == std::string("NVML_FI_") + row.name) {
      EXPECT_GE(row.id, static_cast<unsigned>(NVML_FI_MAX)) << row.name << " is not in this nvml.h, yet older";
      continue;
    }
    expansion.erase(std::remove(expansion.begin(), expansion.end(), '('), expansion.end());
    EXPECT_EQ(std::strtoul(expansion.c_str(), nullptr, 0), row.id) << row.name << " is " << row.header;
    ++in_header;
  }
  EXPECT_GT(in_header, 250) << "nvml.h names too few of cucore's field ids";
  EXPECT_EQ(std::size(field_rows), sys::field_id_names().size());

  // Every entry point cucore calls: same arity, parameter kinds and sizes as nvml.h declares.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#define X(name, required, params) EXPECT_TRUE((same_shape<nvml::PFN_##name, decltype(&::name)>::value)) << #name;
  CUCORE_NVML_FUNCTIONS(X)
  CUCORE_NVML_LEGACY_FUNCTIONS(X)
#undef X
  EXPECT_TRUE((same_shape<nvml::PFN_nvmlErrorString, decltype(&::nvmlErrorString)>::value));
#pragma GCC diagnostic pop
#endif
}

}  // namespace
