// cucore::checkpoint::Process over the driver's cuCheckpointProcess* entry points.
#include <cucore/checkpoint.hpp>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "loader/driver.hpp"

namespace cucore::checkpoint {

const char* to_string(ProcessState state) noexcept {
  switch (state) {
    case ProcessState::running: return "running";
    case ProcessState::locked: return "locked";
    case ProcessState::checkpointed: return "checkpointed";
    case ProcessState::failed: return "failed";
  }
  return "unknown";
}

StateError::StateError(std::string call, std::string message, std::optional<ProcessState> state)
    : CudaError(CUDA_ERROR_ILLEGAL_STATE, std::move(call)), message_(std::move(message)), state_(state) {}

namespace {

constexpr int kCheckpointDriver = 12080;

// The table, once it is known to have `fn` (one of the cuCheckpointProcess* entry points).
template <typename Fn>
Fn need(Fn fn, const char* name) {
  detail::require(reinterpret_cast<const void*>(fn), kCheckpointDriver, name);
  return fn;
}

// The driver's state as an int, read without loading it as the enum: a value
// outside CUprocessState's range (a newer driver's) is not undefined behaviour.
int raw_state(const CUprocessState& s) noexcept {
  static_assert(sizeof(int) == sizeof(CUprocessState));
  int v = 0;
  std::memcpy(&v, &s, sizeof v);
  return v;
}

std::optional<ProcessState> state_from(int value) {
  switch (value) {
    case CU_PROCESS_STATE_RUNNING: return ProcessState::running;
    case CU_PROCESS_STATE_LOCKED: return ProcessState::locked;
    case CU_PROCESS_STATE_CHECKPOINTED: return ProcessState::checkpointed;
    case CU_PROCESS_STATE_FAILED: return ProcessState::failed;
    default: return std::nullopt;
  }
}

// What takes a process from `from` to `to`, for error messages.
std::string way(ProcessState from, ProcessState to) {
  using S = ProcessState;
  if (from == S::failed) return "it failed during a checkpoint or restore and cannot go on";
  if (from == S::running) return to == S::locked ? "call lock() first" : "call lock() and checkpoint() first";
  if (from == S::locked) return to == S::running ? "call unlock() first" : "call checkpoint() first";
  return to == S::locked ? "call restore() first" : "call restore() and unlock() first";  // checkpointed
}

// Throws for a failed call of `entry`, made by `step` (which needs the process `needs`).
[[noreturn]] void fail(CUresult r, const char* entry, int pid, const char* step, std::optional<ProcessState> needs) {
  std::string where = "checkpoint::Process(" + std::to_string(pid) + ")." + step + "()";
  if (r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_NOT_FOUND)
    throw FeatureUnavailableError("CUDA checkpointing (" + where + ": " + entry + " returned " + result_name(r) + ", " +
                                      result_description(r) + ")",
                                  "a driver and platform that support it (CUDA driver 12.8 or newer, on a machine or "
                                  "virtual machine that allows checkpointing)");
  if (r == CUDA_ERROR_ILLEGAL_STATE && needs) {
    std::optional<ProcessState> now;
    CUprocessState s{};
    if (auto get = detail::driver().cuCheckpointProcessGetState; get && get(pid, &s) == CUDA_SUCCESS) now = state_from(raw_state(s));
    std::string msg = where + ": the process is " + (now ? to_string(*now) : "in a state the driver would not say") +
                      ", and " + step + "() needs it " + to_string(*needs);
    if (now && *now != *needs) msg += ": " + way(*now, *needs);
    msg += std::string(" (") + entry + ": " + result_name(r) + ")";
    throw StateError(entry, std::move(msg), now);
  }
  detail::throw_cuda_error(r, (std::string(entry) + " (" + where + ")").c_str());
}

}  // namespace

Process::Process(int pid) : pid_(pid) {
  if (pid <= 0) throw InvalidArgumentError("checkpoint::Process: pid must be a positive int, got " + std::to_string(pid));
}

ProcessState Process::state() const {
  auto fn = need(detail::driver().cuCheckpointProcessGetState, "CUDA checkpointing (cuCheckpointProcessGetState)");
  CUprocessState s{};
  if (CUresult r = fn(pid_, &s); r != CUDA_SUCCESS) fail(r, "cuCheckpointProcessGetState", pid_, "state", {});
  auto state = state_from(raw_state(s));
  if (!state) throw RuntimeError("Unknown CUDA checkpoint process state: " + std::to_string(raw_state(s)));
  return *state;
}

int Process::restore_thread_id() const {
  auto fn = need(detail::driver().cuCheckpointProcessGetRestoreThreadId, "CUDA checkpointing (cuCheckpointProcessGetRestoreThreadId)");
  int tid = 0;
  if (CUresult r = fn(pid_, &tid); r != CUDA_SUCCESS)
    fail(r, "cuCheckpointProcessGetRestoreThreadId", pid_, "restore_thread_id", {});
  return tid;
}

void Process::lock(unsigned timeout_ms) const {
  auto fn = need(detail::driver().cuCheckpointProcessLock, "CUDA checkpointing (cuCheckpointProcessLock)");
  CUcheckpointLockArgs args{};
  args.timeoutMs = timeout_ms;
  if (CUresult r = fn(pid_, &args); r != CUDA_SUCCESS)
    fail(r, "cuCheckpointProcessLock", pid_, "lock", ProcessState::running);
}

void Process::checkpoint() const {
  auto fn = need(detail::driver().cuCheckpointProcessCheckpoint, "CUDA checkpointing (cuCheckpointProcessCheckpoint)");
  if (CUresult r = fn(pid_, nullptr); r != CUDA_SUCCESS)
    fail(r, "cuCheckpointProcessCheckpoint", pid_, "checkpoint", ProcessState::locked);
}

void Process::restore(const std::map<GpuUuid, GpuUuid>& gpu_mapping) const {
  auto fn = need(detail::driver().cuCheckpointProcessRestore, "CUDA checkpointing (cuCheckpointProcessRestore)");
  std::vector<CUcheckpointGpuPair> pairs;
  pairs.reserve(gpu_mapping.size());
  for (const auto& [from, to] : gpu_mapping) {
    CUcheckpointGpuPair p{};
    std::copy(from.begin(), from.end(), reinterpret_cast<unsigned char*>(p.oldUuid.bytes));
    std::copy(to.begin(), to.end(), reinterpret_cast<unsigned char*>(p.newUuid.bytes));
    pairs.push_back(p);
  }
  CUcheckpointRestoreArgs args{};
  args.gpuPairs = pairs.data();
  args.gpuPairsCount = static_cast<unsigned>(pairs.size());
  // No mapping: no arguments at all, as cuda.core passes.
  if (CUresult r = fn(pid_, pairs.empty() ? nullptr : &args); r != CUDA_SUCCESS)
    fail(r, "cuCheckpointProcessRestore", pid_, "restore", ProcessState::checkpointed);
}

void Process::unlock() const {
  auto fn = need(detail::driver().cuCheckpointProcessUnlock, "CUDA checkpointing (cuCheckpointProcessUnlock)");
  if (CUresult r = fn(pid_, nullptr); r != CUDA_SUCCESS)
    fail(r, "cuCheckpointProcessUnlock", pid_, "unlock", ProcessState::locked);
}

}  // namespace cucore::checkpoint
