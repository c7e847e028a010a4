#include <cucore/managed.hpp>

#include <cucore/context.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>

#include <stdexcept>
#include <string>

#include "loader/driver.hpp"
#include "memory/batch_common.hpp"
#include "runtime/device_state.hpp"
#include "runtime/stream_context.hpp"

namespace cucore {

using detail::check;
using detail::driver;

Location Location::device(const Device& device) noexcept { return {Kind::device, device.ordinal()}; }

CUmemLocation Location::to_driver() const noexcept {
  CUmemLocation l{};
  switch (kind) {
    case Kind::device: l.type = CU_MEM_LOCATION_TYPE_DEVICE; l.id = id; break;
    case Kind::host: l.type = CU_MEM_LOCATION_TYPE_HOST; l.id = 0; break;
    case Kind::host_numa: l.type = CU_MEM_LOCATION_TYPE_HOST_NUMA; l.id = id; break;
    case Kind::host_numa_current: l.type = CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT; l.id = 0; break;
  }
  return l;
}

namespace {

void require_managed_ops(const char* feature) {
  const auto& d = driver();
  detail::require(reinterpret_cast<const void*>(d.cuMemAdvise), 12020, feature);
}

// Advice and range queries run in the current context (device 0's when none is).
struct AnyContext {
  ScopedContext scope{detail::current_context_or_device0().handle()};
};

void advise(const ManagedBuffer& b, CUmem_advise advice, Location location, const char* what) {
  if (b.is_closed()) detail::throw_closed("ManagedBuffer", what);
  require_managed_ops("managed-memory advice (cuMemAdvise with a CUmemLocation)");
  AnyContext ctx;
  check(driver().cuMemAdvise(b.handle(), b.size(), advice, location.to_driver()), "cuMemAdvise");
}

int range_int(const ManagedBuffer& b, CUmem_range_attribute attribute, const char* what) {
  if (b.is_closed()) detail::throw_closed("ManagedBuffer", what);
  AnyContext ctx;
  int v = 0;
  check(driver().cuMemRangeGetAttribute(&v, sizeof v, attribute, b.handle(), b.size()), "cuMemRangeGetAttribute");
  return v;
}

}  // namespace

ManagedBuffer::ManagedBuffer(Buffer&& buffer) {
  if (!buffer.is_closed() && buffer.size() && !buffer.is_managed())
    throw InvalidArgumentError("ManagedBuffer: the buffer is not managed (unified) memory");
  static_cast<Buffer&>(*this) = std::move(buffer);
}

ManagedBuffer ManagedBuffer::from_handle(CUdeviceptr ptr, std::size_t size, MemoryResource mr,
                                         std::shared_ptr<const void> owner) {
  return ManagedBuffer(Buffer::from_handle(ptr, size, std::move(mr), std::move(owner)));
}

bool ManagedBuffer::read_mostly() const {
  return range_int(*this, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, "read_mostly") != 0;
}

void ManagedBuffer::set_read_mostly(bool value) {
  advise(*this, value ? CU_MEM_ADVISE_SET_READ_MOSTLY : CU_MEM_ADVISE_UNSET_READ_MOSTLY, Location::host(),
         "set_read_mostly");
}

namespace {
// A location attribute every page of the buffer shares, else none: the typed
// query (CUDA 13: it tells host NUMA nodes apart), else the legacy ordinal
// (-1 the host, -2 none).
std::optional<Location> range_location(const ManagedBuffer& b, CUmem_range_attribute type_attribute,
                                       CUmem_range_attribute id_attribute, CUmem_range_attribute legacy_attribute,
                                       const char* what) {
  if (driver().version >= 13000) {
    if (b.is_closed()) detail::throw_closed("ManagedBuffer", what);
    AnyContext ctx;
    CUmemLocationType type{};
    check(driver().cuMemRangeGetAttribute(&type, sizeof type, type_attribute, b.handle(), b.size()),
          "cuMemRangeGetAttribute");
    int id = 0;
    check(driver().cuMemRangeGetAttribute(&id, sizeof id, id_attribute, b.handle(), b.size()),
          "cuMemRangeGetAttribute");
    switch (type) {
      case CU_MEM_LOCATION_TYPE_DEVICE: return Location::device(id);
      case CU_MEM_LOCATION_TYPE_HOST: return Location::host();
      case CU_MEM_LOCATION_TYPE_HOST_NUMA: return Location::host_numa(id);
      default: return std::nullopt;
    }
  }
  const int id = range_int(b, legacy_attribute, what);
  if (id == CU_DEVICE_INVALID) return std::nullopt;
  if (id == CU_DEVICE_CPU) return Location::host();
  return Location::device(id);
}
}  // namespace

std::optional<Location> ManagedBuffer::preferred_location() const {
  return range_location(*this, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE,
                        CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION,
                        "preferred_location");
}

std::optional<Location> ManagedBuffer::last_prefetch_location() const {
  return range_location(*this, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE,
                        CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID,
                        CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, "last_prefetch_location");
}

void ManagedBuffer::set_preferred_location(std::optional<Location> location) {
  if (location) advise(*this, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, *location, "set_preferred_location");
  else advise(*this, CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, Location::host(), "set_preferred_location");
}

std::vector<Location> ManagedBuffer::accessed_by() const {
  if (is_closed()) detail::throw_closed("ManagedBuffer", "accessed_by");
  AnyContext ctx;
  // One slot per device and one for the host; unused slots come back CU_DEVICE_INVALID.
  std::vector<int> ids(static_cast<std::size_t>(Device::count()) + 1, CU_DEVICE_INVALID);
  check(driver().cuMemRangeGetAttribute(ids.data(), ids.size() * sizeof(int), CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY,
                                        handle(), size()),
        "cuMemRangeGetAttribute(ACCESSED_BY)");
  std::vector<Location> out;
  for (int id : ids) {
    if (id == CU_DEVICE_INVALID) continue;
    out.push_back(id == CU_DEVICE_CPU ? Location::host() : Location::device(id));
  }
  return out;
}

namespace {
void require_accessed_by_location(Location location, const char* what) {
  if (location.kind != Location::Kind::device && location.kind != Location::Kind::host)
    throw InvalidArgumentError(std::string("ManagedBuffer::") + what +
                                ": accessed_by takes a device or the host (not a host NUMA node)");
}
}  // namespace

void ManagedBuffer::add_accessed_by(Location location) {
  require_accessed_by_location(location, "add_accessed_by");
  advise(*this, CU_MEM_ADVISE_SET_ACCESSED_BY, location, "add_accessed_by");
}

void ManagedBuffer::remove_accessed_by(Location location) {
  require_accessed_by_location(location, "remove_accessed_by");
  advise(*this, CU_MEM_ADVISE_UNSET_ACCESSED_BY, location, "remove_accessed_by");
}

void ManagedBuffer::prefetch(Location location, StreamRef stream) const {
  if (is_closed()) detail::throw_closed("ManagedBuffer", "prefetch");
  require_managed_ops("ManagedBuffer::prefetch (cuMemPrefetchAsync with a CUmemLocation)");
  detail::StreamContextGuard guard(stream, "ManagedBuffer::prefetch");
  check(driver().cuMemPrefetchAsync(handle(), size(), location.to_driver(), 0, stream.handle()), "cuMemPrefetchAsync");
}

void ManagedBuffer::discard(StreamRef stream) const {
  const Buffer* one = this;
  discard_batch(stream, std::span<const Buffer* const>(&one, 1));
}

void ManagedBuffer::discard_prefetch(Location location, StreamRef stream) const {
  const Buffer* one = this;
  discard_prefetch_batch(stream, std::span<const Buffer* const>(&one, 1), std::span<const Location>(&location, 1));
}

// ---- batches ----

namespace {

struct Ranges {
  std::vector<CUdeviceptr> ptrs;
  std::vector<std::size_t> sizes;
};

Ranges ranges_of(std::span<const Buffer* const> buffers, const char* what) {
  Ranges r;
  r.ptrs.reserve(buffers.size());
  r.sizes.reserve(buffers.size());
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const Buffer* b = buffers[i];
    if (!b || b->is_closed())
      throw InvalidArgumentError(std::string(what) + ": buffer " + std::to_string(i) + " is closed");
    r.ptrs.push_back(b->handle());
    r.sizes.push_back(b->size());
  }
  return r;
}

// Runs of equal locations, as the driver takes them (prefetchLocs, prefetchLocIdxs).
struct LocationRuns {
  std::vector<CUmemLocation> locations;
  std::vector<std::size_t> starts;
};

LocationRuns location_runs(std::span<const Location> locations, std::size_t count, const char* what) {
  if (locations.size() != 1 && locations.size() != count)
    throw InvalidArgumentError(std::string(what) + ": " + std::to_string(locations.size()) + " locations for " +
                                std::to_string(count) + " buffers (give one for all, or one per buffer)");
  LocationRuns runs;
  for (std::size_t i = 0; i < locations.size(); ++i)
    if (i == 0 || !(locations[i] == locations[i - 1])) {
      runs.locations.push_back(locations[i].to_driver());
      runs.starts.push_back(i);
    }
  return runs;
}

void require_batches(const void* fn, const char* feature) { detail::require(fn, 13000, feature); }

}  // namespace

