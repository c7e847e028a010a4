// cucore::checkpoint::Process against the fake driver: every transition of
// the driver's state machine, the arguments each call passes, errors that
// name the state, and drivers or platforms without checkpointing.
#include <cucore/checkpoint.hpp>
#include <cucore/errors.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/fake_driver.hpp"

using namespace cucore;
using cucore::checkpoint::GpuUuid;
using cucore::checkpoint::Process;
using cucore::checkpoint::ProcessState;
using cucore::test::FakeDriver;

namespace {

// The driver's checkpoint state machine, per pid (as the driver API documents it).
struct FakeCheckpoint {
  static inline std::map<int, CUprocessState> states;
  static inline std::vector<std::string> calls;
  static inline unsigned last_timeout = ~0u;
  static inline std::vector<CUcheckpointGpuPair> last_pairs;
  static inline bool restore_args_null = false;
  static inline CUresult refuse_with = CUDA_SUCCESS;  // every call fails so, when set

  static CUresult step(int pid, const char* name, CUprocessState from, CUprocessState to) {
    calls.push_back(std::string(name) + " " + std::to_string(pid));
    if (refuse_with != CUDA_SUCCESS) return refuse_with;
    auto it = states.find(pid);
    if (it == states.end()) return CUDA_ERROR_INVALID_VALUE;
    if (it->second != from) return CUDA_ERROR_ILLEGAL_STATE;
    it->second = to;
    return CUDA_SUCCESS;
  }

  static void install(FakeDriver& fd) {
    states.clear();
    calls.clear();
    last_pairs.clear();
    last_timeout = ~0u;
    restore_args_null = false;
    refuse_with = CUDA_SUCCESS;
    auto& t = fd.table;
    t.cuCheckpointProcessGetState = [](int pid, CUprocessState* s) {
      calls.push_back("state " + std::to_string(pid));
      if (refuse_with != CUDA_SUCCESS) return refuse_with;
      auto it = states.find(pid);
      if (it == states.end()) return CUDA_ERROR_INVALID_VALUE;
      *s = it->second;
      return CUDA_SUCCESS;
    };
    t.cuCheckpointProcessGetRestoreThreadId = [](int pid, int* tid) {
      if (refuse_with != CUDA_SUCCESS) return refuse_with;
      if (!states.count(pid)) return CUDA_ERROR_INVALID_VALUE;
      *tid = pid + 7;
      return CUDA_SUCCESS;
    };
    t.cuCheckpointProcessLock = [](int pid, CUcheckpointLockArgs* a) {
      last_timeout = a ? a->timeoutMs : ~0u;
      return step(pid, "lock", CU_PROCESS_STATE_RUNNING, CU_PROCESS_STATE_LOCKED);
    };
    t.cuCheckpointProcessCheckpoint = [](int pid, CUcheckpointCheckpointArgs*) {
      return step(pid, "checkpoint", CU_PROCESS_STATE_LOCKED, CU_PROCESS_STATE_CHECKPOINTED);
    };
    t.cuCheckpointProcessRestore = [](int pid, CUcheckpointRestoreArgs* a) {
      restore_args_null = a == nullptr;
      last_pairs.clear();
      if (a) last_pairs.assign(a->gpuPairs, a->gpuPairs + a->gpuPairsCount);
      return step(pid, "restore", CU_PROCESS_STATE_CHECKPOINTED, CU_PROCESS_STATE_LOCKED);
    };
    t.cuCheckpointProcessUnlock = [](int pid, CUcheckpointUnlockArgs*) {
      return step(pid, "unlock", CU_PROCESS_STATE_LOCKED, CU_PROCESS_STATE_RUNNING);
    };
  }
};

class Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override { FakeCheckpoint::install(fake_); }
  FakeDriver fake_;
};

GpuUuid random_gpu_uuid(std::mt19937& rng) {
  GpuUuid u;
  for (auto& b : u) b = static_cast<unsigned char>(rng() | 1);
  return u;
}

TEST_F(Checkpoint, AFullCycleWalksTheDriversStates) {
  FakeCheckpoint::states[4242] = CU_PROCESS_STATE_RUNNING;
  Process p(4242);
  EXPECT_EQ(p.pid(), 4242);
  EXPECT_EQ(p.state(), ProcessState::running);
  EXPECT_EQ(p.restore_thread_id(), 4249);
  p.lock(1500);
  EXPECT_EQ(FakeCheckpoint::last_timeout, 1500u);
  EXPECT_EQ(p.state(), ProcessState::locked);
  p.checkpoint();
  EXPECT_EQ(p.state(), ProcessState::checkpointed);
  p.restore();
  EXPECT_TRUE(FakeCheckpoint::restore_args_null) << "no mapping passes no arguments";
  EXPECT_EQ(p.state(), ProcessState::locked) << "restore leaves the process locked";
  p.unlock();
  EXPECT_EQ(p.state(), ProcessState::running);
  p.lock();
  EXPECT_EQ(FakeCheckpoint::last_timeout, 0u);
  EXPECT_STREQ(checkpoint::to_string(ProcessState::checkpointed), "checkpointed");
  EXPECT_STREQ(checkpoint::to_string(ProcessState::failed), "failed");
}

