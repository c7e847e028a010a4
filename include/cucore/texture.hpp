#pragma once
// Textures and surfaces, as cuda.core.texture: opaque (driver-laid-out) CUDA
// arrays and mipmapped arrays, copies in and out of them, and the bindless
// TextureObject (sampled reads: address, filter and read modes, normalized
// coordinates) and SurfaceObject (typed loads and stores) that kernels take as
// 64-bit arguments: launch(stream, config, kernel, texture, ...) passes the
// handle. Each object is a share of its box, which holds what it was made from
// (a texture its array, a mip level its mipmapped array), so any destruction
// order is safe. Made by Device::create_opaque_array, create_mipmapped_array,
// create_texture_object and create_surface_object.
#include <cuda.h>

#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <cucore/stream.hpp>

namespace cucore {

class Buffer;
class Device;

namespace detail {
struct ArrayBox;
struct MipmappedArrayBox;
struct TexObjectBox;
struct SurfObjectBox;
}  // namespace detail

namespace texture {

enum class ArrayFormat { uint8, uint16, uint32, int8, int16, int32, float16, float32 };
enum class AddressMode { wrap, clamp, mirror, border };
enum class FilterMode { point, linear };
enum class ReadMode { element_type, normalized_float };

// "float32" etc. (cuda.core's ArrayFormatType values); parse throws
// std::invalid_argument naming the accepted names.
const char* to_string(ArrayFormat format) noexcept;
ArrayFormat parse_array_format(std::string_view name);
std::size_t format_bytes(ArrayFormat format) noexcept;  // 1, 2 or 4

struct OpaqueArrayOptions {
  std::vector<std::size_t> shape{};  // (width), (width, height) or (width, height, depth), in elements
  ArrayFormat format = ArrayFormat::float32;
  unsigned num_channels = 1;  // 1, 2 or 4
  bool is_surface_load_store = false;  // CUDA_ARRAY3D_SURFACE_LDST: can back a SurfaceObject
};

struct MipmappedArrayOptions {
  std::vector<std::size_t> shape{};  // of level 0
  ArrayFormat format = ArrayFormat::float32;
  unsigned num_channels = 1;
  unsigned num_levels = 1;
  bool is_surface_load_store = false;
};

// A CUDA array: no device pointer, reachable from kernels only through a
// TextureObject or SurfaceObject; data moves in and out by copies
// (cuMemcpy3DAsync) of exactly size_bytes() from or to linear memory.
class OpaqueArray {
 public:
  OpaqueArray() noexcept = default;  // closed

  CUarray handle() const noexcept;  // null once closed
  bool is_closed() const noexcept { return box_ == nullptr; }
  const std::vector<std::size_t>& shape() const;
  ArrayFormat format() const;
  unsigned num_channels() const;
  std::size_t element_bytes() const;  // format bytes x channels
  std::size_t size_bytes() const;     // product of the shape x element_bytes
  int device_id() const;
  bool is_surface_load_store() const;
  // Drops this share; the array is destroyed when the last TextureObject or
  // SurfaceObject over it goes too. Idempotent.
  void close() noexcept { box_.reset(); }

  // Asynchronous copies of the whole array on `stream`; the linear side must
  // hold exactly size_bytes() (std::invalid_argument otherwise).
  void copy_from(const Buffer& src, StreamRef stream);
  void copy_from(std::span<const std::byte> host, StreamRef stream);
  void copy_to(Buffer& dst, StreamRef stream) const;
  void copy_to(std::span<std::byte> host, StreamRef stream) const;
  template <typename T>
    requires std::is_trivially_copyable_v<T>
  void copy_from(std::span<const T> host, StreamRef stream) {
    copy_from(std::as_bytes(host), stream);
  }
  template <typename T>
    requires std::is_trivially_copyable_v<T> && (!std::is_const_v<T>)
  void copy_to(std::span<T> host, StreamRef stream) const {
    copy_to(std::as_writable_bytes(host), stream);
  }

  const std::shared_ptr<const detail::ArrayBox>& box() const noexcept { return box_; }
  explicit OpaqueArray(std::shared_ptr<const detail::ArrayBox> box) noexcept : box_(std::move(box)) {}

 private:
  std::shared_ptr<const detail::ArrayBox> box_;
};

class MipmappedArray {
 public:
  MipmappedArray() noexcept = default;

  CUmipmappedArray handle() const noexcept;
  bool is_closed() const noexcept { return box_ == nullptr; }
  const std::vector<std::size_t>& shape() const;
  ArrayFormat format() const;
  unsigned num_channels() const;
  unsigned num_levels() const;
  int device_id() const;
  bool is_surface_load_store() const;
  void close() noexcept { box_.reset(); }
  // Level `level` (std::out_of_range past num_levels()) as a non-owning
  // OpaqueArray that keeps this mipmapped array alive.
  OpaqueArray get_level(unsigned level) const;

  const std::shared_ptr<const detail::MipmappedArrayBox>& box() const noexcept { return box_; }
  explicit MipmappedArray(std::shared_ptr<const detail::MipmappedArrayBox> box) noexcept : box_(std::move(box)) {}

