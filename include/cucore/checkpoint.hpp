#pragma once
// Process checkpointing (Linux, CUDA driver 12.8+): lock a CUDA process so its
// CUDA calls block, checkpoint it (its device memory is copied to host memory
// and released on the GPU), restore it (onto the same GPUs, or remapped ones),
// unlock it. The usual caller is another process (a checkpoint tool, a
// scheduler) naming the target by pid; a process may also name itself.
//
//   running --lock--> locked --checkpoint--> checkpointed --restore--> locked --unlock--> running
//
// cuda.core's checkpoint.Process; docs/ipc.md has the details.
#include <cuda.h>

#include <array>
#include <map>
#include <optional>
#include <string>

#include <cucore/errors.hpp>

namespace cucore::checkpoint {

enum class ProcessState { running, locked, checkpointed, failed };
const char* to_string(ProcessState state) noexcept;  // "running", "locked", "checkpointed", "failed"

// A GPU's UUID as the driver gives it (Device::uuid()).
using GpuUuid = std::array<unsigned char, 16>;

// A step the process's state forbids (the driver's CUDA_ERROR_ILLEGAL_STATE):
// says the state the process is in and what the step needs.
class StateError : public CudaError {
 public:
  StateError(std::string call, std::string message, std::optional<ProcessState> state);
  const char* what() const noexcept override { return message_.c_str(); }
  std::optional<ProcessState> state() const noexcept { return state_; }  // empty when it could not be read

 private:
  std::string message_;
  std::optional<ProcessState> state_;
};

// A CUDA process by pid. Each call is one driver call; a driver without the
// checkpoint API (older than 12.8), or a platform that refuses it
// (CUDA_ERROR_NOT_SUPPORTED, as some virtual machines do), throws
// FeatureUnavailableError naming what the driver said.
class Process {
 public:
  explicit Process(int pid);  // std::invalid_argument unless pid > 0
  int pid() const noexcept { return pid_; }

  ProcessState state() const;
  int restore_thread_id() const;  // the process's CUDA restore thread (a CPU checkpointer's concern)
  // Blocks the process's further CUDA calls. timeout_ms 0 waits without limit;
  // when the timeout passes the process stays running (CudaError).
  void lock(unsigned timeout_ms = 0) const;
  void checkpoint() const;
  // `gpu_mapping` remaps each checkpointed GPU (by UUID) to the GPU to restore
  // onto, the same chip with room enough; when given it must name every
  // checkpointed GPU. Leaves the process locked.
  void restore(const std::map<GpuUuid, GpuUuid>& gpu_mapping = {}) const;
  void unlock() const;

 private:
  int pid_;
};

}  // namespace cucore::checkpoint
