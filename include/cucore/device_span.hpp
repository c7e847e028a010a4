#pragma once
// DeviceSpan<T>: a typed, non-owning view of device memory, a pointer and an
// element count, as std::span is for host memory (RMM's device_span, the view
// of cudax's buffer<T>). Buffer::as<T>() makes one over a Buffer (a const
// Buffer gives a DeviceSpan<const T>); MemoryResource::allocate<T>(n, stream)
// counts elements rather than bytes.
//
//   Buffer x = mr.allocate<float>(n, stream), y = mr.allocate<float>(n, stream);
//   x.copy_from(host_x, stream);                        // any contiguous range
//   DeviceSpan<const float> in = std::as_const(x).as<float>();
//   DeviceSpan<float> out = y.as<float>();
//   launch(stream, config, saxpy, 2.0f, in, out, n);    // const float*, float*
//   out.subspan(0, 10).copy_to(first_ten, stream);      // element counts
//
// It never owns: the memory it views (a Buffer) must outlive it and the work
// queued over it. The pointer is a device address, so a DeviceSpan has no
// begin()/end() or operator[] (it is not a host range); copy it to a host
// range to read it. Const is the elements': a DeviceSpan<const T> cannot be
// copied into or filled (a compile error), goes to kernels only as const T*
// (TypedKernel) and converts from a DeviceSpan<T>, never the other way.
//
// Launching (launch.hpp): a DeviceSpan goes to a kernel as its pointer. A
// TypedKernel takes a DeviceSpan<T> for a T* or const T* parameter (or void*
// / const void*) and a DeviceSpan<const T> only for const T* (const void*);
// any other element type is a compile error. The untyped launch packs it as a
// pointer, checked against the parameter's size as every argument is.
//
// Bounds: subspan / first / last beyond the span throw std::out_of_range
// naming the offset, count and size. Copies check element counts
// (std::invalid_argument naming both).
//
// Copies are asynchronous on the stream, with one exception: a host range
// that is a temporary (an initializer list, an rvalue container that owns its
// elements) is gone when the call returns, so a copy from it waits for the
// stream before returning. Any other host range must stay valid (and, copied
// into, untouched) until the stream has reached the copy. Copying into a
// temporary container is a compile error.
#include <cuda.h>

#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <ranges>
#include <span>
#include <type_traits>
#include <typeinfo>

#include <cucore/stream.hpp>

