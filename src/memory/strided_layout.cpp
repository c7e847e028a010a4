#include <cucore/errors.hpp>
#include <cucore/strided_layout.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace cucore {
namespace {

// a * b and a + b, false when the result does not fit.
bool mul(std::int64_t a, std::int64_t b, std::int64_t& out) noexcept { return !__builtin_mul_overflow(a, b, &out); }
bool add(std::int64_t a, std::int64_t b, std::int64_t& out) noexcept { return !__builtin_add_overflow(a, b, &out); }

[[noreturn]] void overflow(const std::string& what) { throw OverflowError(what); }

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
  if (itemsize <= 0) throw InvalidArgumentError("itemsize must be positive, got " + std::to_string(itemsize));
}

void check_out(std::size_t ndim, std::size_t out) {
  if (out != ndim)
    throw InvalidArgumentError("the output has " + std::to_string(out) + " entries for a shape of " +
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
      throw InvalidArgumentError("extent " + std::to_string(i) + " is negative (" + std::to_string(shape[i]) + ")");
}

void check_strides_rank(std::size_t ndim, std::size_t nstrides) {
  if (nstrides != ndim)
    throw InvalidArgumentError("strides has " + std::to_string(nstrides) + " entries for a shape of " +
                                std::to_string(ndim));
}

void check_itemsize(std::int64_t itemsize) {
  if (itemsize <= 0 || (itemsize & (itemsize - 1)) != 0)
    throw InvalidArgumentError("itemsize must be a power of two, got " + std::to_string(itemsize));
}

void strides_from_bytes(std::span<const std::int64_t> bytes, std::int64_t itemsize, std::span<std::int64_t> out) {
  check_positive(itemsize);
  check_out(bytes.size(), out.size());
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] % itemsize != 0)
      throw InvalidArgumentError("stride " + std::to_string(bytes[i]) + " bytes is not a multiple of the itemsize (" +
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
    throw InvalidArgumentError("the stride order has " + std::to_string(axis_order.size()) + " axes for a shape of " +
                                std::to_string(n) + " (it must be a permutation of the axes)");
  // Each axis once, negative ones from the end: seen axes are marked in
  // `out`, which the strides overwrite below.
  std::fill(out.begin(), out.end(), 0);
  for (std::int64_t a : axis_order) {
    if (a < -n || a >= n)
      throw InvalidArgumentError("the stride order names axis " + std::to_string(a) + ", out of range for " +
                                  std::to_string(n) + " dimensions");
    std::int64_t& seen = out[static_cast<std::size_t>(a < 0 ? a + n : a)];
    if (seen != 0)
      throw InvalidArgumentError("the stride order names axis " + std::to_string(a < 0 ? a + n : a) +
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

OffsetBounds offset_bounds(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                           std::int64_t slice_offset) {
  check(shape, strides);
  if (has_zero_extent(shape)) return {0, -1};
  OffsetBounds b{slice_offset, slice_offset};
  if (strides.empty()) {
    if (!add(b.max, volume(shape) - 1, b.max)) overflow("the layout's offsets overflow 64 bits");
    return b;
  }
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

std::int64_t required_span(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                           std::int64_t slice_offset) {
  const OffsetBounds b = offset_bounds(shape, strides, slice_offset);
  if (b.min < 0)
    throw InvalidArgumentError("negative strides reach offset " + std::to_string(b.min) +
                                ", before the memory's start: no size from there holds the layout");
  std::int64_t n = 0;
  if (!add(b.max, 1, n)) overflow("the layout's span overflows 64 bits");
  return n;
}

std::int64_t required_size_in_bytes(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                                    std::int64_t itemsize, std::int64_t slice_offset) {
  check_positive(itemsize);
  std::int64_t bytes = 0;
  if (!mul(required_span(shape, strides, slice_offset), itemsize, bytes))
    overflow("the layout's span in bytes overflows 64 bits");
  return bytes;
}

std::int64_t offset_in_bytes(std::int64_t slice_offset, std::int64_t itemsize) {
  check_positive(itemsize);
  std::int64_t bytes = 0;
  if (!mul(slice_offset, itemsize, bytes))
    overflow("the slice offset (" + std::to_string(slice_offset) + ") times the itemsize (" +
             std::to_string(itemsize) + ") overflows 64 bits");
  return bytes;
}

// ---- transformations ---------------------------------------------------------------------
namespace {

using Ints = std::vector<std::int64_t>;

// The strides spelled out: the dense C strides for an empty span, all 0 when
// there is no element (as cuda.core spells a C-contiguous empty layout's).
Ints full_strides(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides) {
  check(shape, strides);
  if (strides.empty()) return has_zero_extent(shape) ? Ints(shape.size(), 0) : dense_strides(shape);
  return Ints(strides.begin(), strides.end());
}

std::int64_t checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (!mul(a, b, out)) overflow("the layout's strides overflow 64 bits");
  return out;
}

// `axis` in [-n, n) as [0, n); false when out of range.
bool normalize_axis(std::int64_t& axis, std::size_t n) noexcept {
  const auto sn = static_cast<std::int64_t>(n);
  if (axis < -sn || axis >= sn) return false;
  if (axis < 0) axis += sn;
  return true;
}

std::string dims(std::size_t n) { return std::to_string(n) + "D tensor"; }

}  // namespace

Strided permuted(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                 std::span<const std::int64_t> axis_order) {
  const Ints st = full_strides(shape, strides);
  const std::size_t n = shape.size();
  if (axis_order.size() != n)
    throw InvalidArgumentError("Permutation must have the same length as the number of dimensions, got " +
                                std::to_string(axis_order.size()) + " for " + dims(n) + ".");
  Strided out{Ints(n), Ints(n)};
  std::vector<bool> seen(n, false);
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t a = axis_order[i];
    if (!normalize_axis(a, n))
      throw InvalidArgumentError("Invalid permutation: axis " + std::to_string(axis_order[i]) +
                                  " out of range for " + dims(n));
    const auto ua = static_cast<std::size_t>(a);
    if (seen[ua])
      throw InvalidArgumentError("Invalid permutation: axis " + std::to_string(axis_order[i]) +
                                  " appears multiple times.");
    seen[ua] = true;
    out.shape[i] = shape[ua];
    out.strides[i] = st[ua];
  }
  return out;
}

Strided squeezed(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides) {
  const Ints st = full_strides(shape, strides);
  if (has_zero_extent(shape)) return {{0}, {0}};
  Strided out;
  for (std::size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != 1) {
      out.shape.push_back(shape[i]);
      out.strides.push_back(st[i]);
    }
  return out;
}

Strided unsqueezed(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                   std::span<const std::int64_t> axes) {
  const Ints st = full_strides(shape, strides);
  const std::size_t n = shape.size(), out_n = n + axes.size();
  std::vector<bool> added(out_n, false);
  for (std::int64_t given : axes) {
    std::int64_t a = given;
    if (!normalize_axis(a, out_n))
      throw InvalidArgumentError("Invalid axis: " + std::to_string(given) + " out of range for " + dims(out_n));
    if (added[static_cast<std::size_t>(a)])
      throw InvalidArgumentError("Axis " + std::to_string(given) + " appears multiple times.");
    added[static_cast<std::size_t>(a)] = true;
  }
  Strided out{Ints(out_n), Ints(out_n)};
  std::size_t in = 0;
  for (std::size_t i = 0; i < out_n; ++i) {
    if (!added[i]) {
      out.shape[i] = shape[in];
      out.strides[i] = st[in++];
      continue;
    }
    out.shape[i] = 1;
    // The stride a C-order split of the next axis would give it.
    out.strides[i] = in < n ? checked_mul(shape[in], st[in]) : (n > 0 ? st[n - 1] : 1);
  }
  return out;
}

std::uint64_t flattened_axis_mask(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides) {
  const Ints st = full_strides(shape, strides);
  if (shape.size() > 64) throw InvalidArgumentError("an axis mask holds at most 64 axes, got " + dims(shape.size()));
  std::uint64_t mask = 0;
  for (std::size_t i = 1; i < shape.size(); ++i) {
    std::int64_t span = 0;
    if (mul(st[i], shape[i], span) && span == st[i - 1]) mask |= std::uint64_t{1} << i;
  }
  return mask;
}

std::uint64_t axis_range_mask(std::size_t ndim, std::int64_t start_axis, std::int64_t end_axis) {
  if (ndim > 64) throw InvalidArgumentError("an axis mask holds at most 64 axes, got " + dims(ndim));
  const std::int64_t start_given = start_axis, end_given = end_axis;
  if (!normalize_axis(start_axis, ndim))
    throw InvalidArgumentError("Invalid start axis: " + std::to_string(start_given) + " out of range for " +
                                dims(ndim));
  if (!normalize_axis(end_axis, ndim))
    throw InvalidArgumentError("Invalid end axis: " + std::to_string(end_given) + " out of range for " +
                                dims(ndim));
  std::uint64_t mask = 0;
  for (std::int64_t i = start_axis + 1; i <= end_axis; ++i) mask |= std::uint64_t{1} << i;
  return mask;
}

Strided flattened(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides, std::uint64_t mask) {
  const Ints st = full_strides(shape, strides);
  if (shape.empty()) return {{1}, {1}};
  Strided out;
  for (std::size_t i = 0; i < shape.size();) {
    std::int64_t extent = shape[i], stride = st[i];
    std::size_t j = i + 1;
    for (; j < shape.size() && j < 64 && (mask >> j & 1); ++j) {
      std::int64_t span = 0;
      if (!mul(st[j], shape[j], span) || span != stride) break;
      extent = checked_mul(extent, shape[j]);
      stride = st[j];
    }
    out.shape.push_back(extent);
    out.strides.push_back(stride);
    i = j;
  }
  return out;
}

namespace {
// The merged runs of `flat` split from the right, each into the new extents
// of `out` that multiply to it (extents of 1 take the stride in place), into
// out.strides; false when a run's extent is no product of new extents.
bool split_runs(const Strided& flat, Strided& out) {
  std::size_t k = out.shape.size();
  for (std::size_t g = flat.shape.size(); g-- > 0;) {
    const std::int64_t extent = flat.shape[g];
    std::int64_t stride = flat.strides[g], vol = 1;
    while (k > 0 && (out.shape[k - 1] == 1 || vol < extent)) {
      --k;
      out.strides[k] = stride;
      stride = checked_mul(stride, out.shape[k]);
      vol = checked_mul(vol, out.shape[k]);
    }
    if (vol != extent) return false;
  }
  return true;
}
}  // namespace

Strided reshaped(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                 std::span<const std::int64_t> new_shape) {
  const Ints st = full_strides(shape, strides);
  const std::int64_t old_volume = volume(shape);
  Strided out{Ints(new_shape.begin(), new_shape.end()), Ints(new_shape.size(), 0)};
  std::size_t inferred = new_shape.size();
  std::int64_t sub = 1;
  for (std::size_t i = 0; i < new_shape.size(); ++i) {
    if (new_shape[i] < -1) throw InvalidArgumentError("Extents must be non-negative");
    if (new_shape[i] == -1) {
      if (inferred != new_shape.size()) throw InvalidArgumentError("There can be at most one -1 extent in a shape");
      inferred = i;
    } else if (!mul(sub, new_shape[i], sub)) {
      overflow("the new shape's element count overflows 64 bits");
    }
  }
  if (inferred == new_shape.size()) {
    if (sub != old_volume)
      throw InvalidArgumentError("The original volume " + std::to_string(old_volume) + " and the new volume " +
                                  std::to_string(sub) + " must be equal.");
  } else {
    if (sub == 0) throw InvalidArgumentError("The -1 extent is ambiguous when the specified sub-volume is 0");
    if (old_volume % sub != 0)
      throw InvalidArgumentError("The original volume " + std::to_string(old_volume) +
                                  " must be divisible by the specified sub-volume " + std::to_string(sub) + ".");
    out.shape[inferred] = old_volume / sub;
  }
  // No element: any strides do (zeros, as for the other empty layouts).
  if (old_volume == 0) return out;
  // The merged runs split as cuda.core splits them (so the strides of new
  // extents of 1 are its). An extent of 1 whose stride breaks a run leaves
  // a split NumPy makes refused; without the extents of 1 (their strides are
  // free) the runs merge through them, as NumPy's do.
  if (split_runs(flattened(shape, st, ~std::uint64_t{0}), out)) return out;
  const Strided kept = squeezed(shape, st);
  if (split_runs(flattened(kept.shape, kept.strides, ~std::uint64_t{0}), out)) return out;
  throw InvalidArgumentError("Layout strides are incompatible with the new shape");
}

Strided broadcast_to(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                     std::span<const std::int64_t> new_shape) {
  const Ints st = full_strides(shape, strides);
  check_extents(new_shape);
  const std::size_t n = shape.size(), out_n = new_shape.size();
  if (out_n < n)
    throw InvalidArgumentError("The broadcast shape ndim (" + std::to_string(out_n) +
                                ") must be greater than or equal to the input shape ndim (" + std::to_string(n) +
                                ").");
  Strided out{Ints(new_shape.begin(), new_shape.end()), Ints(out_n, 0)};
  const std::size_t lead = out_n - n;
  for (std::size_t i = 0; i < n; ++i) {
    if (shape[i] == new_shape[lead + i])
      out.strides[lead + i] = st[i];
    else if (shape[i] != 1)
      throw InvalidArgumentError(
          "Shapes cannot be broadcast together: the original extent must be 1 or be equal to broadcast extent, got " +
          std::to_string(shape[i]) + " and " + std::to_string(new_shape[lead + i]) + " for axis " +
          std::to_string(i) + ".");
  }
  return out;
}

bool is_unique(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides) {
  check(shape, strides);
  if (strides.empty() || has_zero_extent(shape)) return true;
  std::vector<std::pair<std::uint64_t, std::int64_t>> axes;  // (|stride|, extent)
  for (std::size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != 1) {
      if (strides[i] == 0) return false;
      axes.emplace_back(magnitude(strides[i]), shape[i]);
    }
  std::sort(axes.begin(), axes.end());
  for (std::size_t i = 1; i < axes.size(); ++i) {
    // |stride_i| >= |stride_{i-1}| * extent_{i-1}: the lower axis' elements
    // all lie below this axis' step. A span beyond 64 bits is more than any stride.
    __extension__ typedef unsigned __int128 u128;
    const u128 span = static_cast<u128>(axes[i - 1].first) *
                                   static_cast<std::uint64_t>(axes[i - 1].second);
    if (axes[i].first < span) return false;
  }
  return true;
}

// ---- slicing and repacking ---------------------------------------------------------------
std::int64_t adjust_slice(std::int64_t extent, std::int64_t& start, std::int64_t& stop, std::int64_t step) {
  if (extent < 0) throw InvalidArgumentError("the extent is negative (" + std::to_string(extent) + ")");
  if (step == 0) throw InvalidArgumentError("slice step cannot be zero");
  // Python's clamping: an end before the axis goes to its start (-1 walking
  // down), one past it to its end (extent - 1 walking down).
  const auto clamp = [&](std::int64_t& i) {
    if (i < 0) {
      i += extent;  // no overflow: extent >= 0
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= extent) {
      i = step < 0 ? extent - 1 : extent;
    }
  };
  clamp(start);
  clamp(stop);
  // Both now lie in [-1, extent]: the differences fit. A step of INT64_MIN
  // (Python clamps it to -INT64_MAX) takes one element at most either way.
  if (step < 0) {
    if (stop < start) return step == INT64_MIN ? 1 : (start - stop - 1) / -step + 1;
  } else if (start < stop) {
    return (stop - start - 1) / step + 1;
  }
  return 0;
}

OffsetStrided sliced(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides, std::int64_t offset,
                     std::span<const AxisSlice> slices) {
  const Ints st = full_strides(shape, strides);
  const std::size_t n = shape.size();
  if (slices.size() > n)
    throw InvalidArgumentError("The number of slices (" + std::to_string(slices.size()) +
                                ") is greater than the number of dimensions (" + std::to_string(n) + ").");
  OffsetStrided out{{}, offset};
  const auto move = [&](std::int64_t index, std::int64_t stride) {
    std::int64_t step = 0;
    if (!mul(index, stride, step) || !add(out.offset, step, out.offset))
      overflow("the slice offset overflows 64 bits");
  };
  bool empty = false;
  for (std::size_t i = 0; i < slices.size(); ++i) {
    const AxisSlice& s = slices[i];
    if (s.is_index) {
      std::int64_t index = s.start;
      if (!normalize_axis(index, static_cast<std::size_t>(shape[i])))
        throw InvalidArgumentError("Invalid index: " + std::to_string(s.start) + " out of range for axis " +
                                    std::to_string(i) + " with extent " + std::to_string(shape[i]));
      move(index, st[i]);
      continue;
    }
    std::int64_t start = s.start, stop = s.stop;
    const std::int64_t extent = adjust_slice(shape[i], start, stop, s.step);
    // An empty range's start may lie outside the axis: it moves nothing.
    if (extent > 0)
      move(start, st[i]);
    else
      empty = true;
    out.layout.shape.push_back(extent);
    std::int64_t stride = 0;
    if (!mul(st[i], s.step, stride))
      overflow("stride " + std::to_string(i) + " (" + std::to_string(st[i]) + ") times the step (" +
               std::to_string(s.step) + ") overflows 64 bits");
    out.layout.strides.push_back(stride);
  }
  for (std::size_t i = slices.size(); i < n; ++i) {
    out.layout.shape.push_back(shape[i]);
    out.layout.strides.push_back(st[i]);
  }
  if (empty) std::fill(out.layout.strides.begin(), out.layout.strides.end(), 0);
  return out;
}

namespace {
std::string axis_name(std::int64_t axis) { return "The axis " + std::to_string(axis); }
}  // namespace

Repacked repacked(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides, std::int64_t offset,
                  std::int64_t itemsize, std::int64_t new_itemsize, std::int64_t data_ptr, std::int64_t axis,
                  bool keep_dim) {
  const Ints st = full_strides(shape, strides);
  check_itemsize(itemsize);
  if (new_itemsize <= 0 || (new_itemsize & (new_itemsize - 1)) != 0)
    throw InvalidArgumentError("the new itemsize must be a power of two, got " + std::to_string(new_itemsize));
  Repacked out{{Strided{Ints(shape.begin(), shape.end()), st}, offset}, itemsize};
  if (new_itemsize == itemsize) return out;
  const std::size_t n = shape.size();
  const std::int64_t given = axis;
  if (!normalize_axis(axis, n))
    throw InvalidArgumentError("Invalid axis: " + std::to_string(given) + " out of range for " + dims(n));
  const auto a = static_cast<std::size_t>(axis);
  const bool pack = new_itemsize > itemsize;
  // Only a packed item must start on its own alignment.
  if (pack && data_ptr % new_itemsize != 0)
    throw InvalidArgumentError("The data pointer (" + std::to_string(data_ptr) +
                                ") must be aligned to the packed itemsize (" + std::to_string(new_itemsize) + ").");
  if (st[a] != 1)
    throw InvalidArgumentError(axis_name(axis) + " stride must be 1, got " + std::to_string(st[a]) + ".");
  if (shape[a] == 0)
    throw InvalidArgumentError(axis_name(axis) + " extent must be non-zero, got 0.");
  out.itemsize = new_itemsize;
  Strided& l = out.layout.layout;
  if (!pack) {
    const std::int64_t factor = itemsize / new_itemsize;
    l.shape[a] = checked_mul(shape[a], factor);
    for (std::size_t i = 0; i < n; ++i)
      if (i != a) l.strides[i] = checked_mul(st[i], factor);
    out.layout.offset = checked_mul(offset, factor);
    return out;
  }
  const std::int64_t factor = new_itemsize / itemsize;
  if (shape[a] % factor != 0)
    throw InvalidArgumentError(axis_name(axis) + " extent (" + std::to_string(shape[a]) + ") must be divisible by " +
                                std::to_string(factor) + ".");
  if (offset % factor != 0)
    throw InvalidArgumentError("The slice offset (" + std::to_string(offset) + ") must be divisible by " +
                                std::to_string(factor) + ".");
  for (std::size_t i = 0; i < n; ++i)
    if (i != a && st[i] % factor != 0)
      throw InvalidArgumentError("The " + std::to_string(i) + " axis stride (" + std::to_string(st[i]) +
                                  ") must be divisible by " + std::to_string(factor) + ".");
  out.layout.offset = offset / factor;
  l.shape[a] = shape[a] / factor;
  for (std::size_t i = 0; i < n; ++i)
    if (i != a) l.strides[i] = st[i] / factor;
  if (!keep_dim && l.shape[a] == 1) {
    l.shape.erase(l.shape.begin() + static_cast<std::ptrdiff_t>(a));
    l.strides.erase(l.strides.begin() + static_cast<std::ptrdiff_t>(a));
  }
  return out;
}

std::int64_t max_compatible_itemsize(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                                     std::int64_t offset, std::int64_t itemsize, std::int64_t max_itemsize,
                                     std::int64_t data_ptr, std::int64_t axis) {
  const Ints st = full_strides(shape, strides);
  check_positive(itemsize);
  if (max_itemsize <= 0)
    throw InvalidArgumentError("max_itemsize must be greater than zero, got " + std::to_string(max_itemsize) + ".");
  const std::int64_t given = axis;
  if (!normalize_axis(axis, shape.size()))
    throw InvalidArgumentError("Invalid axis: " + std::to_string(given) + " out of range for " + dims(shape.size()));
  if (max_itemsize < itemsize)
    throw InvalidArgumentError("max_itemsize (" + std::to_string(max_itemsize) + ") cannot be less than itemsize (" +
                                std::to_string(itemsize) + ").");
  // gcd in magnitudes: every term divides max_itemsize's range, and gcd(x, 0) = x.
  std::uint64_t g = std::gcd(static_cast<std::uint64_t>(max_itemsize), magnitude(data_ptr));
  const auto a = static_cast<std::size_t>(axis);
  if (st[a] != 1 || shape[a] == 0) return itemsize;
  const auto bytes = [&](std::int64_t v) { return magnitude(checked_mul(v, itemsize)); };
  g = std::gcd(g, bytes(offset));
  g = std::gcd(g, bytes(shape[a]));
  for (std::size_t i = 0; i < shape.size(); ++i)
    if (i != a) g = std::gcd(g, bytes(st[i]));
  return static_cast<std::int64_t>(g);
}

}  // namespace cucore
