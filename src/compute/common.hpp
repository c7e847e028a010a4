#pragma once
// Checks and argument helpers shared by the algorithms (internal).
#include <cucore/compute/iterator.hpp>
#include <cucore/compute/types.hpp>

#include <cstdint>
#include <cstdlib>
#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "compute/engine.hpp"

namespace cucore::compute::detail {

// A call's iterator must be of the kind the object was built for.
inline void check_iterator(const char* algorithm, const char* what, const Iterator& built, const Iterator& given) {
  if (built.signature() != given.signature())
    throw InvalidArgumentError(std::string(algorithm) + ": " + what + " is a " + given.signature() +
                                " iterator, but the object was built for " + built.signature());
}

inline void check_value(const char* algorithm, const char* what, const Type& built, const Value& given) {
  if (!(built == given.type()))
    throw InvalidArgumentError(std::string(algorithm) + ": " + what + " is " + given.type().describe() +
                                ", but the object was built for " + built.describe());
}

// Struct values only go where the same struct is expected (a discard takes anything).
inline void check_assignable(const char* algorithm, const Type& from, const Iterator& to) {
  if (to.kind() == IteratorKind::discard) return;
  if ((from.is_user() || to.value_type().is_user()) && !(from == to.value_type()))
    throw InvalidArgumentError(std::string(algorithm) + ": cannot store " + from.describe() + " results into " +
                                to.value_type().describe() + " elements");
}

inline Args& add_iterator(Args& a, const Iterator& it) { return a.bytes(it.state(), it.state_alignment()); }

// Unsigned offsets of the width the variant was built for.
inline Args& add_offset(Args& a, bool wide, std::uint64_t v) {
  if (wide) return a.add(static_cast<unsigned long long>(v));
  return a.add(static_cast<unsigned int>(v));
}

inline const char* unsigned_offset(bool wide) { return wide ? "unsigned long long" : "unsigned int"; }

// static_asserts that the generated iterator types have the layout the host built their state with.
inline std::string layout_check(const std::string& cpp_type, const Iterator& it, const char* what) {
  return "static_assert(sizeof(" + cpp_type + ") == " + std::to_string(it.state().size()) + " && alignof(" +
         cpp_type + ") == " + std::to_string(it.state_alignment()) + ", \"cucore: the " + what +
         " iterator's device layout differs from the host's\");\n";
}

// cub::GridEvenShare's layout and DispatchInit (the compiled size is checked against it).
template <typename OffsetT>
struct GridEvenShare {
  int total_tiles = 0;
  int big_shares = 0;
  OffsetT big_share_items = 0, normal_share_items = 0, normal_base_offset = 0, num_items = 0;
  int grid_size = 0;
  OffsetT block_offset = 0, block_end = 0, block_stride = 0;

  void dispatch_init(OffsetT n, int max_grid_size, int tile_items) {
    block_offset = n;
    block_end = n;
    num_items = n;
    total_tiles = static_cast<int>((n + tile_items - 1) / tile_items);
    grid_size = std::min(total_tiles, max_grid_size);
    const int avg_tiles_per_block = total_tiles / grid_size;
    big_shares = total_tiles - avg_tiles_per_block * grid_size;
    normal_share_items = static_cast<OffsetT>(avg_tiles_per_block) * tile_items;
    normal_base_offset = static_cast<OffsetT>(big_shares) * tile_items;
    big_share_items = normal_share_items + tile_items;
  }
};

// Whether an architecture name ("sm_90", "sm_90a") is at least sm_<number>.
inline bool arch_at_least(const std::string& arch, int number) {
  return arch.size() > 3 && std::atoi(arch.c_str() + 3) >= number;
}

inline bool needs_wide(std::uint64_t n) { return n > std::numeric_limits<std::uint32_t>::max(); }

}  // namespace cucore::compute::detail
