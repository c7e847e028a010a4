#include <cucore/errors.hpp>

#include <atomic>
#include <mutex>
#include <string>

#include "errors/result_lookup.hpp"

namespace cucore {
namespace detail {
void note_capture_breaking_call(const char* message) noexcept;
std::string last_capture_breaking_call();
}  // namespace detail
namespace {

std::atomic<detail::ResultLookup> g_name_lookup{nullptr}, g_description_lookup{nullptr};

const char* look_up(const std::atomic<detail::ResultLookup>& lookup, CUresult code) noexcept {
  const char* s = nullptr;
  if (auto fn = lookup.load(std::memory_order_acquire); fn && fn(code, &s) == CUDA_SUCCESS) return s;
  return nullptr;
}

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

namespace detail {
void set_result_lookup(ResultLookup name, ResultLookup description) noexcept {
  g_name_lookup.store(name, std::memory_order_release);
  g_description_lookup.store(description, std::memory_order_release);
}
}  // namespace detail

const char* result_name(CUresult code) noexcept {
  if (const auto* e = find_result(code)) return e->name;
  // A code newer than cucore's table: ask the driver, if one is loaded.
  if (const char* s = look_up(g_name_lookup, code)) return s;
  return "CUDA_ERROR_UNKNOWN_CODE";
}

const char* result_description(CUresult code) noexcept {
  if (const auto* e = find_result(code)) return e->description;
  if (const char* s = look_up(g_description_lookup, code)) return s;
  return "unrecognized CUresult";
}

CudaError::CudaError(CUresult code, std::string call)
    : RuntimeError(call + " failed: " + result_name(code) + " (" + std::to_string(static_cast<int>(code)) + "): " +
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
    : RuntimeError(component + " could not be loaded; searched:" + join(searched) + (hint.empty() ? "" : "\nhint: " + hint)),
      component_(std::move(component)),
      searched_(std::move(searched)) {}

FeatureUnavailableError::FeatureUnavailableError(std::string feature, std::string requirement)
    : RuntimeError(feature + " is unavailable: it needs " + requirement),
      feature_(std::move(feature)),
      requirement_(std::move(requirement)) {}

ClosedError::ClosedError(std::string object, std::string operation)
    : InvalidArgumentError(object + " has been closed (" + operation + ")"),
      object_(std::move(object)),
      operation_(std::move(operation)) {}

CompileError::CompileError(std::string message, std::string log) : RuntimeError(std::move(message)), log_(std::move(log)) {}

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
