#pragma once
// Graphics interop, as cuda.core's GraphicsResource: an OpenGL buffer object
// or image (texture or renderbuffer) registered with CUDA, so kernels read and
// write the graphics API's memory with no copy. OpenGL is not a dependency:
// the GL object's name (GLuint) and target (GLenum) are plain integers, and
// the caller makes the GL context that owns the object current on the thread
// for every call that reaches the driver (registering, mapping, unmapping,
// closing), as CUDA's GL interop requires.
//
// Registration lives in a box (src/handles/graphics_handles.hpp) that holds
// the CUDA context it was made in and unregisters the resource when the last
// share goes. Mapping makes the mapped object cuda.core hands out: for a
// buffer a Buffer over the mapped pointer, for an image an OpaqueArray over
// the mapped CUDA array; closing it (Buffer::close, OpaqueArray::close, or
// unmap() and close() here) unmaps the resource, as cuda.core ties the unmap
// to its mapped Buffer. While something else holds the mapped object's box
// (Buffer::box(), a copy of the OpaqueArray, another mapped_array()), the
// unmap waits for the last of them, on the mapping's stream; the
// registration, held by the mapping, goes only after that. So a resource
// dropped while mapped is unmapped and then unregistered, in any order.
//
// A GraphicsResource is a thin value over shared state (copies are one
// resource); it is not for concurrent use from several threads.
#include <cuda.h>

#include <cstdint>
#include <memory>
#include <string_view>

#include <cucore/buffer.hpp>
#include <cucore/stream.hpp>
#include <cucore/texture.hpp>

