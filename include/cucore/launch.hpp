#pragma once
// Launching kernels: LaunchConfig (grid, block, cluster, dynamic shared memory,
// cooperative) and launch(stream, config, kernel, args...).
//
//   cucore::launch(stream, {.grid = (n + 255) / 256, .block = 256}, saxpy,
//                  3.0f, x, y, out, n);   // x, y, out: Buffers
//
// Arguments are packed by type: scalars and trivially copyable structs by value
// at their C++ width, a Buffer (const or not: this form does not know the
// kernel's types, so a const Buffer binds to any pointer parameter) and a
// DeviceSpan (device_span.hpp) as their device pointers, raw pointers as they
// are, texture and surface objects (texture.hpp) as their 64-bit handles.
//
// A TypedKernel (kernel.hpp) is strict, at compile time (a static_assert that
// names the rule): a Buffer goes to a pointer parameter and a const Buffer
// only to a pointer-to-const one; a DeviceSpan<T> to T* or const T* (or void*
// / const void*), a DeviceSpan<const T> only to const T* (const void*); a
// scalar only where the conversion does not narrow (C++'s list-initialization
// rule, on the argument's type: exact types, float -> double, int -> long,
// bool -> int are fine; double -> float, size_t -> int, int64_t -> int32_t,
// float -> int, int -> float, int -> unsigned are compile errors, so a
// literal is written with the parameter's type: 2.0f, 256u).
// The kernel's parameter layout is read once (first launch) and every launch
// checks the count and each size against it, throwing std::invalid_argument
// that names the kernel and the parameter ("saxpy: parameter 4 is 4 bytes, got
// 8 (double)") instead of letting the driver read garbage.
//
// The hot path allocates nothing, looks nothing up and makes one driver call
// (cuLaunchKernelEx): argument pointers live in a stack array, kernel facts are
// cached in the Kernel, and the context check is a thread-local flag.
//
// Context: a CUkernel runs in the context of the stream it is launched on (the
// current context for the NULL/legacy/per-thread streams). A thread that has no
// current context gets the stream's context made current on its first launch,
// as the runtime API does, so launching works from any thread.
#include <cuda.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include <cucore/buffer.hpp>
#include <cucore/device_span.hpp>
#include <cucore/kernel.hpp>
#include <cucore/stream.hpp>

namespace cucore {

namespace detail {
[[noreturn]] void throw_bad_dimension(long long value, bool negative);
template <std::integral T>
constexpr std::uint32_t to_dimension(T v) {
  if constexpr (std::is_signed_v<T>) {
    if (v < 0) throw_bad_dimension(static_cast<long long>(v), true);
  }
  if (!std::in_range<std::uint32_t>(v)) throw_bad_dimension(static_cast<long long>(v), false);
  return static_cast<std::uint32_t>(v);
}
template <typename T>
concept dimension_value = std::integral<T> && !std::same_as<T, bool>;
}  // namespace detail

// Up to three dimensions: `256`, `{2, 3}` or `{2, 3, 4}` (missing ones are 1).
// Default-constructed is "not set" (all zero). Negative or over-32-bit values
// throw std::invalid_argument.
struct Dim3 {
  std::uint32_t x = 0, y = 0, z = 0;

  constexpr Dim3() = default;
  template <detail::dimension_value X>
  constexpr Dim3(X x_) : x(detail::to_dimension(x_)), y(1), z(1) {}  // NOLINT(google-explicit-constructor)
  template <detail::dimension_value X, detail::dimension_value Y>
  constexpr Dim3(X x_, Y y_) : x(detail::to_dimension(x_)), y(detail::to_dimension(y_)), z(1) {}
  template <detail::dimension_value X, detail::dimension_value Y, detail::dimension_value Z>
  constexpr Dim3(X x_, Y y_, Z z_) : x(detail::to_dimension(x_)), y(detail::to_dimension(y_)), z(detail::to_dimension(z_)) {}

