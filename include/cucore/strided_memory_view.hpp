#pragma once
// StridedMemoryView: a typed, non-owning description of a strided array
// (pointer, shape, strides in elements, element type, device), as cuda.core's
// StridedMemoryView. Made from a Buffer, from a DLPack tensor (DLPack 0.x or
// 1.x: PyTorch's at::toDLPack, ...) or from plain values; exported as a DLPack
// tensor, so C++ code exchanges tensors with any DLPack consumer, copies
// between views, and describes the memory of a TMA tensor map.
//
//   auto v = cucore::StridedMemoryView::from_buffer(buf, {rows, cols}, {}, cucore::DataType::of<float>());
//   DLManagedTensorVersioned* t = v.to_dlpack(owner);   // a consumer calls t->deleter
//
// The view never frees what it describes: the memory must outlive it, or ride
// in its owner (a shared_ptr it keeps; adopt_dlpack puts the tensor's deleter
// there).
#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <cucore/buffer.hpp>
#include <cucore/dlpack.hpp>
#include <cucore/stream.hpp>
#include <cucore/strided_layout.hpp>  // the layout arithmetic every view uses

namespace cucore {

// An element type as DLPack describes it (type code, bits, lanes).
struct DataType {
  dlpack::DLDataTypeCode code = dlpack::kDLUInt;
  std::uint8_t bits = 8;
  std::uint16_t lanes = 1;

  // Bytes per element (bits rounded up to whole bytes, times lanes).
  constexpr std::size_t itemsize() const noexcept { return (std::size_t(bits) + 7) / 8 * lanes; }
  constexpr dlpack::DLDataType to_dlpack() const noexcept { return {code, bits, lanes}; }
  static constexpr DataType from_dlpack(dlpack::DLDataType t) noexcept {
    return {static_cast<dlpack::DLDataTypeCode>(t.code), t.bits, t.lanes};
  }
  friend constexpr bool operator==(const DataType&, const DataType&) = default;

