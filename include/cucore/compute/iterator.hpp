#pragma once
// Iterators of the parallel algorithms (cuda.compute's iterators): what an
// algorithm reads from or writes to, as an expression over device memory that
// the generated kernels evaluate on the fly. An Iterator has a compile-time
// part (its kind, value type, operators: signature()) that selects the kernels,
// and a run-time part (pointers, start values: state()) passed to them as a
// kernel argument, so an algorithm object built for an iterator kind runs on any
// iterator of that kind.
#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <cucore/compute/op.hpp>
#include <cucore/compute/types.hpp>
#include <cucore/device_span.hpp>

namespace cucore {
class Buffer;
}

namespace cucore::compute {

enum class IteratorKind { pointer, counting, constant, transform, discard, zip, reverse };

class Iterator {
 public:
  Iterator();  // a null int32 pointer

  // Device memory holding `value_type` elements.
  static Iterator pointer(Type value_type, CUdeviceptr ptr);
  static Iterator pointer(Type value_type, const Buffer& buffer);
  template <typename T>
  static Iterator pointer(const T* ptr) {
    return pointer(Type::of<T>(), reinterpret_cast<CUdeviceptr>(ptr));
  }
  // A DeviceSpan's elements, of its element type (a built-in one: Type::of<T>);
  // the algorithm's num_items is the caller's to give (span.size()).
  template <typename T>
  static Iterator pointer(DeviceSpan<T> span) {
    return pointer(Type::of<std::remove_cv_t<T>>(), span.handle());
  }
  // start, start + 1, start + 2, ... (integral or floating value).
  static Iterator counting(const Value& start);
  // value, value, value, ...
  static Iterator constant(const Value& value);
  // op(base[i]), of type `value_type` (a stateless operator: OpKind, source or LTO-IR).
  static Iterator transform(const Iterator& base, const Op& op, Type value_type);
  // Writes vanish; reads give value_type{}.
  static Iterator discard(Type value_type = Type::uint8());
  // {its[0][i], its[1][i], ...} as a struct with fields f0, f1, ... (zip_value_type()).
  static Iterator zip(std::vector<Iterator> its);
  // base[size - 1 - i]: `base` read (or written) back to front over `size` elements.
  static Iterator reverse(const Iterator& base, std::uint64_t size);

  // The same iterator with other run-time state: another pointer for pointer
  // iterators (searched depth-first: the first pointer found), kept kind otherwise.
  Iterator with_pointer(CUdeviceptr ptr) const;

  IteratorKind kind() const noexcept;
  const Type& value_type() const noexcept;
  // The compile-time identity: equal signatures compile to the same kernels.
  const std::string& signature() const noexcept;
  // The kernel argument's bytes and alignment (laid out as the generated struct).
  std::span<const std::byte> state() const noexcept;
  std::size_t state_alignment() const noexcept;
  CUdeviceptr pointer_value() const;  // pointer iterators (std::invalid_argument otherwise)
  bool is_pointer() const noexcept { return kind() == IteratorKind::pointer; }
  // Whether it can be written to (pointer, discard, a reverse over a writable one).
  bool is_writable() const noexcept;
  const std::vector<Iterator>& children() const noexcept;
  const Op* op() const noexcept;  // transform iterators' operator

  struct Node;
  const std::shared_ptr<const Node>& node() const noexcept { return node_; }

 private:
  explicit Iterator(std::shared_ptr<const Node> node) noexcept : node_(std::move(node)) {}
  std::shared_ptr<const Node> node_;
};

}  // namespace cucore::compute