  constexpr bool is_set() const noexcept { return (x | y | z) != 0; }
  constexpr std::uint64_t volume() const noexcept { return std::uint64_t(x) * y * z; }
  friend constexpr bool operator==(const Dim3&, const Dim3&) = default;
};

// cuda.core's LaunchConfig. With a cluster, `grid` counts clusters (as in
// cuda.core): the launch has grid × cluster blocks. Clusters need compute
// capability 9.0; a cooperative launch's grid must fit on the device at once
// (occupancy × SMs), which launch() checks before launching.
struct LaunchConfig {
  Dim3 grid{};     // blocks (clusters when `cluster` is set); required
  Dim3 block{};    // threads per block; required
  Dim3 cluster{};  // blocks per cluster; not set: no cluster
  std::size_t shmem_size = 0;  // dynamic shared memory per block, bytes
  bool is_cooperative = false;
  friend bool operator==(const LaunchConfig&, const LaunchConfig&) = default;
};

// A kernel argument pack built at run time, for C++ callers that only know
// the arguments then. Each push copies the value into the pack's own storage
// (inline up to 256 bytes and 16 arguments, so a typical pack never touches the
// heap). launch(stream, config, kernel, args) checks the count and each size
// against the kernel's parameter layout, as the variadic launch does. (The
// Python module packs into stack arrays and calls detail::launch_checked.)
class KernelArgs {
 public:
  KernelArgs() noexcept = default;
  KernelArgs(const KernelArgs& other);
  KernelArgs& operator=(const KernelArgs& other);
  KernelArgs(KernelArgs&& other) noexcept;
  KernelArgs& operator=(KernelArgs&& other) noexcept;

  // A value at its C++ width (a scalar, a pointer, a trivially copyable struct).
  template <typename T>
    requires std::is_trivially_copyable_v<T> && (!std::is_array_v<T>) && (!std::same_as<T, Buffer>) &&
             (!is_device_span_v<T>)
  KernelArgs& push(const T& value) {
    constexpr std::size_t align = alignof(T) < 16 ? alignof(T) : 16;
    // Inline fast path: a fixed-size copy into the inline storage.
    if (!heap_ && count_ < kInlineArgs) {
      const std::size_t offset = (std::size_t(used_) + align - 1) & ~(align - 1);
      if (offset + sizeof(T) <= kInlineBytes) {
        std::memcpy(inline_bytes_ + offset, std::addressof(value), sizeof(T));
        inline_offsets_[count_] = static_cast<std::uint32_t>(offset);
        inline_sizes_[count_] = static_cast<std::uint32_t>(sizeof(T));
        used_ = static_cast<std::uint32_t>(offset + sizeof(T));
        ++count_;
        return *this;
      }
    }
    return push_bytes(std::addressof(value), sizeof(T), align);
  }
  // A Buffer as its device pointer (CUdeviceptr); a closed one is ClosedError.
  KernelArgs& push(const Buffer& buffer) {
    if (buffer.is_closed()) [[unlikely]]
      throw_closed(count_);
    return push(buffer.handle());
  }
  // A DeviceSpan as its device pointer.
  template <typename T>
  KernelArgs& push(const DeviceSpan<T>& span) {
    return push(span.handle());
  }
  // An object kernels take by its 64-bit handle (a texture::TextureObject or
  // SurfaceObject); a closed one is ClosedError.
  template <typename T>
    requires requires(const T& t) {
      { t.kernel_argument() } -> std::same_as<unsigned long long>;
    }
  KernelArgs& push(const T& object) {
    return push(object.kernel_argument());
  }
  // Raw bytes of one parameter (a struct the caller laid out itself).
  // `alignment` (a power of two) places the copy; above 16 it is taken as 16
  // (the driver copies bytes, so placement only matters to the pack itself).
  KernelArgs& push_bytes(const void* data, std::size_t size, std::size_t alignment = 1);
  void clear() noexcept;

