#pragma once
// What the batched memory calls share: the driver's batched entry points take
// any stream but the legacy NULL stream.
#include <cucore/stream.hpp>

#include <stdexcept>
#include <string>

namespace cucore::detail {

inline void refuse_legacy_stream(StreamRef stream, const char* what) {
  if (stream.handle() == nullptr || stream.handle() == CU_STREAM_LEGACY)
    throw InvalidArgumentError(std::string(what) +
                                ": the legacy default stream is refused by the driver's batched calls; use a Stream "
                                "or the per-thread default stream");
}

}  // namespace cucore::detail
