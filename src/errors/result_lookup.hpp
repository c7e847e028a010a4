#pragma once
// The driver's own names and texts for a CUresult newer than cucore's table.
// errors/ stands below the loader, so the loader hands it the lookup (the
// driver's cuGetErrorName / cuGetErrorString through the table in force);
// until then such a code is named CUDA_ERROR_UNKNOWN_CODE.
#include <cuda.h>

namespace cucore::detail {

using ResultLookup = CUresult (*)(CUresult code, const char** text) noexcept;
void set_result_lookup(ResultLookup name, ResultLookup description) noexcept;

}  // namespace cucore::detail
