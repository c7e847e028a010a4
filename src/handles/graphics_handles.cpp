#include "handles/graphics_handles.hpp"

#include <cucore/errors.hpp>

#include "errors/release.hpp"
#include "handles/in_context.hpp"
#include "loader/driver.hpp"

namespace cucore::detail {

namespace {

const DriverTable* loaded() noexcept { return g_driver.load(std::memory_order_acquire); }

CUcontext context_of(const GraphicsResourceBox& box) noexcept { return box.ctx ? box.ctx->ctx : nullptr; }

CUresult unmap_now(const DriverTable& t, const GraphicsResourceBox& res, CUstream stream) noexcept {
  if (!t.cuGraphicsUnmapResources) return CUDA_ERROR_NOT_SUPPORTED;
  CUgraphicsResource r = res.resource;
  return in_context(t, context_of(res), [&] { return t.cuGraphicsUnmapResources(1, &r, stream); });
}

}  // namespace

GraphicsResourceBox::~GraphicsResourceBox() {
  if (!resource) return;
  if (const auto* t = loaded(); t && t->cuGraphicsUnregisterResource)
    report_release(in_context(*t, context_of(*this), [&] { return t->cuGraphicsUnregisterResource(resource); }),
                   "cuGraphicsUnregisterResource");
}

GraphicsMappingBox::~GraphicsMappingBox() {
  if (!resource || !mapped.load(std::memory_order_acquire)) return;
  if (const auto* t = loaded()) report_release(unmap_now(*t, *resource, stream), "cuGraphicsUnmapResources");
}

void register_gl_buffer(GraphicsResourceBox& box, unsigned int gl_buffer, unsigned int flags, ContextHandle ctx) {
  const DriverTable& d = driver();
  require(reinterpret_cast<const void*>(d.cuGraphicsGLRegisterBuffer), 3000, "OpenGL interop (cuGraphicsGLRegisterBuffer)");
  CUgraphicsResource r = nullptr;
  check(d.cuGraphicsGLRegisterBuffer(&r, gl_buffer, flags), "cuGraphicsGLRegisterBuffer");
  box.ctx = std::move(ctx);
  box.resource = r;
}

void register_gl_image(GraphicsResourceBox& box, unsigned int image, unsigned int target, unsigned int flags,
                       ContextHandle ctx) {
  const DriverTable& d = driver();
  require(reinterpret_cast<const void*>(d.cuGraphicsGLRegisterImage), 3000, "OpenGL interop (cuGraphicsGLRegisterImage)");
  CUgraphicsResource r = nullptr;
  check(d.cuGraphicsGLRegisterImage(&r, image, target, flags), "cuGraphicsGLRegisterImage");
  box.ctx = std::move(ctx);
  box.resource = r;
}

void map_graphics(GraphicsMappingBox& box, GraphicsResourceHandle resource, CUstream stream, StreamHandle stream_box) {
  const DriverTable& d = driver();
  require(reinterpret_cast<const void*>(d.cuGraphicsMapResources), 3000, "graphics interop (cuGraphicsMapResources)");
  CUgraphicsResource r = resource->resource;
  check(in_context(d, context_of(*resource), [&] { return d.cuGraphicsMapResources(1, &r, stream); }),
        "cuGraphicsMapResources");
  box.resource = std::move(resource);
  box.stream = stream;
  box.stream_box = std::move(stream_box);
  box.mapped.store(true, std::memory_order_release);  // the box unmaps from here on
}

void unmap_graphics(const GraphicsMappingBox& box, CUstream stream) {
  if (!box.resource || !box.mapped.load(std::memory_order_acquire)) return;
  check(unmap_now(driver(), *box.resource, stream), "cuGraphicsUnmapResources");
  box.mapped.store(false, std::memory_order_release);
}

}  // namespace cucore::detail
