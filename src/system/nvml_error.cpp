// NvmlError: NVML's return code, named as nvml.h names it, with NVML's own
// text when a library is loaded (and cucore's otherwise, e.g. for nvmlInit);
// and the thread's UnsupportedAsError scopes.
#include <cucore/system.hpp>

#include <string>

#include "system/nvml_call.hpp"

namespace cucore {
namespace {

struct ReturnEntry {
  int code;
  const char* name;
  const char* text;
};

constexpr ReturnEntry kReturns[] = {
#define CUCORE_NVML_RETURN(code, constant, text, py_class, py_base, doc) {code, "NVML_" #constant, text},
#include "loader/nvml_returns.inc"
#undef CUCORE_NVML_RETURN
};

const ReturnEntry* find_return(int code) noexcept {
  for (const auto& e : kReturns)
    if (e.code == code) return &e;
  return nullptr;
}

std::string describe(int code) {
  if (const char* s = detail::nvml_error_string(code); s && *s) return s;
  if (const auto* e = find_return(code)) return e->text;
  return "unrecognized nvmlReturn_t";
}

}  // namespace

NvmlError::NvmlError(int code, std::string call)
    : RuntimeError(call + " failed: " + (find_return(code) ? find_return(code)->name : "NVML_ERROR_UNKNOWN_CODE") + " (" +
            std::to_string(code) + "): " + describe(code)),
      code_(code),
      name_(find_return(code) ? find_return(code)->name : "NVML_ERROR_UNKNOWN_CODE"),
      description_(describe(code)),
      call_(std::move(call)) {}

namespace {
// UnsupportedAsError scopes alive on this thread (they nest).
thread_local unsigned t_unsupported_as_error = 0;
}  // namespace

system::UnsupportedAsError::UnsupportedAsError() noexcept { ++t_unsupported_as_error; }
system::UnsupportedAsError::~UnsupportedAsError() { --t_unsupported_as_error; }

namespace detail {
bool unsupported_is_error() noexcept { return t_unsupported_as_error != 0; }

void throw_nvml_error(nvml::Return r, const char* call) { throw NvmlError(r, call); }

// The NVML of an older driver lacks the entry point: NVML's own code for that.
void throw_nvml_missing(const char* call) { throw NvmlError(nvml::ERROR_FUNCTION_NOT_FOUND, call); }

const NvmlTable& load_nvml_for_system() {
  try {
    return load_nvml();
  } catch (const NvmlInitFailure& e) {
    throw NvmlError(e.code, "nvmlInit_v2");
  }
}
}  // namespace detail

}  // namespace cucore