namespace cucore {

// CU_GRAPHICS_REGISTER_FLAGS_*: how CUDA will use the resource. A bit set.
enum class GraphicsRegisterFlags : unsigned {
  none = CU_GRAPHICS_REGISTER_FLAGS_NONE,
  read_only = CU_GRAPHICS_REGISTER_FLAGS_READ_ONLY,
  write_discard = CU_GRAPHICS_REGISTER_FLAGS_WRITE_DISCARD,
  surface_load_store = CU_GRAPHICS_REGISTER_FLAGS_SURFACE_LDST,
  texture_gather = CU_GRAPHICS_REGISTER_FLAGS_TEXTURE_GATHER,
};
constexpr GraphicsRegisterFlags operator|(GraphicsRegisterFlags a, GraphicsRegisterFlags b) noexcept {
  return static_cast<GraphicsRegisterFlags>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
// cuda.core's flag names: "none", "read_only", "write_discard",
// "surface_load_store", "texture_gather". Another name is
// std::invalid_argument: "Unknown register flag 'x'. Valid flags: ...".
GraphicsRegisterFlags parse_graphics_register_flag(std::string_view name);
// "none, read_only, surface_load_store, texture_gather, write_discard" (sorted, as cuda.core lists them).
const char* graphics_register_flag_names() noexcept;

// CU_GRAPHICS_MAP_RESOURCE_FLAGS_*: how CUDA will access the resource while
// mapped (GraphicsResource::set_map_flags). One value, not a bit set.
enum class GraphicsMapFlags : unsigned {
  none = CU_GRAPHICS_MAP_RESOURCE_FLAGS_NONE,
  read_only = CU_GRAPHICS_MAP_RESOURCE_FLAGS_READ_ONLY,
  write_discard = CU_GRAPHICS_MAP_RESOURCE_FLAGS_WRITE_DISCARD,
};
// "none", "read_only" or "write_discard"; another is std::invalid_argument.
GraphicsMapFlags parse_graphics_map_flag(std::string_view name);

class GraphicsResource {
 public:
  enum class Kind { buffer, image };

  GraphicsResource() noexcept = default;  // closed

  // Registers an OpenGL buffer object (cuGraphicsGLRegisterBuffer) in the
  // calling thread's current CUDA context (as cuda.core does: with none
  // current the driver refuses, CudaError); the buffer's GL context must be
  // current too. A driver refusal (no GL context, a bad name, interop the
  // driver does not offer: CUDA_ERROR_OPERATING_SYSTEM) is CudaError.
  static GraphicsResource from_gl_buffer(std::uint32_t gl_buffer,
                                         GraphicsRegisterFlags flags = GraphicsRegisterFlags::none);
  // Registers an OpenGL texture or renderbuffer (cuGraphicsGLRegisterImage):
  // `target` is its GL target (GL_TEXTURE_2D, GL_RENDERBUFFER, ...).
  static GraphicsResource from_gl_image(std::uint32_t image, std::uint32_t target,
                                        GraphicsRegisterFlags flags = GraphicsRegisterFlags::none);

  CUgraphicsResource handle() const noexcept;  // null once closed
  bool is_closed() const noexcept;
  // Whether the object the last map made (the Buffer, the array) is still
  // open, as cuda.core reports it: closing that object unmaps.
  bool is_mapped() const noexcept;
  Kind kind() const;       // ClosedError when closed
  int device_id() const;   // of the context it was registered in; ClosedError when closed

  // Maps a buffer resource on `stream` (cuGraphicsMapResources, then
  // cuGraphicsResourceGetMappedPointer) and gives the mapped Buffer: the
  // mapped pointer and size, never freed by cucore; its close() (or unmap())
  // unmaps, on `stream` or the one its close is given. Given a Stream, the
  // mapping keeps a share of it; given a StreamRef, the stream must outlive
  // the mapping. The reference is to the resource's own Buffer (shared by
  // every copy of the resource), valid until the next map or until the last
  // copy of the resource goes; mapped_buffer() gives a share of it. Errors:
  // ClosedError (closed), Error "GraphicsResource is already mapped" (as
  // cuda.core's RuntimeError; also while an earlier mapping is held alive
  // elsewhere), std::invalid_argument for an image resource (which
  // map_array() maps), CudaError where the driver refuses (the resource is
  // left unmapped).
  Buffer& map(const Stream& stream);
  Buffer& map(StreamRef stream);
  // Maps an image resource on `stream` and gives its level 0 of layer 0
  // (cuGraphicsSubResourceGetMappedArray) as an OpaqueArray: shape, format
  // and channels as the driver describes the array; copies in and out of it,
  // and textures and surfaces over it, work as for any OpaqueArray. Its
  // close() (or unmap()) unmaps. The rest as map(); a buffer resource is
  // std::invalid_argument.
  texture::OpaqueArray& map_array(const Stream& stream);
  texture::OpaqueArray& map_array(StreamRef stream);
  // Another layer or mip level of the mapped image, as its own OpaqueArray,
  // which keeps the mapping (and so the resource) mapped while it lives.
  // Error "GraphicsResource is not mapped" when it is not; CudaError for an
  // index or level the image lacks.
  texture::OpaqueArray mapped_array(unsigned array_index = 0, unsigned mip_level = 0) const;
  // A share of what the last map() / map_array() made (null before any).
  std::shared_ptr<Buffer> mapped_buffer() const noexcept;
  std::shared_ptr<texture::OpaqueArray> mapped_image() const noexcept;

  // Closes the mapped object: unmaps on `stream` (else the mapping's stream)
  // when nothing else holds the mapping, else leaves the unmap to the last
  // holder. ClosedError when closed, Error "GraphicsResource is not mapped"
  // when not mapped; a driver refusal is CudaError and leaves it mapped.
  void unmap();
  void unmap(StreamRef stream);

  // cuGraphicsResourceSetMapFlags: how the next mappings will be accessed.
  // ClosedError when closed; the driver refuses while mapped (CudaError).
  void set_map_flags(GraphicsMapFlags flags);

  // Unmaps first when mapped (on `stream`, else the mapping's), then drops
  // the registration: unregistered at once unless a mapping held elsewhere
  // keeps it until that goes. Idempotent; a failed unmap throws and leaves the
  // resource open and mapped.
  void close();
  void close(StreamRef stream);

 private:
  struct State;
  explicit GraphicsResource(std::shared_ptr<State> state) noexcept : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

}  // namespace cucore
