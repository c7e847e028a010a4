#pragma once
// Element-wise transforms (cuda.compute's unary_transform / binary_transform
// and their make_ forms; CUB's DeviceTransform): out[i] = op(in[i]) or
// op(in1[i], in2[i]). No temporary storage.
#include <cstdint>
#include <memory>

#include <cucore/compute/build.hpp>
#include <cucore/compute/iterator.hpp>
#include <cucore/compute/op.hpp>
#include <cucore/stream.hpp>

namespace cucore::compute {

namespace detail {
struct TransformImpl;
}

class UnaryTransform {
 public:
  UnaryTransform(const Iterator& in, const Iterator& out, const Op& op, const BuildOptions& options = {});
  void operator()(const Iterator& in, const Iterator& out, std::uint64_t num_items, StreamRef stream) const;

 private:
  std::shared_ptr<const detail::TransformImpl> impl_;
};

class BinaryTransform {
 public:
  BinaryTransform(const Iterator& in1, const Iterator& in2, const Iterator& out, const Op& op,
                  const BuildOptions& options = {});
  void operator()(const Iterator& in1, const Iterator& in2, const Iterator& out, std::uint64_t num_items,
                  StreamRef stream) const;

 private:
  std::shared_ptr<const detail::TransformImpl> impl_;
};

void unary_transform(StreamRef stream, const Iterator& in, const Iterator& out, std::uint64_t num_items, const Op& op,
                     const BuildOptions& options = {});
void binary_transform(StreamRef stream, const Iterator& in1, const Iterator& in2, const Iterator& out,
                      std::uint64_t num_items, const Op& op, const BuildOptions& options = {});

}  // namespace cucore::compute