  // The DataType of a C++ arithmetic type (bool, integers, float, double).
  template <typename T>
  static constexpr DataType of() noexcept {
    static_assert(std::is_arithmetic_v<T>, "DataType::of<T>: T must be bool, an integer or a floating-point type");
    if constexpr (std::is_same_v<T, bool>)
      return {dlpack::kDLBool, 8, 1};
    else if constexpr (std::is_floating_point_v<T>)
      return {dlpack::kDLFloat, static_cast<std::uint8_t>(sizeof(T) * 8), 1};
    else if constexpr (std::is_signed_v<T>)
      return {dlpack::kDLInt, static_cast<std::uint8_t>(sizeof(T) * 8), 1};
    else
      return {dlpack::kDLUInt, static_cast<std::uint8_t>(sizeof(T) * 8), 1};
  }
};

// The most dimensions a view has (DLPack's consumers, NumPy and PyTorch, stop
// at 64): a tensor that claims more is refused before its shape is read.
inline constexpr int kMaxNdim = 64;
// Views (and exported tensors) of up to this many dimensions keep their shape
// and strides inline: making one per interop call allocates nothing for them.
inline constexpr int kInlineNdim = 6;

// A reference counted by its own owner (a Python object, ...), kept by an
// exported tensor until its consumer calls the deleter: `release(object)`
// drops it. Unlike a shared_ptr owner it costs the export no allocation.
struct ForeignRef {
  void* object = nullptr;
  void (*release)(void* object) noexcept = nullptr;
};

// Where a Buffer's memory lives, as DLPack says it (and cuda.core reports it):
// device memory (kDLCUDA, its device), pinned host memory (kDLCUDAHost, 0),
// managed memory (kDLCUDAManaged, 0) or plain host memory (kDLCPU, 0). The
// resource's word where it has one (MemoryResource::Impl::reports_memory_kind:
// no driver call), else the driver's (Buffer::is_managed). Buffer.__dlpack__
// and __dlpack_device__ in Python are this, as are views from_buffer.
dlpack::DLDevice dlpack_device_of(const Buffer& buffer);

// A Buffer's bytes as the tensor cuda.core's Buffer.__dlpack__ gives (1-D
// int8, stride 1) at `device` (dlpack_device_of(buffer), or kDLCPU for memory
// the host can read), filled in directly: no view is built and no layout
// checked, for an export made per interop call. `keep` as in
// StridedMemoryView::to_dlpack (released at once if the export fails).
dlpack::DLManagedTensorVersioned* buffer_to_dlpack(const Buffer& buffer, dlpack::DLDevice device, ForeignRef keep);
dlpack::DLManagedTensor* buffer_to_dlpack_unversioned(const Buffer& buffer, dlpack::DLDevice device,
                                                      ForeignRef keep);

// The checks StridedMemoryView::from_dltensor makes, without making a view, for
// a caller that reads the tensor's shape and strides itself: ndim in 0..64, a
// shape (and no negative extent) when ndim > 0, and no arithmetic on the layout
// (element count, byte offset, strides times extents) that overflows or wraps
// the address space. Throws std::invalid_argument saying which.
void check_dltensor(const dlpack::DLTensor& tensor);
// The same for a managed tensor (not null; a versioned one of DLPack major
// version 1), as from_dlpack checks it.
void check_dlpack(const dlpack::DLManagedTensorVersioned* tensor);
void check_dlpack(const dlpack::DLManagedTensor* tensor);

// An array as NumPy's array interface and the CUDA Array Interface (v3)
// describe one, in plain values: the Python module reads the dicts into this
// and StridedMemoryView::from_array_interface checks and takes it.
struct ArrayInterface {
  std::uintptr_t data = 0;                               // "data"[0] (0: no memory, for an empty array)
  bool readonly = false;                                 // "data"[1]
  std::string_view typestr{};                              // "typestr": "<f4", "|u1", "|V16", ...
  std::span<const std::int64_t> shape{};                   // "shape"
  std::optional<std::span<const std::int64_t>> strides{};  // "strides", in bytes; none: C-contiguous
  dlpack::DLDevice device{dlpack::kDLCPU, 0};
};

// A typestr's element: its size in bytes, and its DLPack type where DLPack has
// one (none for structs, strings, datetimes, the other byte order, ...).
struct TypeStr {
  std::size_t itemsize = 0;
  std::optional<DataType> dtype{};
};
// Reads a typestr: a byte order ('<', '>', '|', '='), a kind letter and the
// size in bytes (1 to 65535), and for datetimes a unit ("<M8[ns]"). Throws
// std::invalid_argument for anything else.
TypeStr parse_typestr(std::string_view typestr);

namespace detail {
// cucore::dlpack's struct with the layout of another library's DLPack managed tensor.
template <typename T>
using dlpack_layout_of = std::conditional_t<requires(T* t) { t->version; }, dlpack::DLManagedTensorVersioned,
                                            dlpack::DLManagedTensor>;
template <typename T>
concept foreign_dlpack_tensor =
    requires(T* t) {
      t->dl_tensor;
      t->deleter;
      t->manager_ctx;
    } && !std::is_same_v<std::remove_cv_t<T>, dlpack::DLManagedTensor> &&
    !std::is_same_v<std::remove_cv_t<T>, dlpack::DLManagedTensorVersioned> &&
    sizeof(T) == sizeof(dlpack_layout_of<T>);
}  // namespace detail

class StridedMemoryView {
 public:
  StridedMemoryView() = default;  // empty: no data, ndim 0
  // Copies copy the dimensions in use only (the inline ones are not zeroed).
  StridedMemoryView(const StridedMemoryView& o)
      : data_(o.data_), ndim_(o.ndim_), big_dims_(o.big_dims_), dtype_(o.dtype_), device_(o.device_),
        readonly_(o.readonly_), owner_(o.owner_) {
    copy_inline(o);
  }
  StridedMemoryView(StridedMemoryView&& o) noexcept
      : data_(o.data_), ndim_(o.ndim_), big_dims_(std::move(o.big_dims_)), dtype_(o.dtype_), device_(o.device_),
        readonly_(o.readonly_), owner_(std::move(o.owner_)) {
    copy_inline(o);
  }
  StridedMemoryView& operator=(const StridedMemoryView& o) {
    if (this != &o) *this = StridedMemoryView(o);
    return *this;
  }
  StridedMemoryView& operator=(StridedMemoryView&& o) noexcept {
    if (this == &o) return *this;
    data_ = o.data_;
    ndim_ = o.ndim_;
    big_dims_ = std::move(o.big_dims_);
    dtype_ = o.dtype_;
    device_ = o.device_;
    readonly_ = o.readonly_;
    owner_ = std::move(o.owner_);
    copy_inline(o);
    return *this;
  }
  ~StridedMemoryView() = default;
  // A view of `data`. Empty `strides`: C-contiguous. Throws
  // std::invalid_argument for more than kMaxNdim dimensions, a negative extent,
  // strides of another rank, an element type with no size, a device type
  // cucore does not know, or a layout whose element count, size in bytes or
  // reach from `data` (first to last element) overflows or wraps the address
  // space.
  StridedMemoryView(void* data, std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                    DataType dtype, dlpack::DLDevice device, bool readonly = false,
                    std::shared_ptr<const void> owner = {});

