// NvmlError: NVML's return code, named as nvml.h names it, with NVML's own
// text when a library is loaded (and cucore's otherwise, e.g. for nvmlInit).
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
    {0, "NVML_SUCCESS", "Success"},
    {1, "NVML_ERROR_UNINITIALIZED", "Uninitialized"},
    {2, "NVML_ERROR_INVALID_ARGUMENT", "Invalid Argument"},
    {3, "NVML_ERROR_NOT_SUPPORTED", "Not Supported"},
    {4, "NVML_ERROR_NO_PERMISSION", "Insufficient Permissions"},
    {5, "NVML_ERROR_ALREADY_INITIALIZED", "Already Initialized"},
    {6, "NVML_ERROR_NOT_FOUND", "Not Found"},
    {7, "NVML_ERROR_INSUFFICIENT_SIZE", "Insufficient Size"},
    {8, "NVML_ERROR_INSUFFICIENT_POWER", "Insufficient External Power"},
    {9, "NVML_ERROR_DRIVER_NOT_LOADED", "Driver Not Loaded"},
    {10, "NVML_ERROR_TIMEOUT", "Timeout"},
    {11, "NVML_ERROR_IRQ_ISSUE", "Interrupt Request Issue"},
    {12, "NVML_ERROR_LIBRARY_NOT_FOUND", "NVML Shared Library Not Found"},
    {13, "NVML_ERROR_FUNCTION_NOT_FOUND", "Function Not Found"},
    {14, "NVML_ERROR_CORRUPTED_INFOROM", "Corrupted infoROM"},
    {15, "NVML_ERROR_GPU_IS_LOST", "GPU is lost"},
    {16, "NVML_ERROR_RESET_REQUIRED", "GPU requires restart"},
    {17, "NVML_ERROR_OPERATING_SYSTEM", "The operating system has blocked the request"},
    {18, "NVML_ERROR_LIB_RM_VERSION_MISMATCH", "RM has detected an NVML/RM version mismatch"},
    {19, "NVML_ERROR_IN_USE", "In use"},
    {20, "NVML_ERROR_MEMORY", "Insufficient Memory"},
    {21, "NVML_ERROR_NO_DATA", "No data"},
    {22, "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED", "vGPU ECC Not Supported"},
    {23, "NVML_ERROR_INSUFFICIENT_RESOURCES", "Insufficient Resources"},
    {24, "NVML_ERROR_FREQ_NOT_SUPPORTED", "Frequency not supported"},
    {25, "NVML_ERROR_ARGUMENT_VERSION_MISMATCH", "Argument Version Mismatch"},
    {26, "NVML_ERROR_DEPRECATED", "Deprecated"},
    {27, "NVML_ERROR_NOT_READY", "Not Ready"},
    {28, "NVML_ERROR_GPU_NOT_FOUND", "GPU not found"},
    {29, "NVML_ERROR_INVALID_STATE", "Invalid State"},
    {30, "NVML_ERROR_RESET_TYPE_NOT_SUPPORTED", "Reset Type Not Supported"},
    {999, "NVML_ERROR_UNKNOWN", "Unknown Error"},
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
    : Error(call + " failed: " + (find_return(code) ? find_return(code)->name : "NVML_ERROR_UNKNOWN_CODE") + " (" +
            std::to_string(code) + "): " + describe(code)),
      code_(code),
      name_(find_return(code) ? find_return(code)->name : "NVML_ERROR_UNKNOWN_CODE"),
      description_(describe(code)),
      call_(std::move(call)) {}

namespace detail {
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
