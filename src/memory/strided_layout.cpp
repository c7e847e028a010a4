#include <cucore/strided_layout.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <string>

namespace cucore {
namespace {

// a * b and a + b, false when the result does not fit.
bool mul(std::int64_t a, std::int64_t b, std::int64_t& out) noexcept { return !__builtin_mul_overflow(a, b, &out); }
bool add(std::int64_t a, std::int64_t b, std::int64_t& out) noexcept { return !__builtin_add_overflow(a, b, &out); }

[[noreturn]] void overflow(const std::string& what) { throw std::overflow_error(what); }

void check(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides) {
  if (!strides.empty()) check_strides_rank(shape.size(), strides.size());
  check_extents(shape);
}

bool has_zero_extent(std::span<const std::int64_t> shape) noexcept {
  return std::find(shape.begin(), shape.end(), 0) != shape.end();
}

// The product of the non-zero extents (what the dense strides multiply).
std::int64_t nonzero_product(std::span<const std::int64_t> shape) {
  std::int64_t n = 1;
  for (std::int64_t e : shape)
    if (e != 0 && !mul(n, e, n)) overflow("the shape's element count overflows 64 bits");
  return n;
}

// Dense strides along `axes` (the axis with stride 1 last). The product after
// the last axis (the volume) is never formed: only the strides must fit.
template <typename Axis>
void fill_dense(std::span<const std::int64_t> shape, std::size_t n, Axis axis, std::span<std::int64_t> out) {
  std::int64_t step = 1;
  for (std::size_t k = n; k-- > 0;) {
    const std::size_t a = axis(k);
    out[a] = step;
    if (k > 0 && !mul(step, shape[a], step)) overflow("the dense strides overflow 64 bits");
  }
}

// The arithmetic takes any item size (a struct of 12 bytes, 3 lanes); only
// _StridedLayout and Buffer views insist on a power of two (check_itemsize).
void check_positive(std::int64_t itemsize) {
  if (itemsize <= 0) throw std::invalid_argument("itemsize must be positive, got " + std::to_string(itemsize));
}

void check_out(std::size_t ndim, std::size_t out) {
  if (out != ndim)
    throw std::invalid_argument("the output has " + std::to_string(out) + " entries for a shape of " +
                                std::to_string(ndim));
}

// |s| without overflow (INT64_MIN included).
std::uint64_t magnitude(std::int64_t s) noexcept {
  return s < 0 ? static_cast<std::uint64_t>(-(s + 1)) + 1 : static_cast<std::uint64_t>(s);
}

}  // namespace

void check_extents(std::span<const std::int64_t> shape) {
  for (std::size_t i = 0; i < shape.size(); ++i)
    if (shape[i] < 0)
      throw std::invalid_argument("extent " + std::to_string(i) + " is negative (" + std::to_string(shape[i]) + ")");
}

void check_strides_rank(std::size_t ndim, std::size_t nstrides) {
  if (nstrides != ndim)
    throw std::invalid_argument("strides has " + std::to_string(nstrides) + " entries for a shape of " +
                                std::to_string(ndim));
}

void check_itemsize(std::int64_t itemsize) {
  if (itemsize <= 0 || (itemsize & (itemsize - 1)) != 0)
    throw std::invalid_argument("itemsize must be a power of two, got " + std::to_string(itemsize));
}

void strides_from_bytes(std::span<const std::int64_t> bytes, std::int64_t itemsize, std::span<std::int64_t> out) {
  check_positive(itemsize);
  check_out(bytes.size(), out.size());
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] % itemsize != 0)
      throw std::invalid_argument("stride " + std::to_string(bytes[i]) + " bytes is not a multiple of the itemsize (" +
                                  std::to_string(itemsize) + ")");
    out[i] = bytes[i] / itemsize;
  }
}

void strides_to_bytes(std::span<const std::int64_t> strides, std::int64_t itemsize, std::span<std::int64_t> out) {
  check_positive(itemsize);
  check_out(strides.size(), out.size());
  for (std::size_t i = 0; i < strides.size(); ++i)
    if (!mul(strides[i], itemsize, out[i]))
      overflow("stride " + std::to_string(i) + " (" + std::to_string(strides[i]) + ") times the itemsize (" +
               std::to_string(itemsize) + ") overflows 64 bits");
}

