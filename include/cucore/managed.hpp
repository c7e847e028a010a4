#pragma once
// Managed (unified) memory operations, as cuda.core's ManagedBuffer and its
// batched functions: advice (read_mostly, preferred_location, accessed_by),
// stream-ordered prefetch and discard of a buffer, and the CUDA 13 batched
// forms (prefetch_batch, discard_batch, discard_prefetch_batch) that issue one
// driver call for many buffers. Advice is read back from the driver each time:
// nothing is mirrored here. Discards and batches need a CUDA 13 driver
// (FeatureUnavailableError otherwise); batches refuse the legacy default
// stream, which the driver rejects.
#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include <cucore/buffer.hpp>
#include <cucore/location.hpp>
#include <cucore/stream.hpp>

namespace cucore {

class ManagedBuffer : public Buffer {
 public:
  ManagedBuffer() noexcept = default;
  // Takes over a managed allocation (std::invalid_argument when `buffer` is
  // open and not managed memory).
  explicit ManagedBuffer(Buffer&& buffer);
  static ManagedBuffer from_handle(CUdeviceptr ptr, std::size_t size, MemoryResource mr = {},
                                   std::shared_ptr<const void> owner = {});

  bool read_mostly() const;
  void set_read_mostly(bool value);
  // The preferred location every page of the buffer shares, else none.
  std::optional<Location> preferred_location() const;
  void set_preferred_location(std::optional<Location> location);  // none: unset
  // Where the last explicit prefetch sent every page of the buffer (the target
  // asked for, not where the pages are now), else none: a page never
  // prefetched, or pages last sent to different places.
  std::optional<Location> last_prefetch_location() const;
  // The locations with set_accessed_by advice over the whole buffer.
  std::vector<Location> accessed_by() const;
  void add_accessed_by(Location location);
  void remove_accessed_by(Location location);

  void prefetch(Location location, StreamRef stream) const;
  void discard(StreamRef stream) const;
  void discard_prefetch(Location location, StreamRef stream) const;
};

// One location for every buffer, or one per buffer (std::invalid_argument when
// the counts differ or a buffer is closed).
void prefetch_batch(StreamRef stream, std::span<const Buffer* const> buffers, std::span<const Location> locations);
void discard_batch(StreamRef stream, std::span<const Buffer* const> buffers);
void discard_prefetch_batch(StreamRef stream, std::span<const Buffer* const> buffers,
                            std::span<const Location> locations);

}  // namespace cucore
