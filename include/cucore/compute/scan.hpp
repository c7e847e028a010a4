#pragma once
// Device-wide prefix scans (cuda.compute's inclusive_scan / exclusive_scan and
// their make_ forms; CUB's DeviceScan): out[i] = init op in[0] op ... op in[i]
// (inclusive; init optional) or init op in[0] op ... op in[i-1] (exclusive).
// The accumulator type is the initial value's (the input's without one).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include <cucore/compute/build.hpp>
#include <cucore/compute/iterator.hpp>
#include <cucore/compute/op.hpp>
#include <cucore/compute/types.hpp>
#include <cucore/stream.hpp>

namespace cucore::compute {

namespace detail {
struct ScanImpl;
}

class InclusiveScan {
 public:
  // init_type: the initial value's type, or none for a scan without one.
  InclusiveScan(const Iterator& in, const Iterator& out, const Op& op, std::optional<Type> init_type = {},
                const BuildOptions& options = {});
  // Two-phase (see Reduce). `init` is given exactly when the object was built with an init type.
  std::size_t operator()(void* temp, std::size_t temp_bytes, const Iterator& in, const Iterator& out,
                         std::uint64_t num_items, const std::optional<Value>& init, StreamRef stream) const;
  void operator()(const Iterator& in, const Iterator& out, std::uint64_t num_items, const std::optional<Value>& init,
                  StreamRef stream, const MemoryResource& mr = {}) const;

 private:
  std::shared_ptr<const detail::ScanImpl> impl_;
};

class ExclusiveScan {
 public:
  ExclusiveScan(const Iterator& in, const Iterator& out, const Op& op, const Type& init_type,
                const BuildOptions& options = {});
  std::size_t operator()(void* temp, std::size_t temp_bytes, const Iterator& in, const Iterator& out,
                         std::uint64_t num_items, const Value& init, StreamRef stream) const;
  void operator()(const Iterator& in, const Iterator& out, std::uint64_t num_items, const Value& init,
                  StreamRef stream, const MemoryResource& mr = {}) const;

 private:
  std::shared_ptr<const detail::ScanImpl> impl_;
};

// One-shot forms (per-process cache of built objects).
void inclusive_scan(StreamRef stream, const Iterator& in, const Iterator& out, std::uint64_t num_items, const Op& op,
                    const std::optional<Value>& init = {}, const CallOptions& options = {});
void exclusive_scan(StreamRef stream, const Iterator& in, const Iterator& out, std::uint64_t num_items, const Op& op,
                    const Value& init, const CallOptions& options = {});
template <typename T>
void inclusive_scan(StreamRef stream, const T* in, T* out, std::uint64_t num_items, const Op& op,
                    const CallOptions& options = {}) {
  inclusive_scan(stream, Iterator::pointer(in), Iterator::pointer(static_cast<const T*>(out)), num_items, op, {},
                 options);
}
template <typename T>
void exclusive_scan(StreamRef stream, const T* in, T* out, std::uint64_t num_items, const Op& op, T init,
                    const CallOptions& options = {}) {
  exclusive_scan(stream, Iterator::pointer(in), Iterator::pointer(static_cast<const T*>(out)), num_items, op,
                 Value(init), options);
}

}  // namespace cucore::compute
