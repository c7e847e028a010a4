#include <cucore/strided_memory_view.hpp>

#include <cucore/errors.hpp>

#include <cstdint>
#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "loader/driver.hpp"
#include "runtime/stream_context.hpp"

namespace cucore {

using detail::check;
using detail::driver;

bool is_contiguous_c(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides) noexcept {
  if (strides.empty()) return true;
  std::int64_t expect = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 0) return true;  // no elements: any strides
    if (shape[i] != 1 && strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

bool is_contiguous_f(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides) noexcept {
  if (strides.empty()) {  // C-contiguous: F-contiguous too when at most one extent exceeds 1
    int big = 0;
    for (std::int64_t e : shape) {
      if (e == 0) return true;
      big += e > 1;
    }
    return big <= 1;
  }
  std::int64_t expect = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return true;
    if (shape[i] != 1 && strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

namespace {

[[noreturn]] void invalid(const std::string& what) { throw std::invalid_argument("StridedMemoryView: " + what); }

bool known_device_type(dlpack::DLDeviceType t) {
  return t == dlpack::kDLCPU || t == dlpack::kDLCUDA || t == dlpack::kDLCUDAHost || t == dlpack::kDLCUDAManaged;
}

// What an exported tensor owns: its shape and strides, and the shares that
// keep the memory alive until the consumer calls the deleter.
template <typename Managed>
struct Export {
  Managed tensor{};
  std::vector<std::int64_t> dims;
  std::shared_ptr<const void> view_owner, owner;
};

template <typename Managed>
Managed* export_view(const StridedMemoryView& v, std::shared_ptr<const void> owner) {
  auto e = std::make_unique<Export<Managed>>();
  e->dims.assign(v.shape().begin(), v.shape().end());
  e->dims.insert(e->dims.end(), v.strides().begin(), v.strides().end());
  e->view_owner = v.owner();
  e->owner = std::move(owner);
  dlpack::DLTensor& d = e->tensor.dl_tensor;
  d.data = v.data();
  d.device = v.device();
  d.ndim = v.ndim();
  d.dtype = v.dtype().to_dlpack();
  d.shape = v.ndim() ? e->dims.data() : nullptr;
  d.strides = v.ndim() ? e->dims.data() + v.ndim() : nullptr;  // DLPack 1.2 wants strides even when compact
  d.byte_offset = 0;
  if constexpr (std::is_same_v<Managed, dlpack::DLManagedTensorVersioned>) {
    e->tensor.version = {dlpack::kMajor, dlpack::kMinor};
    e->tensor.flags = v.readonly() ? dlpack::kDLFlagBitMaskReadOnly : 0;
  }
  e->tensor.manager_ctx = e.get();
  e->tensor.deleter = [](Managed* self) { delete static_cast<Export<Managed>*>(self->manager_ctx); };
  return &e.release()->tensor;
}

template <typename Managed>
std::shared_ptr<const void> deleter_owner(Managed* tensor) {
  return std::shared_ptr<const void>(tensor, [](const void* p) {
    auto* t = static_cast<Managed*>(const_cast<void*>(p));
    if (t->deleter) t->deleter(t);
  });
}

}  // namespace

dlpack::DLDevice dlpack_device_of(const Buffer& b) {
  if (b.is_closed()) detail::throw_closed("Buffer", "dlpack_device_of");
  if (b.is_managed()) return {dlpack::kDLCUDAManaged, 0};
  const bool dev = b.is_device_accessible(), host = b.is_host_accessible();
  if (dev && host) return {dlpack::kDLCUDAHost, 0};
  if (dev) {
    const int id = b.device_id();
    return {dlpack::kDLCUDA, id >= 0 ? id : 0};
  }
  return {dlpack::kDLCPU, 0};
}

StridedMemoryView::StridedMemoryView(void* data, std::span<const std::int64_t> shape,
                                     std::span<const std::int64_t> strides, DataType dtype, dlpack::DLDevice device,
                                     bool readonly, std::shared_ptr<const void> owner)
    : data_(data), dtype_(dtype), device_(device), readonly_(readonly), owner_(std::move(owner)) {
  if (!strides.empty() && strides.size() != shape.size())
    invalid("strides has " + std::to_string(strides.size()) + " entries for a shape of " +
            std::to_string(shape.size()));
  if (!known_device_type(device.device_type))
    invalid("device type " + std::to_string(static_cast<int>(device.device_type)) +
            " is not CPU, CUDA, CUDA host or CUDA managed memory");
  if (dtype.bits == 0 || dtype.lanes == 0) invalid("the element type has no size");
  dims_.resize(shape.size() * 2);
  std::int64_t step = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] < 0) invalid("extent " + std::to_string(i) + " is negative (" + std::to_string(shape[i]) + ")");
    dims_[i] = shape[i];
    dims_[shape.size() + i] = strides.empty() ? step : strides[i];
    step *= shape[i];
  }
}

StridedMemoryView StridedMemoryView::from_buffer(const Buffer& buffer, std::span<const std::int64_t> shape,
                                                 std::span<const std::int64_t> strides, DataType dtype,
                                                 bool readonly) {
  if (buffer.is_closed()) detail::throw_closed("Buffer", "StridedMemoryView::from_buffer");
  StridedMemoryView v(buffer.data(), shape, strides, dtype, dlpack_device_of(buffer), readonly);
  const std::size_t need = v.span_bytes();
  if (need > buffer.size())
    invalid("from_buffer: the layout reaches " + std::to_string(need) + " bytes but the buffer has " +
            std::to_string(buffer.size()));
  return v;
}

StridedMemoryView StridedMemoryView::from_dltensor(const dlpack::DLTensor& t, bool readonly) {
  if (t.ndim < 0) invalid("DLPack tensor with ndim " + std::to_string(t.ndim));
  if (t.ndim > 0 && !t.shape) invalid("DLPack tensor without a shape");
  const std::size_t n = static_cast<std::size_t>(t.ndim);
  return StridedMemoryView(static_cast<char*>(t.data) + t.byte_offset, {t.shape, t.shape ? n : 0},
                           {t.strides, t.strides ? n : 0}, DataType::from_dlpack(t.dtype), t.device, readonly);
}

StridedMemoryView StridedMemoryView::from_dlpack(const dlpack::DLManagedTensorVersioned* t) {
  if (!t) invalid("from_dlpack: the tensor is null");
  if (t->version.major != dlpack::kMajor)
    invalid("from_dlpack: DLPack version " + std::to_string(t->version.major) + "." +
            std::to_string(t->version.minor) + " (cucore reads major version " + std::to_string(dlpack::kMajor) + ")");
  return from_dltensor(t->dl_tensor, (t->flags & dlpack::kDLFlagBitMaskReadOnly) != 0);
}

StridedMemoryView StridedMemoryView::from_dlpack(const dlpack::DLManagedTensor* t) {
  if (!t) invalid("from_dlpack: the tensor is null");
  return from_dltensor(t->dl_tensor);
}

StridedMemoryView StridedMemoryView::adopt_dlpack(dlpack::DLManagedTensorVersioned* t) {
  auto owner = t ? deleter_owner(t) : nullptr;  // released on every path from here
  StridedMemoryView v = from_dlpack(t);
  v.owner_ = std::move(owner);
  return v;
}

StridedMemoryView StridedMemoryView::adopt_dlpack(dlpack::DLManagedTensor* t) {
  auto owner = t ? deleter_owner(t) : nullptr;
  StridedMemoryView v = from_dlpack(t);
  v.owner_ = std::move(owner);
  return v;
}

std::int64_t StridedMemoryView::size() const noexcept {
  std::int64_t n = 1;
  for (std::int64_t e : shape()) n *= e;
  return n;
}

int StridedMemoryView::device_id() const noexcept {
  return device_.device_type == dlpack::kDLCPU ? -1 : device_.device_id;
}

bool StridedMemoryView::is_device_accessible() const noexcept { return device_.device_type != dlpack::kDLCPU; }

bool StridedMemoryView::is_host_accessible() const noexcept { return device_.device_type != dlpack::kDLCUDA; }

std::size_t StridedMemoryView::span_bytes() const {
  if (size() == 0) return 0;
  std::int64_t last = 0;
  for (int i = 0; i < ndim(); ++i) {
    if (strides()[i] < 0) invalid("stride " + std::to_string(i) + " is negative");
    last += (shape()[i] - 1) * strides()[i];
  }
  return static_cast<std::size_t>(last + 1) * itemsize();
}

void StridedMemoryView::check_element_type(DataType want, std::size_t size) const {
  if (want != dtype_ || size != itemsize())
    invalid("data_as: the view's elements are DLPack type (code " + std::to_string(int(dtype_.code)) + ", " +
            std::to_string(int(dtype_.bits)) + " bits, " + std::to_string(dtype_.lanes) +
            " lanes), not the requested type");
}

dlpack::DLManagedTensorVersioned* StridedMemoryView::to_dlpack(std::shared_ptr<const void> owner) const {
  return export_view<dlpack::DLManagedTensorVersioned>(*this, std::move(owner));
}

dlpack::DLManagedTensor* StridedMemoryView::to_dlpack_unversioned(std::shared_ptr<const void> owner) const {
  return export_view<dlpack::DLManagedTensor>(*this, std::move(owner));
}

void StridedMemoryView::copy_from(const StridedMemoryView& src, StreamRef stream) const {
  if (readonly_) invalid("copy_from: the destination view is read-only");
  if (src.ndim() != ndim() || !std::equal(shape().begin(), shape().end(), src.shape().begin()))
    invalid("copy_from: the shapes differ");
  if (src.itemsize() != itemsize())
    invalid("copy_from: the item sizes differ (" + std::to_string(src.itemsize()) + " and " +
            std::to_string(itemsize()) + " bytes)");
  const bool both_c = is_contiguous_c() && src.is_contiguous_c();
  const bool both_f = is_contiguous_f() && src.is_contiguous_f();
  if (!both_c && !both_f)
    invalid("copy_from: both views must be contiguous in the same order (C or F); copy through a contiguous "
            "temporary");
  detail::StreamContextGuard guard(stream, "StridedMemoryView::copy_from");
  const std::size_t n = static_cast<std::size_t>(size()) * itemsize();
  if (n == 0) return;
  check(driver().cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(data_), reinterpret_cast<CUdeviceptr>(src.data_), n,
                               stream.handle()),
        "cuMemcpyAsync");
}

}  // namespace cucore
