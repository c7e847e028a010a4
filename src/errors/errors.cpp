#include <cucore/errors.hpp>

#include <mutex>
#include <string>

#include "loader/driver.hpp"

namespace cucore {
namespace detail {
void note_capture_breaking_call(const char* message) noexcept;
std::string last_capture_breaking_call();
}  // namespace detail
namespace {

struct ResultEntry {
  CUresult code;
  const char* name;
  const char* description;
};

constexpr ResultEntry kResults[] = {
#define X(name, value, text) {static_cast<CUresult>(value), #name, text},
#include "errors/result_names.inc"
#undef X
};

const ResultEntry* find_result(CUresult code) noexcept {
  for (const auto& e : kResults)
    if (e.code == code) return &e;
  return nullptr;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += "\n  " + s;
  return out;
}

}  // namespace

const char* result_name(CUresult code) noexcept {
  if (const auto* e = find_result(code)) return e->name;
  // A code newer than cucore's table: ask the driver, if one is loaded.
  if (const auto* t = detail::g_driver.load(std::memory_order_acquire); t && t->cuGetErrorName) {
    const char* s = nullptr;
    if (t->cuGetErrorName(code, &s) == CUDA_SUCCESS && s) return s;
  }
  return "CUDA_ERROR_UNKNOWN_CODE";
}

const char* result_description(CUresult code) noexcept {
  if (const auto* e = find_result(code)) return e->description;
  if (const auto* t = detail::g_driver.load(std::memory_order_acquire); t && t->cuGetErrorString) {
    const char* s = nullptr;
    if (t->cuGetErrorString(code, &s) == CUDA_SUCCESS && s) return s;
  }
  return "unrecognized CUresult";
}

CudaError::CudaError(CUresult code, std::string call)
    : Error(call + " failed: " + result_name(code) + " (" + std::to_string(static_cast<int>(code)) + "): " +
            result_description(code)),
      code_(code),
      name_(result_name(code)),
      description_(result_description(code)),
      call_(std::move(call)) {
  if (code == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED || code == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT ||
      code == CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD || code == CUDA_ERROR_STREAM_CAPTURE_ISOLATION)
    detail::note_capture_breaking_call(what());
}

LibraryNotFoundError::LibraryNotFoundError(std::string component, std::vector<std::string> searched, std::string hint)
    : Error(component + " could not be loaded; searched:" + join(searched) + (hint.empty() ? "" : "\nhint: " + hint)),
      component_(std::move(component)),
      searched_(std::move(searched)) {}

FeatureUnavailableError::FeatureUnavailableError(std::string feature, std::string requirement)
    : Error(feature + " is unavailable: it needs " + requirement),
      feature_(std::move(feature)),
      requirement_(std::move(requirement)) {}

ClosedError::ClosedError(std::string object, std::string operation)
    : std::invalid_argument(object + " has been closed (" + operation + ")"),
      object_(std::move(object)),
      operation_(std::move(operation)) {}

CompileError::CompileError(std::string message, std::string log) : Error(std::move(message)), log_(std::move(log)) {}

namespace detail {

// A capture broken by a call it does not allow is only reported when it ends
// (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED), perhaps on another thread: the
// breaking call's error is kept for that report (GraphBuilder::end_building).
namespace {
std::mutex g_capture_mutex;
std::string g_capture_breaking_call;
}  // namespace

void note_capture_breaking_call(const char* message) noexcept {
  try {
    std::lock_guard lock(g_capture_mutex);
    g_capture_breaking_call = message;
  } catch (...) {
  }
}

std::string last_capture_breaking_call() {
  std::lock_guard lock(g_capture_mutex);
  return g_capture_breaking_call;
}
void throw_cuda_error(CUresult code, const char* call) { throw CudaError(code, call); }
void throw_closed(const char* object, const char* operation) { throw ClosedError(object, operation); }
}  // namespace detail

}  // namespace cucore