  // A view of `buffer`'s memory (its device and kind: device, pinned, managed,
  // host) with this shape and strides; every element must lie inside the
  // buffer (std::invalid_argument). The Buffer must outlive the view.
  static StridedMemoryView from_buffer(const Buffer& buffer, std::initializer_list<std::int64_t> shape,
                                       std::initializer_list<std::int64_t> strides, DataType dtype,
                                       bool readonly = false) {
    return from_buffer(buffer, std::span<const std::int64_t>(shape.begin(), shape.size()),
                       std::span<const std::int64_t>(strides.begin(), strides.size()), dtype, readonly);
  }
  static StridedMemoryView from_buffer(const Buffer& buffer, std::span<const std::int64_t> shape,
                                       std::span<const std::int64_t> strides, DataType dtype, bool readonly = false);

  // A view of a DLPack tensor, which stays its producer's: it must outlive the
  // view and be released (its deleter) by the caller. Readonly from the
  // versioned tensor's flag. Throws std::invalid_argument for a DLPack major
  // version other than 1, and for what check_dltensor refuses (checked before
  // the shape and strides are read).
  static StridedMemoryView from_dlpack(const dlpack::DLManagedTensorVersioned* tensor);
  static StridedMemoryView from_dlpack(const dlpack::DLManagedTensor* tensor);
  static StridedMemoryView from_dltensor(const dlpack::DLTensor& tensor, bool readonly = false);
  // The same, taking ownership: the tensor's deleter runs when the view and
  // its last copy are gone, or at once if the view cannot be made; with
  // `release_if_refused` false a refused tensor stays the caller's (a DLPack
  // capsule that must stay unconsumed), and is taken only once accepted.
  static StridedMemoryView adopt_dlpack(dlpack::DLManagedTensorVersioned* tensor, bool release_if_refused = true);
  static StridedMemoryView adopt_dlpack(dlpack::DLManagedTensor* tensor, bool release_if_refused = true);
  // A view of an array interface's array (strides converted from bytes to
  // elements). Its element type is the typestr's DLPack type, or, where DLPack
  // has none, `itemsize` bytes (DataType{kDLUInt, 8, itemsize}). Throws
  // std::invalid_argument for a malformed typestr, strides of another rank or
  // not a whole number of items, and what the constructor refuses.
  static StridedMemoryView from_array_interface(const ArrayInterface& array);
  // Another library's DLPack structs (PyTorch's ::DLManagedTensor, ...): the
  // same layout as cucore::dlpack's, so taken as they are.
  template <detail::foreign_dlpack_tensor T>
  static StridedMemoryView from_dlpack(T* tensor) {
    return from_dlpack(reinterpret_cast<const detail::dlpack_layout_of<T>*>(tensor));
  }
  template <detail::foreign_dlpack_tensor T>
  static StridedMemoryView adopt_dlpack(T* tensor) {
    return adopt_dlpack(reinterpret_cast<detail::dlpack_layout_of<T>*>(tensor));
  }

