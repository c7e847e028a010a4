#pragma once
// The strided layout of an array: its shape (extents), its strides in
// elements and its item size in bytes, and the facts everything that exchanges
// arrays asks of one: the dense strides of an axis order, contiguity, the
// element count, the offsets its elements reach and the bytes a buffer must
// hold. The one implementation: StridedMemoryView, its DLPack and array
// interface import, and the Python _StridedLayout (cuda.core's) all compute
// through these.
//
//   std::int64_t shape[] = {4, 3}, strides[2];
//   cucore::dense_strides(shape, cucore::LayoutOrder::f, strides);   // {1, 4}
//   cucore::is_contiguous_f(shape, strides);                         // true
//   cucore::required_size_in_bytes(shape, strides, 8);               // 96
//
// Conventions. Strides are in elements; an empty `strides` span means the
// layout is C-contiguous (the dense C strides of its shape). An extent of 1
// may have any stride, as NumPy has it; an array with no element (an extent
// of 0) is contiguous whatever its strides. A function that takes a shape and
// strides checks them first (check_extents, check_strides_rank). Errors:
// std::invalid_argument for a bad value (naming the axis and the value), and
// std::overflow_error for arithmetic on the layout that does not fit 64
// signed bits (never undefined behaviour, never a wrapped result). An item
// size is any positive number of bytes here (a 12-byte struct); only
// check_itemsize asks for a power of two.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace cucore {

// The two named orders of dense strides: C (the last axis has stride 1, the
// strides grow to the left) and F (the first axis has stride 1).
enum class LayoutOrder { c, f };

// ---- checks ---------------------------------------------------------------------
// Every extent is 0 or more: std::invalid_argument naming the first negative one.
void check_extents(std::span<const std::int64_t> shape);
// Strides given for a shape are one per axis: std::invalid_argument
// otherwise. (An empty strides span given to the functions below means
// C-contiguous and is not this check's.)
void check_strides_rank(std::size_t ndim, std::size_t nstrides);
// An item size is a power of two (1, 2, 4, ...): std::invalid_argument
// otherwise (what _StridedLayout and a view of a Buffer by itemsize take).
void check_itemsize(std::int64_t itemsize);

// ---- strides in bytes --------------------------------------------------------------
// Byte strides as element strides (into `out`, of the same size): each must be
// a whole number of items (std::invalid_argument naming it).
void strides_from_bytes(std::span<const std::int64_t> byte_strides, std::int64_t itemsize, std::span<std::int64_t> out);
// Element strides as byte strides: std::overflow_error naming a stride whose
// bytes do not fit.
void strides_to_bytes(std::span<const std::int64_t> strides, std::int64_t itemsize, std::span<std::int64_t> out);

// ---- counts -----------------------------------------------------------------------------
// The number of elements (0 when an extent is 0). std::overflow_error when the
// product of the non-zero extents does not fit, even for an empty shape: every
// dense stride of the shape then fits too.
std::int64_t volume(std::span<const std::int64_t> shape);
// volume(shape) * itemsize, with the same rule: std::overflow_error when the
// non-zero extents' product times the itemsize does not fit.
std::int64_t size_in_bytes(std::span<const std::int64_t> shape, std::int64_t itemsize);

// ---- dense strides ------------------------------------------------------------------
// The dense strides of `shape` in C or F order, into `out` (of the shape's
// size). Each is the product of the extents of the axes after it in the order
// (zeros included, so an empty shape has some strides of 0, as the views
// have always made them). std::overflow_error when one does not fit.
void dense_strides(std::span<const std::int64_t> shape, LayoutOrder order, std::span<std::int64_t> out);
// The same in the order of `axis_order`, a permutation of the axes (negative
// axes count from the end, as in Python): its last axis has stride 1, its
// first the largest. std::invalid_argument naming a permutation of another
// length, an axis out of range or an axis given twice.
void dense_strides(std::span<const std::int64_t> shape, std::span<const std::int64_t> axis_order,
                   std::span<std::int64_t> out);
std::vector<std::int64_t> dense_strides(std::span<const std::int64_t> shape, LayoutOrder order = LayoutOrder::c);
std::vector<std::int64_t> dense_strides(std::span<const std::int64_t> shape, std::span<const std::int64_t> axis_order);

// The order of the strides, into `out` (of the shape's size): the axes from
// the largest stride (by magnitude) to the smallest, ties to the larger
// extent, then to the lower axis; 0, 1, ... for C-contiguous (empty) strides.
// The order dense_strides(shape, axis_order) turns back into strides
// (cuda.core's _StridedLayout.stride_order, and its "K" order).
void stride_order(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                  std::span<std::int64_t> out);