namespace cucore {

template <typename T>
class DeviceSpan;

template <typename T>
inline constexpr bool is_device_span_v = false;
template <typename T>
inline constexpr bool is_device_span_v<DeviceSpan<T>> = true;

namespace detail {

// Out of line (src/memory/device_span.cpp).
[[noreturn]] void throw_span_out_of_range(const char* operation, std::size_t offset, std::size_t count,
                                          std::size_t size, const std::type_info& type);
[[noreturn]] void throw_allocate_overflow(std::size_t count, std::size_t element_size, const std::type_info& type);
// One copy of `bytes` bytes between device memory (or any memory the driver
// can address) on `stream`; `wait`: synchronize the stream after it. Empty
// copies call nothing.
void copy_bytes(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, StreamRef stream, bool wait,
                const char* operation);
// A host copy after its size check: `device_bytes` against `host_count`
// elements of `element_size` bytes (`type`). `who` names the caller in the
// error ("Buffer" compares bytes, "DeviceSpan" elements).
void copy_host(CUdeviceptr device, std::size_t device_bytes, const void* host, std::size_t host_count,
               std::size_t element_size, const std::type_info& type, bool to_device, bool wait, StreamRef stream,
               const char* who);
// Element counts of a device-to-device copy between two spans (equal or
// std::invalid_argument).
void copy_spans(CUdeviceptr dst, CUdeviceptr src, std::size_t dst_count, std::size_t src_count,
                std::size_t element_size, const std::type_info& type, StreamRef stream);
// cuMemsetD8/D16/D32Async of `count` elements of `width` (1, 2 or 4) bytes.
void fill_pattern(CUdeviceptr dst, std::uint32_t bits, std::size_t width, std::size_t count, StreamRef stream,
                  const char* operation);

// The host ranges copies take: contiguous, sized, of trivially copyable
// elements. Checked by static_assert (copy_checks) so a refusal says why.
template <typename R>
concept host_range =
    std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
    std::is_trivially_copyable_v<std::ranges::range_value_t<R>>;
// A range whose elements outlive it (an lvalue, a std::span): copies from it
// are asynchronous; from anything else (a temporary container) they wait.
template <typename R>
inline constexpr bool outlives_call_v = std::ranges::borrowed_range<R>;
template <typename R>
inline constexpr bool writable_range_v =
    !std::is_const_v<std::remove_reference_t<std::ranges::range_reference_t<R>>>;

template <typename R>
consteval bool check_host_range() {
  static_assert(std::ranges::contiguous_range<R>,
                "cucore copies: the host range must be contiguous (std::ranges::contiguous_range: a std::vector, "
                "std::array, std::span, C array, std::string); copy a std::list, std::deque or std::vector<bool> "
                "into one first");
  static_assert(!std::ranges::contiguous_range<R> || std::ranges::sized_range<R>,
                "cucore copies: the host range must know its size (std::ranges::sized_range)");
  if constexpr (std::ranges::contiguous_range<R>)
    static_assert(std::is_trivially_copyable_v<std::ranges::range_value_t<R>>,
                  "cucore copies: the host range's elements must be trivially copyable");
  return host_range<R>;
}
template <typename R>
consteval bool check_host_destination() {
  if constexpr (check_host_range<R>()) {
    static_assert(writable_range_v<R>, "cucore copy_to: the host range is read-only (its elements are const)");
    static_assert(outlives_call_v<R>,
                  "cucore copy_to: the host range is a temporary that is gone before the stream writes it: pass an "
                  "lvalue or a std::span over memory that lives until the copy is done");
    return writable_range_v<R> && outlives_call_v<R>;
  }
  return false;
}
template <typename R, typename T>
consteval bool check_same_elements() {
  static_assert(std::is_same_v<std::remove_cv_t<std::ranges::range_value_t<R>>, std::remove_cv_t<T>>,
                "cucore DeviceSpan copies: the host range's element type differs from the span's (copies count "
                "elements; as<U>() views the memory as another type)");
  return std::is_same_v<std::remove_cv_t<std::ranges::range_value_t<R>>, std::remove_cv_t<T>>;
}

// The fill widths cuMemsetD8/D16/D32Async write.
template <typename T>
consteval bool check_fill_type() {
  static_assert(std::is_trivially_copyable_v<T>, "cucore fill: the value's type must be trivially copyable");
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4,
                "cucore fill<T>: T must be 1, 2 or 4 bytes (cuMemsetD8/D16/D32Async); fill wider types with a kernel");
  return std::is_trivially_copyable_v<T> && (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4);
}
template <typename T>
std::uint32_t fill_bits(const T& value) noexcept {
  if constexpr (sizeof(T) == 1)
    return std::bit_cast<std::uint8_t>(value);
  else if constexpr (sizeof(T) == 2)
    return std::bit_cast<std::uint16_t>(value);
  else
    return std::bit_cast<std::uint32_t>(value);
}

}  // namespace detail

template <typename T>
class DeviceSpan {
  static_assert(std::is_object_v<T> && !std::is_volatile_v<T> && std::is_trivially_copyable_v<T>,
                "DeviceSpan<T>: T is a trivially copyable object type (const allowed, not volatile)");

 public:
  using element_type = T;
  using value_type = std::remove_cv_t<T>;
  using size_type = std::size_t;
  using pointer = T*;

  constexpr DeviceSpan() noexcept = default;  // empty, null
  // `count` elements of T at device address `data` (not checked: the caller's word).
  constexpr DeviceSpan(T* data, std::size_t count) noexcept : data_(data), size_(count) {}
  static DeviceSpan from_handle(CUdeviceptr ptr, std::size_t count) noexcept {
    return DeviceSpan(reinterpret_cast<T*>(ptr), count);
  }
  // DeviceSpan<T> -> DeviceSpan<const T> (as std::span: qualification only).
  template <typename U>
    requires(!std::is_same_v<U, T> && std::is_convertible_v<U (*)[], T (*)[]>)
  constexpr DeviceSpan(const DeviceSpan<U>& other) noexcept  // NOLINT(google-explicit-constructor)
      : data_(other.data()), size_(other.size()) {}

