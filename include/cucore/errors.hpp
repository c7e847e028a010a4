#pragma once
// The exceptions cucore throws. Every failure is one of these (or a standard
// std::invalid_argument / std::out_of_range for bad arguments, ClosedError
// among them); no cucore call reports failure through a return code.
#include <cuda.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace cucore {

// Base of every cucore error.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A driver call failed: the CUresult, its name and description, and the call.
class CudaError : public Error {
 public:
  CudaError(CUresult code, std::string call);
  CUresult code() const noexcept { return code_; }
  const std::string& name() const noexcept { return name_; }          // "CUDA_ERROR_OUT_OF_MEMORY"
  const std::string& description() const noexcept { return description_; }
  const std::string& call() const noexcept { return call_; }          // "cuMemAllocFromPoolAsync"

 private:
  CUresult code_;
  std::string name_, description_, call_;
};

// A shared library cucore needs could not be loaded.
class LibraryNotFoundError : public Error {
 public:
  LibraryNotFoundError(std::string component, std::vector<std::string> searched, std::string hint = {});
  const std::string& component() const noexcept { return component_; }  // "libcuda", "nvrtc", ...
  const std::vector<std::string>& searched() const noexcept { return searched_; }

 private:
  std::string component_;
  std::vector<std::string> searched_;
};

// The loaded driver (or library) is too old, or the device lacks, a feature.
class FeatureUnavailableError : public Error {
 public:
  FeatureUnavailableError(std::string feature, std::string requirement);
  const std::string& feature() const noexcept { return feature_; }
  const std::string& requirement() const noexcept { return requirement_; }  // "CUDA driver 12.4"

 private:
  std::string feature_, requirement_;
};

// NVRTC or the linker rejected the input; log() is the whole compiler log.
class CompileError : public Error {
 public:
  CompileError(std::string message, std::string log);
  const std::string& log() const noexcept { return log_; }

 private:
  std::string log_;
};

// An object was used after close() or after it was moved from (a Stream,
// Event, Buffer, or a closed Buffer passed to launch). Closed is one state,
// distinct from every real handle, and every use of it throws this, naming
// the object and the operation: "Stream has been closed (sync)". It is a
// std::invalid_argument (the closed object is the bad argument); Python sees
// cucore.ClosedError, a RuntimeError as cuda.core raises for closed objects.
class ClosedError : public std::invalid_argument {
 public:
  ClosedError(std::string object, std::string operation);
  const std::string& object() const noexcept { return object_; }        // "Stream"
  const std::string& operation() const noexcept { return operation_; }  // "sync"

 private:
  std::string object_, operation_;
};

// Name and description of a CUresult without needing the driver (CPU machines,
// fake driver tables); falls back to the loaded driver for codes newer than cucore.
const char* result_name(CUresult code) noexcept;
const char* result_description(CUresult code) noexcept;

namespace detail {
[[noreturn]] void throw_cuda_error(CUresult code, const char* call);
[[noreturn]] void throw_closed(const char* object, const char* operation);
// The hot-path check: one compare inline, the throw out of line.
inline void check(CUresult code, const char* call) {
  if (code != CUDA_SUCCESS) [[unlikely]]
    throw_cuda_error(code, call);
}
}  // namespace detail

}  // namespace cucore
