#include <cucore/copy_batch.hpp>

#include <cucore/errors.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "loader/driver.hpp"
#include "memory/batch_common.hpp"
#include "runtime/stream_context.hpp"

namespace cucore {

using detail::check;
using detail::driver;

namespace {

CUmemcpyAttributes to_driver(const CopyOptions& o) {
  CUmemcpyAttributes a{};
  switch (o.src_access_order) {
    case MemcpySrcAccessOrder::stream: a.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM; break;
    case MemcpySrcAccessOrder::during_api_call: a.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL; break;
    case MemcpySrcAccessOrder::any: a.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_ANY; break;
  }
  // No hint: an invalid location, which the driver ignores.
  if (o.src_location_hint) a.srcLocHint = o.src_location_hint->to_driver();
  if (o.dst_location_hint) a.dstLocHint = o.dst_location_hint->to_driver();
  a.flags = o.overlap_mode == MemcpyOverlapMode::prefer_overlap_with_compute ? CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE
                                                                               : CU_MEMCPY_FLAG_DEFAULT;
  return a;
}

}  // namespace

void copy_batch(StreamRef stream, std::span<const Buffer* const> srcs, std::span<Buffer* const> dsts,
                std::span<const CopyOptions> options) {
  const std::size_t n = srcs.size();
  if (dsts.size() != n)
    throw InvalidArgumentError("copy_batch: " + std::to_string(n) + " sources but " + std::to_string(dsts.size()) +
                                " destinations");
  if (!options.empty() && options.size() != 1 && options.size() != n)
    throw InvalidArgumentError("copy_batch: " + std::to_string(options.size()) + " options for " + std::to_string(n) +
                                " copies (give none, one for all, or one per copy)");
  detail::refuse_legacy_stream(stream, "copy_batch");
  std::vector<CUdeviceptr> src_ptrs(n), dst_ptrs(n);
  std::vector<std::size_t> sizes(n);
  for (std::size_t i = 0; i < n; ++i) {
    const Buffer* s = srcs[i];
    const Buffer* d = dsts[i];
    if (!s || s->is_closed()) throw InvalidArgumentError("copy_batch: source " + std::to_string(i) + " is closed");
    if (!d || d->is_closed())
      throw InvalidArgumentError("copy_batch: destination " + std::to_string(i) + " is closed");
    if (s->size() != d->size())
      throw InvalidArgumentError("copy_batch: copy " + std::to_string(i) + ": the source has " +
                                  std::to_string(s->size()) + " bytes, the destination " + std::to_string(d->size()));
    src_ptrs[i] = s->handle();
    dst_ptrs[i] = d->handle();
    sizes[i] = s->size();
  }
  if (n == 0) return;
  // Runs of equal options: attrs[k] applies from starts[k] to the next start.
  std::vector<CUmemcpyAttributes> attrs;
  std::vector<std::size_t> starts;
  const CopyOptions defaults;
  for (std::size_t i = 0; i < (options.size() == n ? n : 1); ++i) {
    const CopyOptions& o = options.empty() ? defaults : options[i];
    if (i == 0 || !(o == options[i - 1])) {
      attrs.push_back(to_driver(o));
      starts.push_back(i);
    }
  }
  const auto& d = driver();
  detail::require(reinterpret_cast<const void*>(d.cuMemcpyBatchAsync), 13000, "copy_batch (cuMemcpyBatchAsync)");
  detail::StreamContextGuard guard(stream, "copy_batch");
  check(d.cuMemcpyBatchAsync(dst_ptrs.data(), src_ptrs.data(), sizes.data(), n, attrs.data(), starts.data(),
                             attrs.size(), stream.handle()),
        "cuMemcpyBatchAsync");
}

}  // namespace cucore