// ---- contiguity --------------------------------------------------------------------------
// The strides are exactly the dense C strides of the shape, but for extents
// of 1 (whose stride is free): also for an empty shape, whose strides are
// otherwise free. What a StridedMemoryView reports as strides None.
bool has_dense_c_strides(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides);
// Contiguous in C order, in F order, or in some order of the axes (C order
// once the axes are permuted): every element at its own offset in
// [0, volume) with nothing between. Empty shapes are all three.
bool is_contiguous_c(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides);
bool is_contiguous_f(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides);
bool is_contiguous_any(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides);

// ---- reach ----------------------------------------------------------------------------------
// The lowest and highest offset (in elements) that an element reaches, from
// the element at index 0, ..., 0 placed at `slice_offset` (where slicing put
// it: see sliced); {0, -1} for an empty shape. std::overflow_error naming the
// stride when a reach does not fit.
struct OffsetBounds {
  std::int64_t min = 0, max = -1;
  friend constexpr bool operator==(const OffsetBounds&, const OffsetBounds&) = default;
};
OffsetBounds offset_bounds(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                           std::int64_t slice_offset = 0);
// The same in bytes, as a half-open range: [min * itemsize, (max + 1) * itemsize)
// ({0, 0} for an empty shape). std::overflow_error when either does not fit.
struct ByteBounds {
  std::int64_t begin = 0, end = 0;
  friend constexpr bool operator==(const ByteBounds&, const ByteBounds&) = default;
};
ByteBounds byte_bounds(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                       std::int64_t itemsize);
// What memory must hold from its start, the element at index 0, ..., 0 at
// `slice_offset`: max + 1 elements (0 for an empty shape), in bytes times the
// itemsize. std::invalid_argument when negative strides reach before the
// start (no size from there holds the layout); std::overflow_error when it
// does not fit.
std::int64_t required_span(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                           std::int64_t slice_offset = 0);
std::int64_t required_size_in_bytes(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                                    std::int64_t itemsize, std::int64_t slice_offset = 0);
// slice_offset * itemsize: std::overflow_error when it does not fit.
std::int64_t offset_in_bytes(std::int64_t slice_offset, std::int64_t itemsize);

// ---- transformations ---------------------------------------------------------------------
// New layouts of the same elements (cuda.core's _StridedLayout methods). Each
// takes a shape and strides (empty: C-contiguous; all 0 when an extent is 0)
// and returns the new shape with its strides, always spelled out. Axes may be negative (from the end).
struct Strided {
  std::vector<std::int64_t> shape{}, strides{};
  friend bool operator==(const Strided&, const Strided&) = default;
};
// The axes in the order of `axis_order`, a permutation of them.
// std::invalid_argument for one of another length, an axis out of range or
// given twice.
Strided permuted(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                 std::span<const std::int64_t> axis_order);
// Without the extents of 1; an empty layout (an extent of 0) as shape {0},
// strides {0}.
Strided squeezed(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides);
// With extents of 1 inserted at `axes` (axes of the result, unique). The new
// axis takes the stride that spans the axis after it (extent * stride), or the
// last stride at the end, or 1 for a 0-d layout.
Strided unsqueezed(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                   std::span<const std::int64_t> axes);
// Bit i (1 <= i < ndim) set: axis i merges with axis i - 1 (in C index order,
// strides[i - 1] == strides[i] * shape[i]). Masks of layouts of one ndim AND
// together; flattened merges only the axes whose bits are set.
std::uint64_t flattened_axis_mask(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides);
// The mask of the axes in [start_axis, end_axis] (inclusive, negative from the
// end): every bit of (start_axis, end_axis]. std::invalid_argument naming an
// axis out of range.
std::uint64_t axis_range_mask(std::size_t ndim, std::int64_t start_axis, std::int64_t end_axis);
// Runs of mergeable axes (bits of `mask`) as one axis each. A 0-d layout is
// shape {1}, strides {1}.
Strided flattened(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides, std::uint64_t mask);
// The same elements in C index order under `new_shape` (one extent may be -1:
// inferred). std::invalid_argument when the volumes differ, the -1 cannot be
// inferred, or the strides cannot be split to the new shape.
Strided reshaped(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                 std::span<const std::int64_t> new_shape);
// Broadcast to `new_shape` (as NumPy): from the right each extent is 1 or the
// new one; added axes and broadcast extents of 1 get stride 0.
// std::invalid_argument otherwise.
Strided broadcast_to(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                     std::span<const std::int64_t> new_shape);
// Every element at its own offset, by a sufficient test: with the extents of 1
// dropped, no stride is 0 and, sorted by magnitude, each stride spans the
// extent times the stride below it. True for every layout made from a dense one
// by the transformations above (broadcast aside); a layout that interleaves
// its axes may be unique yet report false (as cuda.core's is_unique may).
bool is_unique(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides);

