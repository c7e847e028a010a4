#include <cucore/texture.hpp>

#include <cucore/buffer.hpp>
#include <cucore/context.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "handles/texture_handles.hpp"
#include "texture/borrowed_array.hpp"
#include "loader/driver.hpp"
#include "runtime/stream_context.hpp"

namespace cucore::texture {

using detail::check;
using detail::driver;

namespace {

struct FormatInfo {
  ArrayFormat format;
  const char* name;
  CUarray_format driver;
  std::size_t bytes;
  bool is_float;
};
constexpr FormatInfo kFormats[] = {
    {ArrayFormat::uint8, "uint8", CU_AD_FORMAT_UNSIGNED_INT8, 1, false},
    {ArrayFormat::uint16, "uint16", CU_AD_FORMAT_UNSIGNED_INT16, 2, false},
    {ArrayFormat::uint32, "uint32", CU_AD_FORMAT_UNSIGNED_INT32, 4, false},
    {ArrayFormat::int8, "int8", CU_AD_FORMAT_SIGNED_INT8, 1, false},
    {ArrayFormat::int16, "int16", CU_AD_FORMAT_SIGNED_INT16, 2, false},
    {ArrayFormat::int32, "int32", CU_AD_FORMAT_SIGNED_INT32, 4, false},
    {ArrayFormat::float16, "float16", CU_AD_FORMAT_HALF, 2, true},
    {ArrayFormat::float32, "float32", CU_AD_FORMAT_FLOAT, 4, true},
};
const FormatInfo& info(ArrayFormat f) { return kFormats[static_cast<int>(f)]; }

// "FLOAT32": the ArrayFormatType member's name, as cuda.core's messages show it.
std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// The checks say what cuda.core's say, after the operation's name.
void check_channels(const char* what, unsigned channels) {
  if (channels != 1 && channels != 2 && channels != 4)
    throw InvalidArgumentError(std::string(what) + ": num_channels must be 1, 2, or 4, got " +
                                std::to_string(channels));
}

void check_shape(const char* what, const std::vector<std::size_t>& shape) {
  if (shape.empty() || shape.size() > 3)
    throw InvalidArgumentError(std::string(what) + ": shape rank must be 1, 2, or 3, got " +
                                std::to_string(shape.size()));
  for (std::size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 0)
      throw InvalidArgumentError(std::string(what) + ": shape[" + std::to_string(i) + "] must be >= 1, got 0");
}

CUDA_ARRAY3D_DESCRIPTOR array_descriptor(const std::vector<std::size_t>& shape, ArrayFormat format, unsigned channels,
                                         bool surface) {
  CUDA_ARRAY3D_DESCRIPTOR d{};
  d.Width = shape[0];
  d.Height = shape.size() > 1 ? shape[1] : 0;  // 0: the driver's way of saying 1-D / 2-D
  d.Depth = shape.size() > 2 ? shape[2] : 0;
  d.Format = info(format).driver;
  d.NumChannels = channels;
  d.Flags = surface ? CUDA_ARRAY3D_SURFACE_LDST : 0;
  return d;
}

// texture's facts beside the boxes' driver facts: every box of these kinds is
// made by this file as one of these states, so a box is always its state.
struct ArrayShape {
  std::vector<std::size_t> shape;
  ArrayFormat format = ArrayFormat::float32;
  unsigned num_channels = 1;
  bool surface_load_store = false;
  int device = -1;
};
struct ArrayState : detail::ArrayBox {
  ArrayShape info;
};
struct MipmappedArrayState : detail::MipmappedArrayBox {
  ArrayShape info;
  unsigned num_levels = 0;
};
// The resource an object reads is its box's `reads` (a ResourceDescriptor),
// released after the object itself.
struct TexObjectState : detail::TexObjectBox {
  TextureObjectOptions options;
  int device = -1;
  const ResourceDescriptor& resource() const { return *static_cast<const ResourceDescriptor*>(reads.get()); }
};
struct SurfObjectState : detail::SurfObjectBox {
  int device = -1;
  const ResourceDescriptor& resource() const { return *static_cast<const ResourceDescriptor*>(reads.get()); }
};

const ArrayState& require_array(const std::shared_ptr<const detail::ArrayBox>& box, const char* operation) {
  if (!box) [[unlikely]]
    detail::throw_closed("OpaqueArray", operation);
  return static_cast<const ArrayState&>(*box);
}
const MipmappedArrayState& require_mipmap(const std::shared_ptr<const detail::MipmappedArrayBox>& box,
                                          const char* operation) {
  if (!box) [[unlikely]]
    detail::throw_closed("MipmappedArray", operation);
  return static_cast<const MipmappedArrayState&>(*box);
}

std::size_t element_bytes_of(const ArrayShape& s) { return info(s.format).bytes * s.num_channels; }
std::size_t size_bytes_of(const ArrayShape& s) {
  std::size_t n = element_bytes_of(s);
  for (std::size_t e : s.shape) n *= e;
  return n;
}

// The driver's texture descriptor for `options` over `resource`.
CUDA_TEXTURE_DESC texture_descriptor(const ResourceDescriptor& resource, const TextureObjectOptions& options) {
  CUDA_TEXTURE_DESC tex{};
  for (int i = 0; i < 3; ++i) {
    static constexpr CUaddress_mode modes[] = {CU_TR_ADDRESS_MODE_WRAP, CU_TR_ADDRESS_MODE_CLAMP,
                                              CU_TR_ADDRESS_MODE_MIRROR, CU_TR_ADDRESS_MODE_BORDER};
    tex.addressMode[i] = modes[static_cast<int>(options.address_mode[static_cast<std::size_t>(i)])];
  }
  tex.filterMode = options.filter_mode == FilterMode::linear ? CU_TR_FILTER_MODE_LINEAR : CU_TR_FILTER_MODE_POINT;
  tex.flags = 0;
  // Element-type reads of an integer format return integers; float formats
  // are read as floats either way (and filter only so).
  const auto fmt = resource.element_format();
  if (options.read_mode == ReadMode::element_type && fmt != ArrayFormat::float16 && fmt != ArrayFormat::float32)
    tex.flags |= CU_TRSF_READ_AS_INTEGER;
  if (options.normalized_coords) tex.flags |= CU_TRSF_NORMALIZED_COORDINATES;
  if (options.srgb) tex.flags |= CU_TRSF_SRGB;
  if (options.disable_trilinear_optimization) tex.flags |= CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION;
  if (options.seamless_cubemap) tex.flags |= CU_TRSF_SEAMLESS_CUBEMAP;
  tex.maxAnisotropy = options.max_anisotropy;
  tex.mipmapFilterMode =
      options.mipmap_filter_mode == FilterMode::linear ? CU_TR_FILTER_MODE_LINEAR : CU_TR_FILTER_MODE_POINT;
  tex.mipmapLevelBias = options.mipmap_level_bias;
  tex.minMipmapLevelClamp = options.min_mipmap_level_clamp;
  tex.maxMipmapLevelClamp = options.max_mipmap_level_clamp;
  if (options.border_color)
    for (std::size_t i = 0; i < 4; ++i) tex.borderColor[i] = (*options.border_color)[i];
  return tex;
}

// One cuMemcpy3DAsync between the whole array and linear memory laid out densely.
void copy_array(const ArrayState& a, bool to_array, CUmemorytype linear_type, CUdeviceptr device_ptr,
                const void* host_ptr, std::size_t linear_size, StreamRef stream, const char* operation) {
  const std::size_t need = size_bytes_of(a.info);
  if (linear_size != need)
    throw InvalidArgumentError(std::string(operation) + ": size mismatch: the array holds " + std::to_string(need) +
                                " bytes, the " + (to_array ? "source" : "destination") + " has " +
                                std::to_string(linear_size));
  detail::StreamContextGuard guard(stream, operation);
  const std::size_t width_bytes = a.info.shape[0] * element_bytes_of(a.info);
  const std::size_t height = a.info.shape.size() > 1 ? a.info.shape[1] : 1;
  const std::size_t depth = a.info.shape.size() > 2 ? a.info.shape[2] : 1;
  CUDA_MEMCPY3D c{};
  if (to_array) {
    c.srcMemoryType = linear_type;
    c.srcDevice = device_ptr;
    c.srcHost = host_ptr;
    c.srcPitch = width_bytes;
    c.srcHeight = height;
    c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    c.dstArray = a.array;
  } else {
    c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    c.srcArray = a.array;
    c.dstMemoryType = linear_type;
    c.dstDevice = device_ptr;
    c.dstHost = const_cast<void*>(host_ptr);
    c.dstPitch = width_bytes;
    c.dstHeight = height;
  }
  c.WidthInBytes = width_bytes;
  c.Height = height;
  c.Depth = depth;
  check(driver().cuMemcpy3DAsync(&c, stream.handle()), "cuMemcpy3DAsync");
}

}  // namespace

const char* to_string(ArrayFormat format) noexcept { return info(format).name; }

const char* to_string(ResourceDescriptor::Kind kind) noexcept {
  switch (kind) {
    case ResourceDescriptor::Kind::array: return "array";
    case ResourceDescriptor::Kind::mipmapped_array: return "mipmapped_array";
    case ResourceDescriptor::Kind::linear: return "linear";
    case ResourceDescriptor::Kind::pitch2d: return "pitch2d";
  }
  return "?";
}
std::size_t format_bytes(ArrayFormat format) noexcept { return info(format).bytes; }

ArrayFormat parse_array_format(std::string_view name) {
  for (const FormatInfo& f : kFormats)
    if (name == f.name) return f.format;
  throw InvalidArgumentError("unknown array format '" + std::string(name) +
                              "': expected uint8, uint16, uint32, int8, int16, int32, float16 or float32");
}

// ---- OpaqueArray ----

CUarray OpaqueArray::handle() const noexcept { return box_ ? box_->array : nullptr; }
const std::vector<std::size_t>& OpaqueArray::shape() const { return require_array(box_, "shape").info.shape; }
ArrayFormat OpaqueArray::format() const { return require_array(box_, "format").info.format; }
unsigned OpaqueArray::num_channels() const { return require_array(box_, "num_channels").info.num_channels; }
std::size_t OpaqueArray::element_bytes() const { return element_bytes_of(require_array(box_, "element_bytes").info); }
std::size_t OpaqueArray::size_bytes() const { return size_bytes_of(require_array(box_, "size_bytes").info); }
int OpaqueArray::device_id() const { return require_array(box_, "device_id").info.device; }
bool OpaqueArray::is_surface_load_store() const {
  return require_array(box_, "is_surface_load_store").info.surface_load_store;
}

void OpaqueArray::copy_from(const Buffer& src, StreamRef stream) {
  const auto& a = require_array(box_, "copy_from");
  if (src.is_closed()) detail::throw_closed("Buffer", "OpaqueArray::copy_from (the source)");
  copy_array(a, true, CU_MEMORYTYPE_UNIFIED, src.handle(), nullptr, src.size(), stream, "OpaqueArray::copy_from");
}
void OpaqueArray::copy_from(std::span<const std::byte> host, StreamRef stream) {
  const auto& a = require_array(box_, "copy_from");
  copy_array(a, true, CU_MEMORYTYPE_HOST, 0, host.data(), host.size(), stream, "OpaqueArray::copy_from");
}
void OpaqueArray::copy_to(Buffer& dst, StreamRef stream) const {
  const auto& a = require_array(box_, "copy_to");
  if (dst.is_closed()) detail::throw_closed("Buffer", "OpaqueArray::copy_to (the destination)");
  copy_array(a, false, CU_MEMORYTYPE_UNIFIED, dst.handle(), nullptr, dst.size(), stream, "OpaqueArray::copy_to");
}
void OpaqueArray::copy_to(std::span<std::byte> host, StreamRef stream) const {
  const auto& a = require_array(box_, "copy_to");
  copy_array(a, false, CU_MEMORYTYPE_HOST, 0, host.data(), host.size(), stream, "OpaqueArray::copy_to");
}

OpaqueArray borrow_array(CUarray array, int device, detail::ContextHandle ctx, detail::Owner keeps,
                         const char* operation) {
  CUDA_ARRAY3D_DESCRIPTOR d{};
  check(driver().cuArray3DGetDescriptor(&d, array), "cuArray3DGetDescriptor");
  auto state = std::make_shared<ArrayState>();
  const FormatInfo* format = nullptr;
  for (const FormatInfo& f : kFormats)
    if (f.driver == d.Format) format = &f;
  if (!format)
    throw InvalidArgumentError(std::string(operation) + ": the array's format (CUarray_format " +
                                std::to_string(static_cast<int>(d.Format)) +
                                ") is none of uint8, uint16, uint32, int8, int16, int32, float16 or float32");
  state->info.format = format->format;
  state->info.num_channels = d.NumChannels;
  state->info.surface_load_store = (d.Flags & CUDA_ARRAY3D_SURFACE_LDST) != 0;
  state->info.device = device;
  state->info.shape.push_back(d.Width);  // a height or depth of 0: the driver's 1-D or 2-D
  if (d.Height || d.Depth) state->info.shape.push_back(std::max<std::size_t>(d.Height, 1));
  if (d.Depth) state->info.shape.push_back(d.Depth);
  detail::borrow_array(*state, array, std::move(ctx), std::move(keeps));
  return OpaqueArray(std::move(state));
}

// ---- MipmappedArray ----

CUmipmappedArray MipmappedArray::handle() const noexcept { return box_ ? box_->array : nullptr; }
const std::vector<std::size_t>& MipmappedArray::shape() const { return require_mipmap(box_, "shape").info.shape; }
ArrayFormat MipmappedArray::format() const { return require_mipmap(box_, "format").info.format; }
unsigned MipmappedArray::num_channels() const { return require_mipmap(box_, "num_channels").info.num_channels; }
unsigned MipmappedArray::num_levels() const { return require_mipmap(box_, "num_levels").num_levels; }
int MipmappedArray::device_id() const { return require_mipmap(box_, "device_id").info.device; }
bool MipmappedArray::is_surface_load_store() const {
  return require_mipmap(box_, "is_surface_load_store").info.surface_load_store;
}

OpaqueArray MipmappedArray::get_level(unsigned level) const {
  const auto& m = require_mipmap(box_, "get_level");
  if (level >= m.num_levels)
    throw OutOfRangeError("MipmappedArray::get_level: level (" + std::to_string(level) + ") must be < num_levels (" +
                            std::to_string(m.num_levels) + ")");
  auto level_state = std::make_shared<ArrayState>();
  level_state->info = m.info;
  for (std::size_t& extent : level_state->info.shape) extent = std::max<std::size_t>(1, extent >> level);
  detail::make_mipmap_level(*level_state, box_, level);
  return OpaqueArray(std::move(level_state));
}

// ---- ResourceDescriptor ----

ResourceDescriptor ResourceDescriptor::from_opaque_array(const OpaqueArray& array) {
  require_array(array.box(), "ResourceDescriptor::from_opaque_array");
  ResourceDescriptor r;
  r.kind_ = Kind::array;
  r.array_ = array;
  return r;
}

ResourceDescriptor ResourceDescriptor::from_mipmapped_array(const MipmappedArray& array) {
  require_mipmap(array.box(), "ResourceDescriptor::from_mipmapped_array");
  ResourceDescriptor r;
  r.kind_ = Kind::mipmapped_array;
  r.mipmapped_ = array;
  return r;
}

ResourceDescriptor ResourceDescriptor::from_linear(const Buffer& buffer, ArrayFormat format, unsigned num_channels,
                                                   std::optional<std::size_t> size, std::shared_ptr<const void> owner) {
  if (buffer.is_closed()) detail::throw_closed("Buffer", "ResourceDescriptor::from_linear");
  check_channels("ResourceDescriptor::from_linear", num_channels);
  const std::size_t size_bytes = size.value_or(buffer.size());
  const std::string what = "ResourceDescriptor::from_linear: size_bytes (" + std::to_string(size_bytes) + ")";
  if (size_bytes > buffer.size())
    throw InvalidArgumentError(what + " exceeds buffer.size (" + std::to_string(buffer.size()) + ")");
  const std::size_t element = info(format).bytes * num_channels;
  if (size_bytes < element)
    throw InvalidArgumentError(what + " must be at least one element (" + std::to_string(element) + " bytes)");
  if (size_bytes % element != 0)
    throw InvalidArgumentError(what + " must be a multiple of element size (" + std::to_string(element) +
                                " bytes for " + upper(to_string(format)) + " x " + std::to_string(num_channels) + ")");
  ResourceDescriptor r;
  r.kind_ = Kind::linear;
  r.ptr_ = buffer.handle();
  r.format_ = format;
  r.channels_ = num_channels;
  r.size_bytes_ = size_bytes;
  r.owner_ = std::move(owner);
  return r;
}

ResourceDescriptor ResourceDescriptor::from_pitch2d(const Buffer& buffer, ArrayFormat format, unsigned num_channels,
                                                    std::size_t width, std::size_t height, std::size_t pitch_bytes,
                                                    std::shared_ptr<const void> owner) {
  if (buffer.is_closed()) detail::throw_closed("Buffer", "ResourceDescriptor::from_pitch2d");
  check_channels("ResourceDescriptor::from_pitch2d", num_channels);
  if (width == 0) throw InvalidArgumentError("ResourceDescriptor::from_pitch2d: width must be >= 1, got 0");
  if (height == 0) throw InvalidArgumentError("ResourceDescriptor::from_pitch2d: height must be >= 1, got 0");
  const std::size_t row = width * info(format).bytes * num_channels;
  if (pitch_bytes < row)
    throw InvalidArgumentError("ResourceDescriptor::from_pitch2d: pitch_bytes (" + std::to_string(pitch_bytes) +
                                ") must be >= width * element_bytes (" + std::to_string(row) + ")");
  // Every row whole, the last one's padding too (cuda.core's rule: pitch * height bytes).
  if (pitch_bytes > buffer.size() / height) {
    const bool fits = pitch_bytes <= SIZE_MAX / height;  // the product itself, where 64 bits hold it
    throw InvalidArgumentError("ResourceDescriptor::from_pitch2d: pitch_bytes * height (" +
                                (fits ? std::to_string(pitch_bytes * height)
                                      : std::to_string(pitch_bytes) + " * " + std::to_string(height)) +
                                ") exceeds buffer.size (" + std::to_string(buffer.size()) + ")");
  }
  ResourceDescriptor r;
  r.kind_ = Kind::pitch2d;
  r.ptr_ = buffer.handle();
  r.format_ = format;
  r.channels_ = num_channels;
  r.width_ = width;
  r.height_ = height;
  r.pitch_ = pitch_bytes;
  r.owner_ = std::move(owner);
  return r;
}

std::optional<ArrayFormat> ResourceDescriptor::format() const noexcept {
  if (kind_ == Kind::linear || kind_ == Kind::pitch2d) return format_;
  return std::nullopt;
}

ArrayFormat ResourceDescriptor::element_format() const {
  switch (kind_) {
    case Kind::array: return array_.format();
    case Kind::mipmapped_array: return mipmapped_.format();
    default: return format_;
  }
}

CUDA_RESOURCE_DESC ResourceDescriptor::to_driver() const {
  CUDA_RESOURCE_DESC d{};
  switch (kind_) {
    case Kind::array:
      d.resType = CU_RESOURCE_TYPE_ARRAY;
      d.res.array.hArray = require_array(array_.box(), "ResourceDescriptor (its array)").array;
      break;
    case Kind::mipmapped_array:
      d.resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
      d.res.mipmap.hMipmappedArray = require_mipmap(mipmapped_.box(), "ResourceDescriptor (its array)").array;
      break;
    case Kind::linear:
      d.resType = CU_RESOURCE_TYPE_LINEAR;
      d.res.linear.devPtr = ptr_;
      d.res.linear.format = info(format_).driver;
      d.res.linear.numChannels = channels_;
      d.res.linear.sizeInBytes = size_bytes_;
      break;
    case Kind::pitch2d:
      d.resType = CU_RESOURCE_TYPE_PITCH2D;
      d.res.pitch2D.devPtr = ptr_;
      d.res.pitch2D.format = info(format_).driver;
      d.res.pitch2D.numChannels = channels_;
      d.res.pitch2D.width = width_;
      d.res.pitch2D.height = height_;
      d.res.pitch2D.pitchInBytes = pitch_;
      break;
  }
  return d;
}

// ---- TextureObject, SurfaceObject ----

namespace {
template <typename State, typename Box>
const State& require_object(const std::shared_ptr<const Box>& box, const char* object, const char* operation) {
  if (!box) [[unlikely]]
    detail::throw_closed(object, operation);
  return static_cast<const State&>(*box);
}
const TexObjectState& require_texture(const std::shared_ptr<const detail::TexObjectBox>& box, const char* operation) {
  return require_object<TexObjectState>(box, "TextureObject", operation);
}
const SurfObjectState& require_surface(const std::shared_ptr<const detail::SurfObjectBox>& box, const char* operation) {
  return require_object<SurfObjectState>(box, "SurfaceObject", operation);
}
}  // namespace

CUtexObject TextureObject::handle() const noexcept { return box_ ? box_->tex : 0; }
const ResourceDescriptor& TextureObject::resource() const { return require_texture(box_, "resource").resource(); }
const TextureObjectOptions& TextureObject::options() const { return require_texture(box_, "options").options; }
int TextureObject::device_id() const { return require_texture(box_, "device_id").device; }
CUtexObject TextureObject::kernel_argument() const { return require_texture(box_, "launch").tex; }

CUsurfObject SurfaceObject::handle() const noexcept { return box_ ? box_->surf : 0; }
const ResourceDescriptor& SurfaceObject::resource() const { return require_surface(box_, "resource").resource(); }
int SurfaceObject::device_id() const { return require_surface(box_, "device_id").device; }
CUsurfObject SurfaceObject::kernel_argument() const { return require_surface(box_, "launch").surf; }

}  // namespace cucore::texture

