#include <cucore/graphics.hpp>

#include <cucore/context.hpp>
#include <cucore/errors.hpp>

#include <optional>
#include <stdexcept>
#include <string>

#include "handles/buffer_handles.hpp"
#include "handles/graphics_handles.hpp"
#include "loader/driver.hpp"
#include "texture/borrowed_array.hpp"

namespace cucore {

using detail::check;
using detail::driver;

namespace {

struct FlagName {
  const char* name;
  unsigned value;
};
// Sorted by name: the order cuda.core lists them in its message.
constexpr FlagName kRegisterFlags[] = {
    {"none", CU_GRAPHICS_REGISTER_FLAGS_NONE},
    {"read_only", CU_GRAPHICS_REGISTER_FLAGS_READ_ONLY},
    {"surface_load_store", CU_GRAPHICS_REGISTER_FLAGS_SURFACE_LDST},
    {"texture_gather", CU_GRAPHICS_REGISTER_FLAGS_TEXTURE_GATHER},
    {"write_discard", CU_GRAPHICS_REGISTER_FLAGS_WRITE_DISCARD},
};
constexpr FlagName kMapFlags[] = {
    {"none", CU_GRAPHICS_MAP_RESOURCE_FLAGS_NONE},
    {"read_only", CU_GRAPHICS_MAP_RESOURCE_FLAGS_READ_ONLY},
    {"write_discard", CU_GRAPHICS_MAP_RESOURCE_FLAGS_WRITE_DISCARD},
};

template <std::size_t N>
unsigned parse_flag(const FlagName (&table)[N], std::string_view name, const char* kind) {
  for (const FlagName& f : table)
    if (name == f.name) return f.value;
  std::string valid;
  for (const FlagName& f : table) valid += (valid.empty() ? "" : ", ") + std::string(f.name);
  throw InvalidArgumentError(std::string("Unknown ") + kind + " flag '" + std::string(name) +
                              "'. Valid flags: " + valid);
}

// The free of a mapped Buffer's box: the unmap of its mapping (the box's
// owner), on `stream`. A failure throws and leaves it mapped (the Buffer stays
// open, as a refused free leaves one); from the box's destructor it is reported.
void unmap_buffer(const detail::BufferBox& box, CUstream stream, bool /*dropping*/) {
  detail::unmap_graphics(*static_cast<const detail::GraphicsMappingBox*>(box.owner.get()), stream);
}

}  // namespace

GraphicsRegisterFlags parse_graphics_register_flag(std::string_view name) {
  return static_cast<GraphicsRegisterFlags>(parse_flag(kRegisterFlags, name, "register"));
}
const char* graphics_register_flag_names() noexcept {
  return "none, read_only, surface_load_store, texture_gather, write_discard";
}
GraphicsMapFlags parse_graphics_map_flag(std::string_view name) {
  return static_cast<GraphicsMapFlags>(parse_flag(kMapFlags, name, "map"));
}

struct GraphicsResource::State {
  detail::GraphicsResourceHandle box;  // null once closed
  Kind kind = Kind::buffer;
  int device = -1;
  // The last mapping, while anything holds it (the mapped Buffer's box, an
  // array's): a new map waits for it to go.
  std::weak_ptr<const detail::GraphicsMappingBox> mapping;
  std::shared_ptr<Buffer> buffer;                // what the last map() made
  std::shared_ptr<texture::OpaqueArray> array;  // what the last map_array() made