std::int64_t volume(std::span<const std::int64_t> shape) {
  check_extents(shape);
  const std::int64_t n = nonzero_product(shape);
  return has_zero_extent(shape) ? 0 : n;
}

std::int64_t size_in_bytes(std::span<const std::int64_t> shape, std::int64_t itemsize) {
  check_positive(itemsize);
  const std::int64_t n = volume(shape);
  std::int64_t bytes = 0;
  if (!mul(nonzero_product(shape), itemsize, bytes)) overflow("the shape's size in bytes overflows 64 bits");
  return n == 0 ? 0 : bytes;
}

void dense_strides(std::span<const std::int64_t> shape, LayoutOrder order, std::span<std::int64_t> out) {
  check_extents(shape);
  check_out(shape.size(), out.size());
  const std::size_t n = shape.size();
  const auto c_axis = [](std::size_t k) { return k; };
  const auto f_axis = [n](std::size_t k) { return n - 1 - k; };
  if (order == LayoutOrder::c)
    fill_dense(shape, n, c_axis, out);
  else
    fill_dense(shape, n, f_axis, out);
}

void dense_strides(std::span<const std::int64_t> shape, std::span<const std::int64_t> axis_order,
                   std::span<std::int64_t> out) {
  check_extents(shape);
  check_out(shape.size(), out.size());
  const auto n = static_cast<std::int64_t>(shape.size());
  if (axis_order.size() != shape.size())
    throw std::invalid_argument("the stride order has " + std::to_string(axis_order.size()) + " axes for a shape of " +
                                std::to_string(n) + " (it must be a permutation of the axes)");
  // Each axis once, negative ones from the end: seen axes are marked in
  // `out`, which the strides overwrite below.
  std::fill(out.begin(), out.end(), 0);
  for (std::int64_t a : axis_order) {
    if (a < -n || a >= n)
      throw std::invalid_argument("the stride order names axis " + std::to_string(a) + ", out of range for " +
                                  std::to_string(n) + " dimensions");
    std::int64_t& seen = out[static_cast<std::size_t>(a < 0 ? a + n : a)];
    if (seen != 0)
      throw std::invalid_argument("the stride order names axis " + std::to_string(a < 0 ? a + n : a) +
                                  " twice (it must be a permutation of the axes)");
    seen = -1;
  }
  const auto axis = [&](std::size_t k) {
    const std::int64_t a = axis_order[k];
    return static_cast<std::size_t>(a < 0 ? a + n : a);
  };
  fill_dense(shape, shape.size(), axis, out);
}

std::vector<std::int64_t> dense_strides(std::span<const std::int64_t> shape, LayoutOrder order) {
  std::vector<std::int64_t> out(shape.size());
  dense_strides(shape, order, out);
  return out;
}

std::vector<std::int64_t> dense_strides(std::span<const std::int64_t> shape, std::span<const std::int64_t> axis_order) {
  std::vector<std::int64_t> out(shape.size());
  dense_strides(shape, axis_order, out);
  return out;
}

void stride_order(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                  std::span<std::int64_t> out) {
  check(shape, strides);
  check_out(shape.size(), out.size());
  std::iota(out.begin(), out.end(), std::int64_t(0));
  if (strides.empty()) return;
  std::sort(out.begin(), out.end(), [&](std::int64_t i, std::int64_t j) {
    const auto a = static_cast<std::size_t>(i), b = static_cast<std::size_t>(j);
    const std::uint64_t si = magnitude(strides[a]), sj = magnitude(strides[b]);
    if (si != sj) return si > sj;
    if (shape[a] != shape[b]) return shape[a] > shape[b];
    return i < j;
  });
}

