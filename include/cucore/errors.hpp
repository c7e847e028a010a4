#pragma once
// The exceptions cucore throws: every one is a cucore::Error, so
// `catch (const cucore::Error&)` catches whatever cucore throws, and each is
// also the standard exception its kind is (by multiple inheritance, one
// std::exception base each), so `catch (const std::invalid_argument&)` or
// `catch (const std::exception&)` keep working. No cucore call reports failure
// through a return code.
//
//   class                    standard base          thrown for                                Python
//   RuntimeError             std::runtime_error     a failure with no class of its own        cucore.Error
//     CudaError                                     a driver call's CUresult                  cucore.CudaError
//       checkpoint::StateError                      a process in the wrong checkpoint state   cucore.CudaError
//     CompileError                                  NVRTC or the linker rejected the input    cucore.CompileError
//     LibraryNotFoundError                          libcuda, NVRTC, nvJitLink, NVML missing   cucore.LibraryNotFoundError
//     FeatureUnavailableError                       the driver or device lacks a feature      cucore.FeatureUnavailableError
//     IpcError                                      what IPC cannot do (ipc.hpp)              cucore.Error
//       MappedResourceError                         allocating from a mapped resource         TypeError
//     NvmlError                                     an NVML call's return code (system.hpp)   cucore.system.NvmlError
//   SystemError              std::system_error      an OS call's errno                        OSError (by errno)
//   InvalidArgumentError     std::invalid_argument  a bad argument, named in the message      ValueError
//     ClosedError                                   an object used after close() or a move    cucore.ClosedError
//     detail::FileError                             a path that cannot be read or written     ValueError
//   OutOfRangeError          std::out_of_range      an index or offset past the end           IndexError
//   OverflowError            std::overflow_error    sizes whose arithmetic leaves 64 bits     OverflowError
//   LogicError               std::logic_error       an empty object used (no resource yet)    RuntimeError
//
// tests/cpu/test_errors.cpp checks that libcucore throws nothing else (no
// `throw std::...` under src/ and include/), src/errors/error_classes.inc
// lists every class for the Python module.
#include <cuda.h>

#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace cucore {

// The root of every cucore error; what() is the standard base's message.
class Error {
 public:
  virtual ~Error() = default;
  virtual const char* what() const noexcept = 0;

 protected:
  Error() = default;
  Error(const Error&) = default;
  Error& operator=(const Error&) = default;
};

class RuntimeError : public std::runtime_error, public Error {
 public:
  using std::runtime_error::runtime_error;
  const char* what() const noexcept override { return std::runtime_error::what(); }
};
class InvalidArgumentError : public std::invalid_argument, public Error {
 public:
  using std::invalid_argument::invalid_argument;
  const char* what() const noexcept override { return std::invalid_argument::what(); }
};
class OutOfRangeError : public std::out_of_range, public Error {
 public:
  using std::out_of_range::out_of_range;
  const char* what() const noexcept override { return std::out_of_range::what(); }
};
class OverflowError : public std::overflow_error, public Error {
 public:
  using std::overflow_error::overflow_error;
  const char* what() const noexcept override { return std::overflow_error::what(); }
};
class LogicError : public std::logic_error, public Error {
 public:
  using std::logic_error::logic_error;
  const char* what() const noexcept override { return std::logic_error::what(); }
};
class SystemError : public std::system_error, public Error {
 public:
  using std::system_error::system_error;
  const char* what() const noexcept override { return std::system_error::what(); }
};

// A driver call failed: the CUresult, its name and description, and the call.
class CudaError : public RuntimeError {
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
class LibraryNotFoundError : public RuntimeError {
 public:
  LibraryNotFoundError(std::string component, std::vector<std::string> searched, std::string hint = {});
  const std::string& component() const noexcept { return component_; }  // "libcuda", "nvrtc", ...
  const std::vector<std::string>& searched() const noexcept { return searched_; }

 private:
  std::string component_;
  std::vector<std::string> searched_;
};

// The loaded driver (or library) is too old, or the device lacks, a feature.
class FeatureUnavailableError : public RuntimeError {
 public:
  FeatureUnavailableError(std::string feature, std::string requirement);
  const std::string& feature() const noexcept { return feature_; }
  const std::string& requirement() const noexcept { return requirement_; }  // "CUDA driver 12.4"

 private:
  std::string feature_, requirement_;
};

// NVRTC or the linker rejected the input; log() is the whole compiler log.
class CompileError : public RuntimeError {
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
class ClosedError : public InvalidArgumentError {
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
