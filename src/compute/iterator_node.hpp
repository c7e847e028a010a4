#pragma once
// An Iterator's shared description (internal).
#include <cucore/compute/iterator.hpp>

#include <memory>
#include <string>
#include <vector>

namespace cucore::compute {

struct Iterator::Node {
  IteratorKind kind = IteratorKind::pointer;
  Type value_type;
  std::vector<Iterator> children;
  std::shared_ptr<const Op> op;  // transform
  std::vector<std::byte> state;  // the kernel argument, laid out as the generated struct
  std::size_t state_alignment = 1;
  std::string signature;
};

// Compile-time identities used in signatures and build keys.
std::string op_key(const Op& op);
std::string type_signature(const Type& t);

}  // namespace cucore::compute