// ---- slicing and repacking ---------------------------------------------------------------
// A layout whose element at index 0, ..., 0 lies `offset` elements from the
// memory's start (what slicing moves; a view of the memory starts there).
struct OffsetStrided {
  Strided layout{};
  std::int64_t offset = 0;
  friend bool operator==(const OffsetStrided&, const OffsetStrided&) = default;
};
// One entry of layout[...]: an index, which removes its axis, or a range
// start:stop:step as Python's slice gives them after PySlice_Unpack (an open
// end is kOpenLow or kOpenHigh; the step is not 0).
struct AxisSlice {
  static constexpr std::int64_t kOpenLow = INT64_MIN, kOpenHigh = INT64_MAX;
  bool is_index = false;
  std::int64_t start = 0, stop = kOpenHigh, step = 1;
  static AxisSlice index(std::int64_t i) { return {true, i, 0, 1}; }
  // start:stop:step; the open ends of Python's slice(None, None, step).
  static AxisSlice range(std::int64_t start, std::int64_t stop, std::int64_t step = 1) {
    return {false, start, stop, step};
  }
  static AxisSlice all(std::int64_t step = 1) {
    return step < 0 ? range(kOpenHigh, kOpenLow, step) : range(0, kOpenHigh, step);
  }
};
// The extent start:stop:step selects from `extent`, with start and stop
// clamped into the axis as Python's PySlice_AdjustIndices does (start is
// then the first index taken when the result is not 0). std::invalid_argument
// for a step of 0.
std::int64_t adjust_slice(std::int64_t extent, std::int64_t& start, std::int64_t& stop, std::int64_t step);
// layout[slices] (cuda.core's _StridedLayout.sliced, NumPy's basic indexing):
// the slices apply to the leading axes, the rest stay. An index in
// [-extent, extent) drops its axis and moves the offset by index * stride; a
// range keeps its axis with the selected extent and stride * step, moving
// the offset by start * stride when it selects anything. When an extent ends
// up 0 every stride is 0. `offset` is the layout's own offset (the result
// adds to it). std::invalid_argument for more slices than axes or an index
// out of range (naming the axis and its extent); std::overflow_error for
// strides or an offset beyond 64 bits.
OffsetStrided sliced(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides, std::int64_t offset,
                     std::span<const AxisSlice> slices);
// The same memory seen with items of `new_itemsize` bytes (both item sizes
// powers of two; cuda.core's repacked): `axis` (stride 1, extent not 0) holds itemsize /
// new_itemsize times as many items when they shrink (the other strides and
// the offset scale up), or new_itemsize / itemsize times fewer when they grow,
// which asks that the extent, the other strides and the offset divide by that
// factor and that `data_ptr` (the memory's start, 0: unknown) be aligned to
// new_itemsize; without keep_dim an axis packed down to extent 1 is dropped.
// The same layout for the same itemsize. std::invalid_argument naming the
// value that does not fit; std::overflow_error beyond 64 bits.
struct Repacked {
  OffsetStrided layout{};
  std::int64_t itemsize = 0;
};
Repacked repacked(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides, std::int64_t offset,
                  std::int64_t itemsize, std::int64_t new_itemsize, std::int64_t data_ptr = 0, std::int64_t axis = -1,
                  bool keep_dim = true);
// The largest item size, up to max_itemsize, repacked could take along
// `axis`: the gcd of max_itemsize, |data_ptr| and in bytes the offset, the
// extent of `axis` and the other strides' magnitudes; `itemsize` itself when
// the axis' stride is not 1 or its extent is 0. std::invalid_argument for an
// axis out of range (a 0-d layout has none) or a max_itemsize below itemsize.
std::int64_t max_compatible_itemsize(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                                     std::int64_t offset, std::int64_t itemsize, std::int64_t max_itemsize = 16,
                                     std::int64_t data_ptr = 0, std::int64_t axis = -1);

}  // namespace cucore