 private:
  std::shared_ptr<const detail::MipmappedArrayBox> box_;
};

// What a texture (or surface) reads: an array, a mipmapped array, or linear
// memory (a typed 1-D fetch, or a row-pitched 2-D image). Arrays are kept alive
// by the descriptor and every object made from it; linear memory is not (a
// Buffer has one owner): it must outlive the texture, unless `owner` keeps it.
class ResourceDescriptor {
 public:
  enum class Kind { array, mipmapped_array, linear, pitch2d };

  static ResourceDescriptor from_opaque_array(const OpaqueArray& array);
  static ResourceDescriptor from_mipmapped_array(const MipmappedArray& array);
  // size_bytes: whole elements, at least one (none given: the whole buffer).
  static ResourceDescriptor from_linear(const Buffer& buffer, ArrayFormat format, unsigned num_channels,
                                        std::optional<std::size_t> size_bytes = std::nullopt,
                                        std::shared_ptr<const void> owner = {});
  static ResourceDescriptor from_pitch2d(const Buffer& buffer, ArrayFormat format, unsigned num_channels,
                                         std::size_t width, std::size_t height, std::size_t pitch_bytes,
                                         std::shared_ptr<const void> owner = {});

  Kind kind() const noexcept { return kind_; }
  const OpaqueArray& array() const noexcept { return array_; }
  const MipmappedArray& mipmapped_array() const noexcept { return mipmapped_; }
  CUdeviceptr pointer() const noexcept { return ptr_; }
  std::optional<ArrayFormat> format() const noexcept;  // linear kinds only
  ArrayFormat element_format() const;                   // of the array or the linear memory
  unsigned num_channels() const noexcept { return channels_; }
  std::size_t size_bytes() const noexcept { return size_bytes_; }
  std::size_t width() const noexcept { return width_; }
  std::size_t height() const noexcept { return height_; }
  std::size_t pitch_bytes() const noexcept { return pitch_; }
  const std::shared_ptr<const void>& owner() const noexcept { return owner_; }

  // The driver's CUDA_RESOURCE_DESC for this description.
  CUDA_RESOURCE_DESC to_driver() const;

 private:
  Kind kind_ = Kind::array;
  OpaqueArray array_;
  MipmappedArray mipmapped_;
  CUdeviceptr ptr_ = 0;
  ArrayFormat format_ = ArrayFormat::float32;
  unsigned channels_ = 0;
  std::size_t size_bytes_ = 0, width_ = 0, height_ = 0, pitch_ = 0;
  std::shared_ptr<const void> owner_;
};

// "array", "mipmapped_array", "linear", "pitch2d" (cuda.core's ResourceDescriptor.kind).
const char* to_string(ResourceDescriptor::Kind kind) noexcept;

// Sampling state (CUDA_TEXTURE_DESC).
struct TextureObjectOptions {
  std::array<AddressMode, 3> address_mode{AddressMode::clamp, AddressMode::clamp, AddressMode::clamp};
  FilterMode filter_mode = FilterMode::point;
  ReadMode read_mode = ReadMode::element_type;
  bool normalized_coords = false;
  bool srgb = false;
  bool disable_trilinear_optimization = false;
  bool seamless_cubemap = false;
  unsigned max_anisotropy = 0;  // the driver clamps it to [1, 16]; 0 and 1: no anisotropic filtering
  FilterMode mipmap_filter_mode = FilterMode::point;
  float mipmap_level_bias = 0.0f;
  float min_mipmap_level_clamp = 0.0f;
  float max_mipmap_level_clamp = 0.0f;
  std::optional<std::array<float, 4>> border_color{};  // none: zero
};

class TextureObject {
 public:
  TextureObject() noexcept = default;
  CUtexObject handle() const noexcept;  // 0 once closed
  bool is_closed() const noexcept { return box_ == nullptr; }
  const ResourceDescriptor& resource() const;
  const TextureObjectOptions& options() const;
  int device_id() const;
  void close() noexcept { box_.reset(); }
  // What launch passes (ClosedError when closed).
  CUtexObject kernel_argument() const;

  explicit TextureObject(std::shared_ptr<const detail::TexObjectBox> box) noexcept : box_(std::move(box)) {}

 private:
  std::shared_ptr<const detail::TexObjectBox> box_;
};

class SurfaceObject {
 public:
  SurfaceObject() noexcept = default;
  CUsurfObject handle() const noexcept;
  bool is_closed() const noexcept { return box_ == nullptr; }
  const ResourceDescriptor& resource() const;
  int device_id() const;
  void close() noexcept { box_.reset(); }
  CUsurfObject kernel_argument() const;

  explicit SurfaceObject(std::shared_ptr<const detail::SurfObjectBox> box) noexcept : box_(std::move(box)) {}

 private:
  std::shared_ptr<const detail::SurfObjectBox> box_;
};

}  // namespace texture
}  // namespace cucore