  constexpr T* data() const noexcept { return data_; }
  CUdeviceptr handle() const noexcept { return reinterpret_cast<CUdeviceptr>(data_); }
  constexpr std::size_t size() const noexcept { return size_; }
  constexpr std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }
  constexpr bool empty() const noexcept { return size_ == 0; }

  // Elements [offset, offset + count) (count std::dynamic_extent: to the end);
  // beyond the span: std::out_of_range.
  DeviceSpan subspan(std::size_t offset, std::size_t count = std::dynamic_extent) const {
    if (offset > size_) [[unlikely]]
      detail::throw_span_out_of_range("subspan", offset, count, size_, typeid(T));
    if (count == std::dynamic_extent) return DeviceSpan(data_ + offset, size_ - offset);
    if (count > size_ - offset) [[unlikely]]
      detail::throw_span_out_of_range("subspan", offset, count, size_, typeid(T));
    return DeviceSpan(data_ + offset, count);
  }
  DeviceSpan first(std::size_t count) const {
    if (count > size_) [[unlikely]]
      detail::throw_span_out_of_range("first", 0, count, size_, typeid(T));
    return DeviceSpan(data_, count);
  }
  DeviceSpan last(std::size_t count) const {
    if (count > size_) [[unlikely]]
      detail::throw_span_out_of_range("last", 0, count, size_, typeid(T));
    return DeviceSpan(data_ + (size_ - count), count);
  }
  // The same memory as bytes.
  DeviceSpan<const std::byte> as_bytes() const noexcept {
    return DeviceSpan<const std::byte>(reinterpret_cast<const std::byte*>(data_), size_bytes());
  }
  DeviceSpan<std::byte> as_writable_bytes() const noexcept
    requires(!std::is_const_v<T>)
  {
    return DeviceSpan<std::byte>(reinterpret_cast<std::byte*>(data_), size_bytes());
  }

  // ---- copies on `stream` (counts in elements, equal or std::invalid_argument) ----
  // copy_from: the source's elements into this span; copy_to: this span's
  // elements into the destination. Host ranges hold exactly T.
  template <std::ranges::range R>
  void copy_from(R&& host, StreamRef stream) const {
    static_assert(!std::is_const_v<T>, "DeviceSpan<const T>::copy_from: the span is read-only");
    if constexpr (!std::is_const_v<T> && detail::check_host_range<R>() && detail::check_same_elements<R, T>())
      detail::copy_host(handle(), size_bytes(), std::ranges::data(host), std::ranges::size(host), sizeof(T), typeid(T),
                        true, !detail::outlives_call_v<R>, stream, "DeviceSpan");
  }
  void copy_from(std::initializer_list<value_type> host, StreamRef stream) const {
    static_assert(!std::is_const_v<T>, "DeviceSpan<const T>::copy_from: the span is read-only");
    if constexpr (!std::is_const_v<T>)
      detail::copy_host(handle(), size_bytes(), host.begin(), host.size(), sizeof(T), typeid(T), true, true, stream,
                        "DeviceSpan");
  }
  // Device to device (the spans may be on different devices; they must not overlap).
  void copy_from(DeviceSpan<const value_type> src, StreamRef stream) const {
    static_assert(!std::is_const_v<T>, "DeviceSpan<const T>::copy_from: the span is read-only");
    if constexpr (!std::is_const_v<T>)
      detail::copy_spans(handle(), src.handle(), size_, src.size(), sizeof(T), typeid(T), stream);
  }
  template <std::ranges::range R>
  void copy_to(R&& host, StreamRef stream) const {
    if constexpr (detail::check_host_destination<R>() && detail::check_same_elements<R, T>())
      detail::copy_host(handle(), size_bytes(), std::ranges::data(host), std::ranges::size(host), sizeof(T), typeid(T),
                        false, false, stream, "DeviceSpan");
  }
  void copy_to(DeviceSpan<value_type> dst, StreamRef stream) const {
    detail::copy_spans(dst.handle(), handle(), dst.size(), size_, sizeof(T), typeid(T), stream);
  }

  // Every element set to `value` (T of 1, 2 or 4 bytes; other sizes do not compile).
  void fill(const value_type& value, StreamRef stream) const {
    static_assert(!std::is_const_v<T>, "DeviceSpan<const T>::fill: the span is read-only");
    if constexpr (!std::is_const_v<T> && detail::check_fill_type<value_type>())
      detail::fill_pattern(handle(), detail::fill_bits(value), sizeof(T), size_, stream, "DeviceSpan::fill");
  }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

template <typename T>
DeviceSpan(T*, std::size_t) -> DeviceSpan<T>;

}  // namespace cucore
