#pragma once
// Batched copies, as cuda.core's copy_batch: many buffer-to-buffer copies in
// one cuMemcpyBatchAsync (CUDA 12.8+ drivers), executed in stream order as a
// whole and in any order within the batch (so no copy may read what another
// writes). Equal neighbouring options go to the driver once.
#include <optional>
#include <span>

#include <cucore/buffer.hpp>
#include <cucore/location.hpp>
#include <cucore/stream.hpp>

namespace cucore {

enum class MemcpySrcAccessOrder { stream, during_api_call, any };
enum class MemcpyOverlapMode { default_mode, prefer_overlap_with_compute };

struct CopyOptions {
  MemcpySrcAccessOrder src_access_order = MemcpySrcAccessOrder::stream;
  std::optional<Location> src_location_hint{};  // honoured for managed and pageable memory only
  std::optional<Location> dst_location_hint{};
  MemcpyOverlapMode overlap_mode = MemcpyOverlapMode::default_mode;
  friend bool operator==(const CopyOptions&, const CopyOptions&) = default;
};

// srcs[i] -> dsts[i], sizes equal (std::invalid_argument naming the index
// otherwise). `options`: empty (defaults), one for all, or one per copy.
// The legacy default stream is refused (the driver rejects it); use a Stream or
// the per-thread default stream.
void copy_batch(StreamRef stream, std::span<const Buffer* const> srcs, std::span<Buffer* const> dsts,
                std::span<const CopyOptions> options = {});

}  // namespace cucore
