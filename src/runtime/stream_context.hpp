#pragma once
// Driver calls on a stream run in the stream's context, except on the legacy
// and per-thread default streams, which use the current context. Where none is
// current, cucore's convention (as the runtime API's) is device 0's primary
// context. The check is a compare on the handle; only those special streams
// pay for a cuCtxGetCurrent.
#include <cucore/context.hpp>
#include <cucore/stream.hpp>

#include <optional>

namespace cucore::detail {

inline bool is_special_stream(CUstream s) noexcept {
  return s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

// Makes device 0's primary context current for a special stream when nothing is.
void ensure_current_context_slow();

class StreamContextGuard {
 public:
  explicit StreamContextGuard(StreamRef stream) {
    if (is_special_stream(stream.handle())) [[unlikely]]
      ensure_current_context_slow();
  }
};

}  // namespace cucore::detail