  bool is_mapped() const noexcept {
    return kind == Kind::buffer ? buffer && !buffer->is_closed() : array && !array->is_closed();
  }
  const detail::GraphicsResourceBox& open(const char* operation) const {
    if (!box) [[unlikely]]
      detail::throw_closed("GraphicsResource", operation);
    return *box;
  }
  CUcontext context() const noexcept { return box->ctx ? box->ctx->ctx : nullptr; }
  // The checks before a map: open, of `kind`, not mapped, the stream open.
  void before_map(Kind want, StreamRef stream, const char* operation) const {
    open(operation);
    if (kind != want)
      throw InvalidArgumentError(
          kind == Kind::image
              ? std::string("GraphicsResource::") + operation +
                    ": an image resource (from_gl_image) has no device pointer; map_array() maps it as a CUDA array"
              : std::string("GraphicsResource::") + operation +
                    ": a buffer resource (from_gl_buffer) is mapped as a Buffer; map() maps it");
    if (is_mapped()) throw RuntimeError("GraphicsResource is already mapped");
    if (!mapping.expired())
      throw RuntimeError("GraphicsResource is already mapped: what its last mapping gave (the mapped Buffer's box, an "
                  "OpaqueArray over it) is still held elsewhere, and the unmap waits for the last of it");
    if (stream.is_closed()) detail::throw_closed("Stream", operation);
  }
  // A new mapping of the resource on `stream`, mapped (unmapped by its box if
  // what follows fails).
  std::shared_ptr<detail::GraphicsMappingBox> map(StreamRef stream, detail::StreamHandle stream_box) const {
    auto m = std::make_shared<detail::GraphicsMappingBox>();
    detail::map_graphics(*m, box, stream.handle(), std::move(stream_box));
    return m;
  }
  Buffer& map_buffer(StreamRef stream, detail::StreamHandle stream_box);
  texture::OpaqueArray& map_image(StreamRef stream, detail::StreamHandle stream_box);
};

GraphicsResource GraphicsResource::from_gl_buffer(std::uint32_t gl_buffer, GraphicsRegisterFlags flags) {
  Context ctx = Context::current();
  auto box = std::make_shared<detail::GraphicsResourceBox>();
  detail::register_gl_buffer(*box, gl_buffer, static_cast<unsigned>(flags), ctx.box());
  auto s = std::make_shared<State>();
  s->kind = Kind::buffer;
  s->device = ctx.device_id();
  s->box = std::move(box);
  return GraphicsResource(std::move(s));
}

GraphicsResource GraphicsResource::from_gl_image(std::uint32_t image, std::uint32_t target,
                                                 GraphicsRegisterFlags flags) {
  Context ctx = Context::current();
  auto box = std::make_shared<detail::GraphicsResourceBox>();
  detail::register_gl_image(*box, image, target, static_cast<unsigned>(flags), ctx.box());
  auto s = std::make_shared<State>();
  s->kind = Kind::image;
  s->device = ctx.device_id();
  s->box = std::move(box);
  return GraphicsResource(std::move(s));
}

CUgraphicsResource GraphicsResource::handle() const noexcept {
  return state_ && state_->box ? state_->box->resource : nullptr;
}
bool GraphicsResource::is_closed() const noexcept { return !state_ || !state_->box; }
bool GraphicsResource::is_mapped() const noexcept { return state_ && state_->is_mapped(); }

GraphicsResource::Kind GraphicsResource::kind() const {
  if (is_closed()) detail::throw_closed("GraphicsResource", "kind");
  return state_->kind;
}
int GraphicsResource::device_id() const {
  if (is_closed()) detail::throw_closed("GraphicsResource", "device_id");
  return state_->device;
}

namespace {
[[noreturn]] void throw_closed_resource(const char* operation) { detail::throw_closed("GraphicsResource", operation); }

// Layer `index`, level `level` of the mapped image as an OpaqueArray holding `mapping`.
texture::OpaqueArray subresource_array(const detail::GraphicsResourceBox& res, int device,
                                       std::shared_ptr<const detail::GraphicsMappingBox> mapping, unsigned index,
                                       unsigned level, const char* operation) {
  CUarray a = nullptr;
  check(driver().cuGraphicsSubResourceGetMappedArray(&a, res.resource, index, level),
        "cuGraphicsSubResourceGetMappedArray");
  return texture::borrow_array(a, device, res.ctx, detail::Owner(std::move(mapping)), operation);
}
}  // namespace

Buffer& GraphicsResource::State::map_buffer(StreamRef stream, detail::StreamHandle stream_box) {
  before_map(Kind::buffer, stream, "map");
  ScopedContext scope(context());
  auto m = map(stream, stream_box);
  CUdeviceptr ptr = 0;
  std::size_t size = 0;
  check(driver().cuGraphicsResourceGetMappedPointer(&ptr, &size, box->resource), "cuGraphicsResourceGetMappedPointer");
  // The Buffer's box frees by unmapping (unmap_buffer), on `stream` unless its
  // close is given another; its owner is the mapping, whose registration
  // outlives the unmap.
  auto b = detail::make_buffer_box(ptr, size, &unmap_buffer, nullptr, stream.handle(), std::move(stream_box),
                                   detail::Owner(m), false);
  buffer = std::make_shared<Buffer>(Buffer(std::move(b)));
  mapping = m;
  scope.restore();
  return *buffer;
}

texture::OpaqueArray& GraphicsResource::State::map_image(StreamRef stream, detail::StreamHandle stream_box) {
  before_map(Kind::image, stream, "map_array");
  ScopedContext scope(context());
  auto m = map(stream, std::move(stream_box));
  array = std::make_shared<texture::OpaqueArray>(subresource_array(*box, device, m, 0, 0, "GraphicsResource::map_array"));
  mapping = m;
  scope.restore();
  return *array;
}

Buffer& GraphicsResource::map(const Stream& stream) {
  if (!state_) throw_closed_resource("map");
  return state_->map_buffer(stream, stream.box());
}
Buffer& GraphicsResource::map(StreamRef stream) {
  if (!state_) throw_closed_resource("map");
  return state_->map_buffer(stream, nullptr);
}
texture::OpaqueArray& GraphicsResource::map_array(const Stream& stream) {
  if (!state_) throw_closed_resource("map_array");
  return state_->map_image(stream, stream.box());
}
texture::OpaqueArray& GraphicsResource::map_array(StreamRef stream) {
  if (!state_) throw_closed_resource("map_array");
  return state_->map_image(stream, nullptr);
}

texture::OpaqueArray GraphicsResource::mapped_array(unsigned array_index, unsigned mip_level) const {
  if (!state_) throw_closed_resource("mapped_array");
  const State& s = *state_;
  s.open("mapped_array");
  if (s.kind != Kind::image)
    throw InvalidArgumentError(
        "GraphicsResource::mapped_array: a buffer resource (from_gl_buffer) has no CUDA array; map() gives its "
        "Buffer");
  auto m = s.mapping.lock();
  if (!s.is_mapped() || !m) throw RuntimeError("GraphicsResource is not mapped");
  ScopedContext scope(s.context());
  texture::OpaqueArray a =
      subresource_array(*s.box, s.device, std::move(m), array_index, mip_level, "GraphicsResource::mapped_array");
  scope.restore();
  return a;
}

std::shared_ptr<Buffer> GraphicsResource::mapped_buffer() const noexcept {
  return state_ ? state_->buffer : nullptr;
}
std::shared_ptr<texture::OpaqueArray> GraphicsResource::mapped_image() const noexcept {
  return state_ ? state_->array : nullptr;
}

namespace {
// Closes the mapped object of `s` (mapped, open), unmapping on `stream` (none:
// the mapping's) when nothing else holds the mapping.
void close_mapped(GraphicsResource::Kind kind, std::shared_ptr<Buffer>& buffer,
                  std::shared_ptr<texture::OpaqueArray>& array,
                  const std::weak_ptr<const detail::GraphicsMappingBox>& mapping, std::optional<StreamRef> stream) {
  if (kind == GraphicsResource::Kind::buffer) {
    if (stream) buffer->close(*stream);
    else buffer->close();
    return;
  }
  // The array's share is the mapping's last holder (besides this one): unmap
  // here, so that a refusal throws; else the last holder unmaps.
  if (auto m = mapping.lock(); m && array->box().use_count() == 1 && m.use_count() == 2)
    detail::unmap_graphics(*m, stream ? stream->handle() : m->stream);
  array->close();
}
}  // namespace

void GraphicsResource::unmap() {
  if (!state_) throw_closed_resource("unmap");
  State& s = *state_;
  s.open("unmap");
  if (!s.is_mapped()) throw RuntimeError("GraphicsResource is not mapped");
  close_mapped(s.kind, s.buffer, s.array, s.mapping, std::nullopt);
}

void GraphicsResource::unmap(StreamRef stream) {
  if (!state_) throw_closed_resource("unmap");
  State& s = *state_;
  s.open("unmap");
  if (!s.is_mapped()) throw RuntimeError("GraphicsResource is not mapped");
  if (stream.is_closed()) detail::throw_closed("Stream", "GraphicsResource::unmap");
  close_mapped(s.kind, s.buffer, s.array, s.mapping, stream);
}

void GraphicsResource::set_map_flags(GraphicsMapFlags flags) {
  if (!state_) throw_closed_resource("set_map_flags");
  const State& s = *state_;
  s.open("set_map_flags");
  const auto& d = driver();
  detail::require(reinterpret_cast<const void*>(d.cuGraphicsResourceSetMapFlags), 6050,
                  "graphics interop (cuGraphicsResourceSetMapFlags)");
  ScopedContext scope(s.context());
  check(d.cuGraphicsResourceSetMapFlags(s.box->resource, static_cast<unsigned>(flags)),
        "cuGraphicsResourceSetMapFlags");
  scope.restore();
}

void GraphicsResource::close() {
  if (is_closed()) return;
  State& s = *state_;
  if (s.is_mapped()) close_mapped(s.kind, s.buffer, s.array, s.mapping, std::nullopt);
  s.box.reset();
}

void GraphicsResource::close(StreamRef stream) {
  if (is_closed()) return;
  State& s = *state_;
  if (s.is_mapped()) {
    if (stream.is_closed()) detail::throw_closed("Stream", "GraphicsResource::close");
    close_mapped(s.kind, s.buffer, s.array, s.mapping, stream);
  }
  s.box.reset();
}

}  // namespace cucore