void prefetch_batch(StreamRef stream, std::span<const Buffer* const> buffers, std::span<const Location> locations) {
  const char* what = "prefetch_batch";
  if (buffers.empty()) return;
  detail::refuse_legacy_stream(stream, what);
  Ranges r = ranges_of(buffers, what);
  LocationRuns runs = location_runs(locations, buffers.size(), what);
  const auto& d = driver();
  require_batches(reinterpret_cast<const void*>(d.cuMemPrefetchBatchAsync), "prefetch_batch (cuMemPrefetchBatchAsync)");
  detail::StreamContextGuard guard(stream, what);
  check(d.cuMemPrefetchBatchAsync(r.ptrs.data(), r.sizes.data(), r.ptrs.size(), runs.locations.data(),
                                  runs.starts.data(), runs.locations.size(), 0, stream.handle()),
        "cuMemPrefetchBatchAsync");
}

void discard_batch(StreamRef stream, std::span<const Buffer* const> buffers) {
  const char* what = "discard_batch";
  if (buffers.empty()) return;
  detail::refuse_legacy_stream(stream, what);
  Ranges r = ranges_of(buffers, what);
  const auto& d = driver();
  require_batches(reinterpret_cast<const void*>(d.cuMemDiscardBatchAsync), "discard (cuMemDiscardBatchAsync)");
  detail::StreamContextGuard guard(stream, what);
  check(d.cuMemDiscardBatchAsync(r.ptrs.data(), r.sizes.data(), r.ptrs.size(), 0, stream.handle()),
        "cuMemDiscardBatchAsync");
}

void discard_prefetch_batch(StreamRef stream, std::span<const Buffer* const> buffers,
                            std::span<const Location> locations) {
  const char* what = "discard_prefetch_batch";
  if (buffers.empty()) return;
  detail::refuse_legacy_stream(stream, what);
  Ranges r = ranges_of(buffers, what);
  LocationRuns runs = location_runs(locations, buffers.size(), what);
  const auto& d = driver();
  require_batches(reinterpret_cast<const void*>(d.cuMemDiscardAndPrefetchBatchAsync),
                  "discard_prefetch (cuMemDiscardAndPrefetchBatchAsync)");
  detail::StreamContextGuard guard(stream, what);
  check(d.cuMemDiscardAndPrefetchBatchAsync(r.ptrs.data(), r.sizes.data(), r.ptrs.size(), runs.locations.data(),
                                            runs.starts.data(), runs.locations.size(), 0, stream.handle()),
        "cuMemDiscardAndPrefetchBatchAsync");
}

}  // namespace cucore
