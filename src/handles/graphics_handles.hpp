#pragma once
// Boxes for graphics interop (handles.hpp's rules). A registration box owns
// one CUgraphicsResource (an OpenGL buffer or image registered with
// cuGraphicsGLRegisterBuffer / cuGraphicsGLRegisterImage) and holds the box of
// the context it was registered in; it unregisters the resource
// (cuGraphicsUnregisterResource) when the last share goes.
//
// A mapping box stands for one cuGraphicsMapResources of a registered
// resource and holds a share of its registration: whatever keeps the mapping
// (the mapped Buffer's box, a mapped array's box) keeps the resource
// registered, so a resource dropped while mapped is unmapped first (on the
// mapping's stream) and unregistered after, whatever the order its holders go
// in. The box unmaps when it goes unless an explicit unmap (unmap_graphics:
// a mapped Buffer's close, GraphicsResource::unmap) came first, which leaves
// it nothing to release (as a Buffer's box once close() has freed it).
//
// Both releases run in the resource's context (made current for the call when
// another, or none, is current, and put back after), through the table
// already loaded; they never throw. The GL context the resource belongs to
// must be current on the thread too (CUDA's GL interop needs it for every
// call): that is the caller's, as for registering.
#include <cuda.h>

#include <atomic>
#include <memory>

#include "handles/handles.hpp"

namespace cucore::detail {

struct GraphicsResourceBox {
  CUgraphicsResource resource = nullptr;
  ContextHandle ctx;  // the context it was registered in
  GraphicsResourceBox() = default;
  GraphicsResourceBox(const GraphicsResourceBox&) = delete;
  GraphicsResourceBox& operator=(const GraphicsResourceBox&) = delete;
  ~GraphicsResourceBox();  // cuGraphicsUnregisterResource
};
using GraphicsResourceHandle = std::shared_ptr<const GraphicsResourceBox>;

struct GraphicsMappingBox {
  GraphicsResourceHandle resource;  // released after the unmap (a member outlives the destructor's body)
  CUstream stream = nullptr;        // where the box unmaps when it goes
  StreamHandle stream_box;          // keeps that stream alive when it is cucore's
  // True from the map until an explicit unmap: then the box has nothing left
  // to release. Changed only by the holder that unmaps (never while another
  // thread lets the last share go).
  mutable std::atomic<bool> mapped{false};
  GraphicsMappingBox() = default;
  GraphicsMappingBox(const GraphicsMappingBox&) = delete;
  GraphicsMappingBox& operator=(const GraphicsMappingBox&) = delete;
  ~GraphicsMappingBox();  // cuGraphicsUnmapResources on `stream`, if still mapped
};
using GraphicsMappingHandle = std::shared_ptr<const GraphicsMappingBox>;

// Registers in `ctx`, which must be current (with the GL context that owns
// the object); on failure the box is left empty and CudaError is thrown.
void register_gl_buffer(GraphicsResourceBox& box, unsigned int gl_buffer, unsigned int flags, ContextHandle ctx);
void register_gl_image(GraphicsResourceBox& box, unsigned int image, unsigned int target, unsigned int flags,
                       ContextHandle ctx);

// Maps `resource` on `stream` (in the resource's context); the box unmaps on
// `stream` when it goes. On failure the box is left unmapped and CudaError is
// thrown.
void map_graphics(GraphicsMappingBox& box, GraphicsResourceHandle resource, CUstream stream, StreamHandle stream_box);

// Unmaps now, on `stream` (in the resource's context). Nothing when already
// unmapped; on failure the box stays mapped and CudaError is thrown.
void unmap_graphics(const GraphicsMappingBox& box, CUstream stream);

}  // namespace cucore::detail