namespace {
// Whether `strides` (checked, one per axis) are the dense ones along `axis`
// (axis(0) has stride 1), extents of 1 aside.
template <typename Axis>
bool dense_along(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides, Axis axis) noexcept {
  std::int64_t expect = 1;
  bool reachable = true;  // false once the product of the extents passes 64 bits: no stride is that far
  for (std::size_t k = 0; k < shape.size(); ++k) {
    const std::size_t i = axis(k);
    if (shape[i] == 1) continue;
    if (!reachable || strides[i] != expect) return false;
    reachable = mul(expect, shape[i], expect);
  }
  return true;
}
bool dense_c(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides) noexcept {
  return strides.empty() || dense_along(shape, strides, [n = shape.size()](std::size_t k) { return n - 1 - k; });
}
}  // namespace

bool has_dense_c_strides(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides) {
  check(shape, strides);
  return dense_c(shape, strides);
}

bool is_contiguous_c(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides) {
  check(shape, strides);
  return has_zero_extent(shape) || dense_c(shape, strides);
}

bool is_contiguous_f(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides) {
  check(shape, strides);
  if (has_zero_extent(shape)) return true;
  if (strides.empty())  // C-contiguous: F-contiguous too when at most one extent exceeds 1
    return std::count_if(shape.begin(), shape.end(), [](std::int64_t e) { return e > 1; }) <= 1;
  return dense_along(shape, strides, [](std::size_t k) { return k; });
}

bool is_contiguous_any(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides) {
  check(shape, strides);
  if (strides.empty() || has_zero_extent(shape)) return true;
  // The axes in increasing stride order must have strides 1, e0, e0 * e1, ...
  // (extents of 1 aside). Each round finds the axis with the next stride;
  // the expected stride grows every round (extents exceed 1), so an axis
  // matched once never matches again and no marks are needed: a stride given
  // twice leaves an axis unmatched.
  const auto rounds = std::count_if(shape.begin(), shape.end(), [](std::int64_t e) { return e != 1; });
  std::int64_t expect = 1;
  for (std::ptrdiff_t r = 0; r < rounds; ++r) {
    std::size_t found = shape.size();
    for (std::size_t i = 0; i < shape.size() && found == shape.size(); ++i)
      if (shape[i] != 1 && strides[i] == expect) found = i;
    if (found == shape.size()) return false;
    // Past 64 bits no later stride can match; the last round needs no product.
    if (r + 1 < rounds && !mul(expect, shape[found], expect)) return false;
  }
  return true;
}

OffsetBounds offset_bounds(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides) {
  check(shape, strides);
  if (has_zero_extent(shape)) return {0, -1};
  if (strides.empty()) return {0, volume(shape) - 1};
  OffsetBounds b{0, 0};
  for (std::size_t i = 0; i < shape.size(); ++i) {
    std::int64_t reach = 0;
    bool fits = mul(shape[i] - 1, strides[i], reach);
    std::int64_t& end = reach < 0 ? b.min : b.max;
    if (!fits || !add(end, reach, end))
      overflow("the strides reach beyond 64 bits (stride " + std::to_string(i) + " is " + std::to_string(strides[i]) +
               ")");
  }
  return b;
}

ByteBounds byte_bounds(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                       std::int64_t itemsize) {
  check_positive(itemsize);
  const OffsetBounds b = offset_bounds(shape, strides);
  if (b.max < b.min) return {0, 0};
  ByteBounds out;
  if (!mul(b.min, itemsize, out.begin) || !add(b.max, 1, out.end) || !mul(out.end, itemsize, out.end))
    overflow("the strides reach beyond 64 bits in bytes");
  return out;
}

std::int64_t required_span(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides) {
  const OffsetBounds b = offset_bounds(shape, strides);
  if (b.min < 0)
    throw std::invalid_argument("negative strides reach offset " + std::to_string(b.min) +
                                ", before the element at index 0: no size from there holds the layout");
  std::int64_t n = 0;
  if (!add(b.max, 1, n)) overflow("the layout's span overflows 64 bits");
  return n;
}

std::int64_t required_size_in_bytes(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                                    std::int64_t itemsize) {
  check_positive(itemsize);
  std::int64_t bytes = 0;
  if (!mul(required_span(shape, strides), itemsize, bytes)) overflow("the layout's span in bytes overflows 64 bits");
  return bytes;
}

}  // namespace cucore
