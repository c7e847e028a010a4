#pragma once
// Driver calls on a stream run in the stream's context, except on the legacy
// and per-thread default streams, which use the current context. Where none is
// current, cucore's convention (as the runtime API's) is device 0's primary
// context. The guard also refuses a closed stream. Both cost one compare on
// the handle; only the special streams pay for a cuCtxGetCurrent.
#include <cucore/context.hpp>
#include <cucore/stream.hpp>

namespace cucore::detail {

inline bool is_special_stream(CUstream s) noexcept {
  return s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

// Makes device 0's primary context current for a special stream when nothing is.
void ensure_current_context_slow();
// The slow side of StreamContextGuard: a closed stream throws, a special one
// gets a current context.
void special_or_closed_stream(CUstream s, const char* operation);

class StreamContextGuard {
 public:
  StreamContextGuard(StreamRef stream, const char* operation) {
    if (is_special_or_closed(stream.handle())) [[unlikely]]
      special_or_closed_stream(stream.handle(), operation);
  }
};

}  // namespace cucore::detail