  void* data() const noexcept { return data_; }
  std::uintptr_t ptr() const noexcept { return reinterpret_cast<std::uintptr_t>(data_); }
  int ndim() const noexcept { return ndim_; }
  std::span<const std::int64_t> shape() const noexcept { return {dims(), std::size_t(ndim_)}; }
  std::span<const std::int64_t> strides() const noexcept {  // in elements, always filled
    return {dims() + ndim_, std::size_t(ndim_)};
  }
  std::int64_t size() const noexcept { return cucore::volume(shape()); }  // fits: checked when made
  DataType dtype() const noexcept { return dtype_; }
  std::size_t itemsize() const noexcept { return dtype_.itemsize(); }
  dlpack::DLDevice device() const noexcept { return device_; }
  // The CUDA device, or -1 for memory only the host reaches.
  int device_id() const noexcept { return device_.device_type == dlpack::kDLCPU ? -1 : device_.device_id; }
  bool is_device_accessible() const noexcept { return device_.device_type != dlpack::kDLCPU; }
  bool is_host_accessible() const noexcept { return device_.device_type != dlpack::kDLCUDA; }
  bool readonly() const noexcept { return readonly_; }
  const std::shared_ptr<const void>& owner() const noexcept { return owner_; }
  bool is_contiguous_c() const noexcept { return cucore::is_contiguous_c(shape(), strides()); }
  bool is_contiguous_f() const noexcept { return cucore::is_contiguous_f(shape(), strides()); }
  // Bytes from the first element to one past the last (0 when empty): what
  // the memory must hold (required_size_in_bytes). Negative strides that
  // reach before the first element are std::invalid_argument.
  std::size_t span_bytes() const;

  // The data as T*, checking that T is the element type (std::invalid_argument).
  template <typename T>
  T* data_as() const {
    check_element_type(DataType::of<std::remove_cv_t<T>>(), sizeof(T));
    return static_cast<T*>(data_);
  }

  // Fills `out` with a DLTensor describing the view, owning nothing: its shape
  // and strides point into the view, valid while it lives unchanged (the
  // DLPack exchange API's non-owning form). Written in place, field by field:
  // the exchange API asks for one per interop call.
  void describe(dlpack::DLTensor& out) const noexcept {
    out.data = data_;
    out.device = device_;
    out.ndim = ndim_;
    out.dtype = dtype_.to_dlpack();
    out.shape = ndim_ ? const_cast<std::int64_t*>(dims()) : nullptr;
    out.strides = ndim_ ? const_cast<std::int64_t*>(dims()) + ndim_ : nullptr;  // DLPack 1.2 wants them even when compact
    out.byte_offset = 0;
  }
  // A DLPack tensor describing the view, for a consumer that calls its
  // deleter; `owner` (and the view's own owner) stay alive until then.
  dlpack::DLManagedTensorVersioned* to_dlpack(std::shared_ptr<const void> owner = {}) const;
  dlpack::DLManagedTensor* to_dlpack_unversioned(std::shared_ptr<const void> owner = {}) const;
  // The same, keeping `keep` (released by the deleter, or at once when the
  // export fails): one allocation per export for up to kInlineNdim dimensions.
  dlpack::DLManagedTensorVersioned* to_dlpack(ForeignRef keep) const;
  dlpack::DLManagedTensor* to_dlpack_unversioned(ForeignRef keep) const;

  // Copies `src` into this view on `stream` (host, device, pinned or managed
  // memory on either side). Shapes and item sizes must match and both views
  // must be contiguous in the same order (C or F); this view must be
  // writable. Throws std::invalid_argument naming what differs.
  void copy_from(const StridedMemoryView& src, StreamRef stream) const;
  void copy_to(const StridedMemoryView& dst, StreamRef stream) const { dst.copy_from(*this, stream); }

 private:
  void check_element_type(DataType want, std::size_t size) const;
  template <typename Managed>
  static StridedMemoryView adopt(Managed* tensor, bool release_if_refused);
  const std::int64_t* dims() const noexcept { return ndim_ <= kInlineNdim ? inline_dims_ : big_dims_.data(); }
  std::int64_t* dims() noexcept { return ndim_ <= kInlineNdim ? inline_dims_ : big_dims_.data(); }
  void copy_inline(const StridedMemoryView& o) noexcept {
    if (ndim_ <= kInlineNdim)
      for (int i = 0; i < 2 * ndim_; ++i) inline_dims_[i] = o.inline_dims_[i];
  }
  void* data_ = nullptr;
  int ndim_ = 0;
  // Shape, then strides: inline up to kInlineNdim dimensions (the first
  // 2 * ndim entries are set), else in big_dims_.
  std::int64_t inline_dims_[2 * kInlineNdim];
  std::vector<std::int64_t> big_dims_;
  DataType dtype_{};
  dlpack::DLDevice device_{dlpack::kDLCPU, 0};
  bool readonly_ = false;
  std::shared_ptr<const void> owner_;
};

}  // namespace cucore