namespace cucore {

using namespace texture;

namespace {
// The device whose memory `resource` reads: an array's own; for linear memory
// the pointer's, where it is device memory (-1: host or managed memory, which
// any device reads).
int resource_device(const ResourceDescriptor& resource) {
  switch (resource.kind()) {
    case ResourceDescriptor::Kind::array: return resource.array().device_id();
    case ResourceDescriptor::Kind::mipmapped_array: return resource.mipmapped_array().device_id();
    default: break;
  }
  unsigned type = 0;
  int managed = 0, ordinal = -1;
  CUpointer_attribute attrs[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                  CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  void* values[3] = {&type, &managed, &ordinal};
  check(driver().cuPointerGetAttributes(3, attrs, values, resource.pointer()), "cuPointerGetAttributes");
  return type == CU_MEMORYTYPE_DEVICE && !managed ? ordinal : -1;
}

// A texture or surface is made in its device's context: a resource of another
// device's is refused (the driver would make an object that faults on use).
void check_resource_device(const char* operation, const ResourceDescriptor& resource, int device) {
  const int owner = resource_device(resource);
  if (owner >= 0 && owner != device)
    throw InvalidArgumentError(std::string(operation) + ": the resource belongs to device " + std::to_string(owner) +
                                ", not device " + std::to_string(device) + "; make the object with Device(" +
                                std::to_string(owner) + ")");
}
}  // namespace

OpaqueArray Device::create_opaque_array(const OpaqueArrayOptions& options) const {
  check_shape("Device::create_opaque_array", options.shape);
  check_channels("Device::create_opaque_array", options.num_channels);
  const CUDA_ARRAY3D_DESCRIPTOR d =
      array_descriptor(options.shape, options.format, options.num_channels, options.is_surface_load_store);
  Context ctx = context();
  ScopedContext scope(ctx.handle());
  auto state = std::make_shared<ArrayState>();  // first: should it fail, no array is left behind
  state->info = {options.shape, options.format, options.num_channels, options.is_surface_load_store, ordinal()};
  detail::make_array(*state, d, ctx.box());
  scope.restore();  // should it throw, the array goes with `state`
  return OpaqueArray(std::move(state));
}

MipmappedArray Device::create_mipmapped_array(const MipmappedArrayOptions& options) const {
  check_shape("Device::create_mipmapped_array", options.shape);
  check_channels("Device::create_mipmapped_array", options.num_channels);
  if (options.num_levels == 0) throw InvalidArgumentError("Device::create_mipmapped_array: num_levels must be >= 1, got 0");
  const CUDA_ARRAY3D_DESCRIPTOR d =
      array_descriptor(options.shape, options.format, options.num_channels, options.is_surface_load_store);
  Context ctx = context();
  ScopedContext scope(ctx.handle());
  auto state = std::make_shared<MipmappedArrayState>();
  state->info = {options.shape, options.format, options.num_channels, options.is_surface_load_store, ordinal()};
  state->num_levels = options.num_levels;
  detail::make_mipmapped_array(*state, d, options.num_levels, ctx.box());
  scope.restore();
  return MipmappedArray(std::move(state));
}

TextureObject Device::create_texture_object(const ResourceDescriptor& resource) const {
  return create_texture_object(resource, TextureObjectOptions{});
}

TextureObject Device::create_texture_object(const ResourceDescriptor& resource,
                                            const TextureObjectOptions& options) const {
  if (resource.kind() == ResourceDescriptor::Kind::linear &&
      (options.normalized_coords || options.filter_mode == FilterMode::linear))
    throw InvalidArgumentError(
        "Device::create_texture_object: a linear resource is read by a typed 1-D fetch: it takes neither "
        "normalized_coords nor linear filtering (use an OpaqueArray or a pitch2d resource)");
  if (options.filter_mode == FilterMode::linear && !info(resource.element_format()).is_float &&
      options.read_mode == ReadMode::element_type)
    throw InvalidArgumentError(
        std::string("Device::create_texture_object: linear filtering of the integer format ") +
        to_string(resource.element_format()) + " needs read_mode normalized_float");
  check_resource_device("Device::create_texture_object", resource, ordinal());
  ScopedContext scope(context().handle());
  auto state = std::make_shared<TexObjectState>();
  state->options = options;
  state->device = ordinal();
  detail::make_texture_object(*state, resource.to_driver(), texture_descriptor(resource, options),
                              std::make_shared<const ResourceDescriptor>(resource), context().box());
  scope.restore();
  return TextureObject(std::move(state));
}

SurfaceObject Device::create_surface_object(const ResourceDescriptor& resource) const {
  if (resource.kind() != ResourceDescriptor::Kind::array)
    throw InvalidArgumentError(std::string("Device::create_surface_object: SurfaceObject requires an array-backed "
                                            "ResourceDescriptor, got kind='") +
                                to_string(resource.kind()) +
                                "' (for a mipmapped array, bind one of its levels: MipmappedArray::get_level)");
  if (!resource.array().is_surface_load_store())
    throw InvalidArgumentError(
        "Device::create_surface_object: OpaqueArray must be created with is_surface_load_store=True to be bound as "
        "a SurfaceObject");
  check_resource_device("Device::create_surface_object", resource, ordinal());
  ScopedContext scope(context().handle());
  auto state = std::make_shared<SurfObjectState>();
  state->device = ordinal();
  detail::make_surface_object(*state, resource.to_driver(), std::make_shared<const ResourceDescriptor>(resource),
                              context().box());
  scope.restore();
  return SurfaceObject(std::move(state));
}

}  // namespace cucore