TEST_F(Checkpoint, RestorePassesEveryGpuPair) {
  FakeCheckpoint::states[77] = CU_PROCESS_STATE_CHECKPOINTED;
  std::mt19937 rng(5);
  std::map<GpuUuid, GpuUuid> mapping;
  for (int i = 0; i < 3; ++i) mapping[random_gpu_uuid(rng)] = random_gpu_uuid(rng);
  Process(77).restore(mapping);
  EXPECT_FALSE(FakeCheckpoint::restore_args_null);
  ASSERT_EQ(FakeCheckpoint::last_pairs.size(), 3u);
  std::map<GpuUuid, GpuUuid> seen;
  for (const auto& pair : FakeCheckpoint::last_pairs) {
    GpuUuid from, to;
    std::memcpy(from.data(), pair.oldUuid.bytes, 16);
    std::memcpy(to.data(), pair.newUuid.bytes, 16);
    seen[from] = to;
  }
  EXPECT_EQ(seen, mapping);
}

TEST_F(Checkpoint, WrongTransitionsNameTheStateAndTheWayOut) {
  struct Case {
    CUprocessState state;
    void (*step)(const Process&);
    const char* expected;  // substrings of the message
    const char* way;
  };
  const Case cases[] = {
      {CU_PROCESS_STATE_RUNNING, [](const Process& p) { p.checkpoint(); }, "the process is running, and checkpoint() needs it locked", "call lock() first"},
      {CU_PROCESS_STATE_RUNNING, [](const Process& p) { p.restore(); }, "the process is running, and restore() needs it checkpointed", "call lock() and checkpoint() first"},
      {CU_PROCESS_STATE_RUNNING, [](const Process& p) { p.unlock(); }, "the process is running, and unlock() needs it locked", "call lock() first"},
      {CU_PROCESS_STATE_LOCKED, [](const Process& p) { p.lock(); }, "the process is locked, and lock() needs it running", "call unlock() first"},
      {CU_PROCESS_STATE_LOCKED, [](const Process& p) { p.restore(); }, "the process is locked, and restore() needs it checkpointed", "call checkpoint() first"},
      {CU_PROCESS_STATE_CHECKPOINTED, [](const Process& p) { p.unlock(); }, "the process is checkpointed, and unlock() needs it locked", "call restore() first"},
      {CU_PROCESS_STATE_CHECKPOINTED, [](const Process& p) { p.lock(); }, "the process is checkpointed, and lock() needs it running", "call restore() and unlock() first"},
      {CU_PROCESS_STATE_FAILED, [](const Process& p) { p.unlock(); }, "the process is failed", "cannot go on"},
  };
  for (const Case& c : cases) {
    FakeCheckpoint::states[99] = c.state;
    try {
      c.step(Process(99));
      ADD_FAILURE() << "no error for " << c.expected;
    } catch (const checkpoint::StateError& e) {
      std::string what = e.what();
      EXPECT_NE(what.find("checkpoint::Process(99)"), std::string::npos) << what;
      EXPECT_NE(what.find(c.expected), std::string::npos) << what;
      EXPECT_NE(what.find(c.way), std::string::npos) << what;
      EXPECT_NE(what.find("CUDA_ERROR_ILLEGAL_STATE"), std::string::npos) << what;
      EXPECT_EQ(e.code(), CUDA_ERROR_ILLEGAL_STATE);
      ASSERT_TRUE(e.state().has_value());
      EXPECT_EQ(static_cast<int>(*e.state()), static_cast<int>(c.state));
    }
    EXPECT_EQ(FakeCheckpoint::states[99], c.state) << "a refused step changed the state";
  }
}

TEST_F(Checkpoint, OtherDriverErrorsAreCudaErrorsNamingTheCallAndPid) {
  try {
    (void)Process(31337).state();  // no such CUDA process at the fake
    FAIL();
  } catch (const CudaError& e) {
    EXPECT_EQ(e.code(), CUDA_ERROR_INVALID_VALUE);
    EXPECT_NE(std::string(e.what()).find("cuCheckpointProcessGetState"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("31337"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Process(0), std::invalid_argument);
  EXPECT_THROW(Process(-5), std::invalid_argument);
  fake_.table.cuCheckpointProcessGetState = [](int, CUprocessState* s) {
    *s = static_cast<CUprocessState>(17);
    return CUDA_SUCCESS;
  };
  try {
    (void)Process(1).state();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("17"), std::string::npos) << e.what();
  }
}

TEST_F(Checkpoint, APlatformThatRefusesCheckpointingIsAFeatureErrorWithTheDriversWord) {
  FakeCheckpoint::states[5] = CU_PROCESS_STATE_RUNNING;
  for (CUresult r : {CUDA_ERROR_NOT_SUPPORTED, CUDA_ERROR_NOT_FOUND}) {
    FakeCheckpoint::refuse_with = r;
    try {
      Process(5).lock(10);
      FAIL();
    } catch (const FeatureUnavailableError& e) {
      std::string what = e.what();
      EXPECT_NE(what.find("CUDA checkpointing"), std::string::npos) << what;
      EXPECT_NE(what.find(result_name(r)), std::string::npos) << what;
      EXPECT_NE(what.find("cuCheckpointProcessLock"), std::string::npos) << what;
      EXPECT_NE(what.find("12.8"), std::string::npos) << what;
    }
  }
}

TEST_F(Checkpoint, ADriverOlderThan12_8IsAFeatureErrorNamingTheVersion) {
  fake_.table.cuCheckpointProcessLock = nullptr;
  try {
    Process(5).lock();
    FAIL();
  } catch (const FeatureUnavailableError& e) {
    EXPECT_EQ(e.requirement(), "CUDA driver 12.8");
    EXPECT_NE(std::string(e.what()).find("cuCheckpointProcessLock"), std::string::npos) << e.what();
  }
  fake_.table.version = 12060;  // the entry points present, the driver too old
  EXPECT_THROW((void)Process(5).state(), FeatureUnavailableError);
  EXPECT_TRUE(FakeCheckpoint::calls.empty()) << "an old driver was called";
}

}  // namespace