  std::size_t size() const noexcept { return count_; }  // number of arguments
  bool empty() const noexcept { return count_ == 0; }
  std::size_t size_of(std::size_t i) const;              // bytes of argument i
  const void* data(std::size_t i) const;                 // argument i's bytes
  // kernelParams for cuLaunchKernel: one pointer per argument into this pack,
  // valid until the pack is changed, moved or destroyed. (It fills an array
  // the pack keeps: not for concurrent use; launch() does not need it.)
  void* const* pointers() const;

 private:
  friend void launch(StreamRef stream, const LaunchConfig& config, const Kernel& kernel, const KernelArgs& args);
  [[noreturn]] static void throw_closed(std::size_t index);
  static constexpr std::size_t kInlineBytes = 256, kInlineArgs = 16;
  const std::byte* bytes() const noexcept { return heap_ ? heap_bytes_.data() : inline_bytes_; }
  const std::uint32_t* offsets() const noexcept { return heap_ ? heap_offsets_.data() : inline_offsets_; }
  const std::uint32_t* sizes() const noexcept { return heap_ ? heap_sizes_.data() : inline_sizes_; }

  // Offsets rather than pointers, so copies and moves need no fix-up.
  std::uint32_t count_ = 0, used_ = 0;
  bool heap_ = false;  // spilled past the inline storage
  alignas(16) std::byte inline_bytes_[kInlineBytes];
  std::uint32_t inline_offsets_[kInlineArgs];
  std::uint32_t inline_sizes_[kInlineArgs];
  std::vector<std::byte> heap_bytes_;  // in use once the inline storage overflows
  std::vector<std::uint32_t> heap_offsets_, heap_sizes_;
  mutable void* inline_pointers_[kInlineArgs];
  mutable std::vector<void*> heap_pointers_;
};

namespace detail {

// What the variadic launch knows about each argument at compile time.
struct ArgDesc {
  std::size_t size{};            // bytes passed
  const std::type_info* type{};  // for messages
  bool is_buffer{};
};

// A Buffer, or a class over one (ManagedBuffer): passed as its device pointer.
template <typename T>
inline constexpr bool is_buffer_v = std::is_base_of_v<Buffer, std::remove_cvref_t<T>>;

// Objects kernels take by a 64-bit handle (textures, surfaces): kernel_argument()
// gives it, throwing ClosedError for a closed object.
template <typename T>
concept handle_argument = requires(const T& t) {
  { t.kernel_argument() } -> std::same_as<unsigned long long>;
};
template <typename T>
inline constexpr bool is_handle_argument_v = handle_argument<std::remove_cvref_t<T>>;

// Argument lists that go to the type-erased overloads, not the variadic one.
template <typename... Args>
inline constexpr bool is_erased_pack_v = false;
template <typename A>
inline constexpr bool is_erased_pack_v<A> =
    std::is_same_v<std::remove_cvref_t<A>, KernelArgs> || std::is_convertible_v<A, std::span<void* const>>;

template <typename T>
consteval void check_argument_type() {
  using U = std::remove_cvref_t<T>;
  static_assert(!std::is_array_v<U>,
                "cucore::launch: pass a pointer (or a Buffer), not an array: kernels take arrays as pointers");
  static_assert(!(std::is_pointer_v<U> && std::is_same_v<std::remove_cv_t<std::remove_pointer_t<U>>, Buffer>),
                "cucore::launch: pass the Buffer itself (it goes as its device pointer), not a pointer to it");
  static_assert(is_buffer_v<U> || is_handle_argument_v<U> || std::is_trivially_copyable_v<U>,
                "cucore::launch: kernel arguments are scalars, pointers, Buffers, texture or surface objects, or "
                "trivially copyable structs");
}

template <typename T>
constexpr ArgDesc arg_desc() {
  using U = std::remove_cvref_t<T>;
  if constexpr (is_buffer_v<U>)
    return {sizeof(CUdeviceptr), &typeid(Buffer), true};
  else if constexpr (is_device_span_v<U>)
    return {sizeof(CUdeviceptr), &typeid(typename U::pointer), false};
  else if constexpr (is_handle_argument_v<U>)
    return {sizeof(unsigned long long), &typeid(U), false};
  else if constexpr (std::is_null_pointer_v<U>)
    return {sizeof(void*), &typeid(std::nullptr_t), false};
  else
    return {sizeof(U), &typeid(U), false};
}

[[noreturn]] void throw_closed_buffer(const Kernel& kernel, std::size_t index);

template <typename T>
inline void* arg_address(const Kernel& kernel, std::size_t index, const T& value, CUdeviceptr& slot) {
  using U = std::remove_cvref_t<T>;
  if constexpr (is_buffer_v<U>) {
    if (value.is_closed()) [[unlikely]]
      throw_closed_buffer(kernel, index);
    slot = value.handle();
    return &slot;
  } else if constexpr (is_device_span_v<U>) {
    (void)kernel;
    (void)index;
    slot = value.handle();
    return &slot;
  } else if constexpr (is_handle_argument_v<U>) {
    static_assert(sizeof(CUdeviceptr) == sizeof(unsigned long long));
    slot = value.kernel_argument();
    return &slot;
  } else if constexpr (std::is_null_pointer_v<U>) {
    slot = 0;
    return &slot;
  } else {
    // The argument lives until the end of the launch call: point at it, no copy.
    return const_cast<void*>(static_cast<const void*>(std::addressof(value)));
  }
}

// Out of line, in libcucore: check against the kernel's cached layout, then launch.
void launch_checked(CUstream stream, const LaunchConfig& config, const Kernel& kernel, void** args,
                    const ArgDesc* descs, std::size_t count);
// Launch with arguments already known to match (TypedKernel).
void launch_unchecked(CUstream stream, const LaunchConfig& config, const Kernel& kernel, void** args);

// A cucore object a launch packed (a Buffer, a texture or surface object),
// type-erased: `share` makes a share of it that keeps its resource alive.
struct PackedObject {
  const void* object{};
  std::shared_ptr<const void> (*share)(const void* object);
};
template <typename T>
std::shared_ptr<const void> share_packed(const void* object) {
  if constexpr (is_buffer_v<T>)
    return static_cast<const T*>(object)->box();  // a share of the allocation (null for a closed one)
  else
    return std::make_shared<const T>(*static_cast<const T*>(object));
}
template <typename T>
inline constexpr bool is_packed_object_v = is_buffer_v<T> || is_handle_argument_v<T>;

// After a launch of `kernel` on `stream` (out of line, in libcucore): when the
// stream is being captured, the graph being built keeps a share of each object
// and of the kernel (a CUDA user object, released when the graph and every
// executable graph made from it are gone), so dropping a Buffer before the
// graph runs cannot free memory the graph will use. Not capturing: nothing.
void keep_for_capture(CUstream stream, const Kernel& kernel, const PackedObject* objects, std::size_t count);

template <typename T>
inline void note_packed(const T& value, PackedObject*& next) {
  if constexpr (is_packed_object_v<std::remove_cvref_t<T>>) *next++ = {std::addressof(value), &share_packed<std::remove_cvref_t<T>>};
}

// ---- TypedKernel's argument rules (the top of this header) ----
// `Arg` is the argument's type as forwarded (const and reference kept: a const
// Buffer is told from a Buffer by it).

// A scalar (or any value) converts to Param without narrowing: Param{arg} is
// well-formed (C++'s list-initialization rule), on the argument's type.
template <typename Param, typename A>
concept non_narrowing = requires(const A& a) { Param{a}; };

template <typename Param, typename Arg>
inline constexpr bool buffer_binds_v =
    std::is_pointer_v<Param> &&
    (!std::is_const_v<std::remove_reference_t<Arg>> || std::is_const_v<std::remove_pointer_t<Param>>);

template <typename Param, typename Span>
inline constexpr bool span_pointee_matches_v = false;
template <typename P, typename T>
inline constexpr bool span_pointee_matches_v<P*, DeviceSpan<T>> =
    std::is_same_v<std::remove_cv_t<P>, std::remove_cv_t<T>> || std::is_void_v<P>;
template <typename Param, typename Span>
inline constexpr bool span_keeps_const_v = false;
template <typename P, typename T>
inline constexpr bool span_keeps_const_v<P*, DeviceSpan<T>> = !std::is_const_v<T> || std::is_const_v<P>;

template <typename Param, typename A>
inline constexpr bool value_converts_v =
    std::is_convertible_v<const A&, Param> && (!std::is_arithmetic_v<Param> || non_narrowing<Param, A>);

template <typename Param, typename Arg>
consteval bool typed_argument_ok() {
  using A = std::remove_cvref_t<Arg>;
  if constexpr (is_buffer_v<A>)
    return buffer_binds_v<Param, Arg>;
  else if constexpr (is_device_span_v<A>)
    return std::is_pointer_v<Param> && span_pointee_matches_v<Param, A> && span_keeps_const_v<Param, A>;
  else if constexpr (is_handle_argument_v<A>)
    return std::is_same_v<Param, unsigned long long>;
  else
    return value_converts_v<Param, A>;
}
// Whether `Arg` may be given for a parameter `Param` of a TypedKernel.
template <typename Param, typename Arg>
concept typed_argument = typed_argument_ok<Param, Arg>();

// The same rules, each refusal its own message (what a compile error shows).
template <typename Param, typename Arg>
consteval bool check_typed_argument() {
  using A = std::remove_cvref_t<Arg>;
  if constexpr (is_buffer_v<A>) {
    static_assert(std::is_pointer_v<Param>, "cucore::launch(TypedKernel): a Buffer goes to a pointer parameter");
    static_assert(!std::is_pointer_v<Param> || buffer_binds_v<Param, Arg>,
                  "cucore::launch(TypedKernel): a const Buffer binds only to a pointer-to-const parameter (const T*)");
  } else if constexpr (is_device_span_v<A>) {
    static_assert(std::is_pointer_v<Param>, "cucore::launch(TypedKernel): a DeviceSpan goes to a pointer parameter");
    static_assert(!std::is_pointer_v<Param> || span_pointee_matches_v<Param, A>,
                  "cucore::launch(TypedKernel): the DeviceSpan's element type is not the parameter's pointee type");
    static_assert(!std::is_pointer_v<Param> || span_keeps_const_v<Param, A>,
                  "cucore::launch(TypedKernel): a DeviceSpan<const T> binds only to a const T* parameter");
  } else if constexpr (is_handle_argument_v<A>) {
    static_assert(std::is_same_v<Param, unsigned long long>,
                  "cucore::launch(TypedKernel): a texture or surface object goes to an unsigned long long parameter");
  } else {
    static_assert(std::is_convertible_v<const A&, Param>,
                  "cucore::launch(TypedKernel): the argument does not convert to the parameter's type");
    static_assert(!std::is_convertible_v<const A&, Param> || !std::is_arithmetic_v<Param> || non_narrowing<Param, A>,
                  "cucore::launch(TypedKernel): narrowing conversion (double -> float, size_t -> int, int -> float, "
                  "...): pass the parameter's own type, or one that converts exactly (float -> double, int -> long)");
  }
  return typed_argument<Param, Arg>;
}

template <typename Param, typename Arg>
inline Param convert_argument(const Kernel& kernel, std::size_t index, Arg&& arg) {
  using A = std::remove_cvref_t<Arg>;
  if constexpr (is_buffer_v<A>) {
    if (arg.is_closed()) [[unlikely]]
      throw_closed_buffer(kernel, index);
    return reinterpret_cast<Param>(arg.handle());
  } else if constexpr (is_device_span_v<A>) {
    (void)kernel;
    (void)index;
    return static_cast<Param>(arg.data());
  } else if constexpr (is_handle_argument_v<A>) {
    (void)kernel;
    (void)index;
    return arg.kernel_argument();
  } else {
    return static_cast<Param>(std::forward<Arg>(arg));
  }
}

template <typename... Args, std::size_t... I>
inline void launch_variadic(StreamRef stream, const LaunchConfig& config, const Kernel& kernel,
                            std::index_sequence<I...>, const Args&... args) {
  constexpr std::size_t n = sizeof...(Args);
  static constexpr ArgDesc descs[n ? n : 1] = {arg_desc<Args>()...};
  [[maybe_unused]] CUdeviceptr slots[n ? n : 1];  // device pointers of Buffer arguments
  void* pointers[n ? n : 1] = {arg_address(kernel, I, args, slots[I])...};
  launch_checked(stream.handle(), config, kernel, pointers, descs, n);
  constexpr std::size_t objects = (std::size_t{0} + ... + (is_packed_object_v<Args> ? 1 : 0));
  if constexpr (objects > 0) {  // launches of scalars and raw pointers only make no capture query
    PackedObject packed[objects];
    PackedObject* next = packed;
    (note_packed(args, next), ...);
    keep_for_capture(stream.handle(), kernel, packed, objects);
  }
}

template <typename... Params, typename... Args, std::size_t... I>
inline void launch_typed(StreamRef stream, const LaunchConfig& config, const Kernel& kernel,
                         std::index_sequence<I...>, Args&&... args) {
  // Each argument converted to its parameter type, so the driver copies exactly
  // what the kernel declares.
  std::tuple<Params...> values{convert_argument<Params>(kernel, I, args)...};
  void* pointers[sizeof...(Params) ? sizeof...(Params) : 1] = {static_cast<void*>(&std::get<I>(values))...};
  launch_unchecked(stream.handle(), config, kernel, pointers);
  constexpr std::size_t objects = (std::size_t{0} + ... + (is_packed_object_v<Args> ? 1 : 0));
  if constexpr (objects > 0) {
    PackedObject packed[objects];
    PackedObject* next = packed;
    (note_packed(args, next), ...);
    keep_for_capture(stream.handle(), kernel, packed, objects);
  }
}

}  // namespace detail

// Launches `kernel` on `stream`. See the top of this header for the packing
// rules; errors throw (std::invalid_argument for bad arguments or
// configurations, CudaError for the driver's refusals).
template <typename... Args>
  requires(!detail::is_erased_pack_v<Args...>)
void launch(StreamRef stream, const LaunchConfig& config, const Kernel& kernel, Args&&... args) {
  (detail::check_argument_type<Args>(), ...);
  detail::launch_variadic<std::remove_cvref_t<Args>...>(stream, config, kernel, std::index_sequence_for<Args...>{},
                                                        args...);
}

// A TypedKernel: arguments convert to the declared parameter types at compile
// time, by the rules at the top of this header (a refusal is a static_assert
// naming the rule); nothing is checked per launch.
template <typename... Params, typename... Args>
  requires(sizeof...(Params) == sizeof...(Args))
void launch(StreamRef stream, const LaunchConfig& config, const TypedKernel<void(Params...)>& kernel, Args&&... args) {
  constexpr bool ok = (detail::check_typed_argument<Params, Args>() && ...);
  if constexpr (ok)
    detail::launch_typed<Params...>(stream, config, kernel.kernel(), std::index_sequence_for<Args...>{},
                                    std::forward<Args>(args)...);
}

// Type-erased: a pack built at run time; count and sizes are checked.
void launch(StreamRef stream, const LaunchConfig& config, const Kernel& kernel, const KernelArgs& args);
// Type-erased: kernelParams as the driver takes them (one pointer per
// parameter). Only the count can be checked: the sizes are the caller's word.
void launch(StreamRef stream, const LaunchConfig& config, const Kernel& kernel, std::span<void* const> args);

// Checks `config` on its own (the checks launch() does before any driver
// call): grid and block set and non-zero, cluster dimensions non-zero when set,
// grid × cluster within 32 bits, shmem_size within 32 bits. Throws
// std::invalid_argument naming the field.
void validate(const LaunchConfig& config);

}  // namespace cucore
