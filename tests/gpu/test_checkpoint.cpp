// Checkpointing another process on the GPU machine: a child holds 1 GiB of
// pseudo-random data on the GPU and keeps launching kernels
// (checkpoint_worker.hpp); the parent locks it, checkpoints it (NVML's process
// list then shows its device memory released), restores it and unlocks it;
// every word of the data must be intact and the child's kernels must run
// again. Each step's time is printed (bench_ipc reports them against 1, 8 and
// 32 GiB).
//
// Where the platform refuses checkpointing (a virtual machine whose GPU
// passthrough does not allow it), the driver's error is printed in a banner
// and recorded as the test's property "checkpoint_refused", and the test
// passes: that one documented case, with the API still covered by
// tests/cpu/test_checkpoint.cpp.
#include <cucore/checkpoint.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/system.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>

#include "support/child_process.hpp"
#include "common/gpu.hpp"
#include "support/checkpoint_worker.hpp"

using namespace cucore;
using cucore::test::Child;
using cucore::test::recv_value;
using cucore::test::send_value;
namespace worker = cucore::test::checkpoint_worker;

namespace {

CUCORE_CHILD_ROLE(checkpoint_worker) { return worker::run(socket, args); }

// The child's device memory as NVML lists it (nullopt: not listed).
std::optional<std::uint64_t> nvml_memory_of(int pid) {
  auto procs = Device(0).to_system_device().compute_running_processes();
  if (!procs) return std::nullopt;
  for (const auto& p : *procs)
    if (p.pid == static_cast<unsigned>(pid)) return p.used_gpu_memory.value_or(0);
  return std::nullopt;
}

// Polls NVML (its list lags the driver) until `ok` holds or 5 s pass.
template <typename F>
std::optional<std::uint64_t> nvml_until(int pid, F ok) {
  std::optional<std::uint64_t> m;
  for (int i = 0; i < 50; ++i) {
    m = nvml_memory_of(pid);
    if (ok(m)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return m;
}

worker::Status ask(Child& c) {
  send_value(c.socket(), char(worker::verify));
  return recv_value<worker::Status>(c.socket());
}

bool platform_refusal(const std::exception& e) {
  if (dynamic_cast<const FeatureUnavailableError*>(&e)) return true;
  if (auto* ce = dynamic_cast<const CudaError*>(&e))
    return ce->code() == CUDA_ERROR_NOT_SUPPORTED || ce->code() == CUDA_ERROR_NOT_PERMITTED ||
           ce->code() == CUDA_ERROR_OPERATING_SYSTEM;
  return false;
}

template <typename F>
double timed_ms(F&& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

TEST(CheckpointGpu, AChildIsLockedCheckpointedRestoredAndUnlockedWithItsDataIntact) {
  CUCORE_REQUIRE_GPU();
  const std::size_t bytes = std::size_t(1) << 30;
  Child c("checkpoint_worker", {std::to_string(bytes), "12345"});
  auto ready = recv_value<worker::Ready>(c.socket());
  ASSERT_TRUE(ready.ok) << "the worker failed to start: " << ready.error;
  ASSERT_EQ(ready.pid, c.pid());

  worker::Status before = ask(c);
  ASSERT_EQ(before.mismatches, 0u) << "the worker's data was wrong before any checkpoint";
  ASSERT_GT(before.ticks, 0u);
  auto held = nvml_until(c.pid(), [&](auto m) { return m && *m >= bytes; });
  ASSERT_TRUE(held) << "NVML does not list the worker (pid " << c.pid() << ")";
  EXPECT_GE(*held, bytes);

  checkpoint::Process p(c.pid());
  EXPECT_EQ(p.state(), checkpoint::ProcessState::running);
  EXPECT_GT(p.restore_thread_id(), 0);
  double lock_ms = 0, checkpoint_ms = 0, restore_ms = 0, unlock_ms = 0;
  bool locked = false;
  try {
    lock_ms = timed_ms([&] { p.lock(30'000); });
    locked = true;
    EXPECT_EQ(p.state(), checkpoint::ProcessState::locked);
    checkpoint_ms = timed_ms([&] { p.checkpoint(); });
  } catch (const std::exception& e) {
    if (!platform_refusal(e)) throw;
    if (locked) p.unlock();
    std::printf("\n==== CHECKPOINTING REFUSED BY THIS PLATFORM ====\n%s\n"
                "(the documented case: the test passes; the API is covered by the CPU tests)\n"
                "================================================\n",
                e.what());
    ::testing::Test::RecordProperty("checkpoint_refused", e.what());
    EXPECT_EQ(ask(c).mismatches, 0u);
    send_value(c.socket(), char(worker::quit));
    EXPECT_EQ(c.wait(std::chrono::seconds(60)), 0);
    return;
  }
  EXPECT_EQ(p.state(), checkpoint::ProcessState::checkpointed);
  auto released = nvml_until(c.pid(), [](auto m) { return !m || *m < (std::uint64_t(64) << 20); });
  EXPECT_TRUE(!released || *released < (std::uint64_t(64) << 20))
      << "the checkpointed worker still holds " << *released << " bytes of device memory";
  // A wrong step names the state it meets.
  try {
    p.unlock();
    ADD_FAILURE() << "a checkpointed process was unlocked";
  } catch (const checkpoint::StateError& e) {
    EXPECT_NE(std::string(e.what()).find("checkpointed"), std::string::npos) << e.what();
  }
  restore_ms = timed_ms([&] { p.restore(); });
  EXPECT_EQ(p.state(), checkpoint::ProcessState::locked);
  unlock_ms = timed_ms([&] { p.unlock(); });
  EXPECT_EQ(p.state(), checkpoint::ProcessState::running);

  worker::Status after = ask(c);
  EXPECT_EQ(after.mismatches, 0u) << "the data changed across checkpoint and restore";
  EXPECT_GE(after.ticks, before.ticks);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  worker::Status later = ask(c);
  EXPECT_GT(later.ticks, after.ticks) << "the worker's kernels did not run again";
  EXPECT_EQ(later.mismatches, 0u);
  std::printf("checkpoint of 1 GiB: lock %.1f ms, checkpoint %.1f ms, restore %.1f ms, unlock %.1f ms\n", lock_ms,
              checkpoint_ms, restore_ms, unlock_ms);
  ::testing::Test::RecordProperty("checkpoint_ms", std::to_string(checkpoint_ms));
  ::testing::Test::RecordProperty("restore_ms", std::to_string(restore_ms));
  send_value(c.socket(), char(worker::quit));
  EXPECT_EQ(c.wait(std::chrono::seconds(60)), 0);
}

TEST(CheckpointGpu, ThisProcessReportsRunningAndWrongStepsNameTheState) {
  CUCORE_REQUIRE_GPU();
  Device(0).set_current();
  checkpoint::Process self(static_cast<int>(getpid()));
  try {
    EXPECT_EQ(self.state(), checkpoint::ProcessState::running);
    self.checkpoint();  // not locked
    ADD_FAILURE() << "a running process was checkpointed";
  } catch (const checkpoint::StateError& e) {
    EXPECT_NE(std::string(e.what()).find("running"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("lock()"), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    if (!platform_refusal(e)) throw;
    std::printf("\n==== CHECKPOINTING REFUSED BY THIS PLATFORM ====\n%s\n", e.what());
    ::testing::Test::RecordProperty("checkpoint_refused", e.what());
  }
}

}  // namespace
