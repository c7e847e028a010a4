#pragma once
// Reporting a release that failed where nothing can throw (a box's destructor
// destroying a stream, freeing memory, unloading a library): through the log
// hook as LogLevel::release_failure (cucore/log.hpp). Never throws.
#include <cuda.h>

#include <string>

namespace cucore::detail {

// "<call> failed: <name> (<description>)"; nothing for CUDA_SUCCESS or
// CUDA_ERROR_DEINITIALIZED (the driver shutting down takes its resources).
void report_release(CUresult code, const char* call) noexcept;
// A failure described by the caller (a memory resource's deallocate that threw).
void report_release(const std::string& message) noexcept;

}  // namespace cucore::detail
