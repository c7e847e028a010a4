#include "handles/texture_handles.hpp"

#include <cucore/errors.hpp>

#include "errors/release.hpp"
#include "handles/in_context.hpp"
#include "loader/driver.hpp"

namespace cucore::detail {

namespace {
const DriverTable* loaded() noexcept { return g_driver.load(std::memory_order_acquire); }
}  // namespace

MipmappedArrayBox::~MipmappedArrayBox() {
  if (array)
    if (const auto* t = loaded()) report_release(t->cuMipmappedArrayDestroy(array), "cuMipmappedArrayDestroy");
}

ArrayBox::~ArrayBox() {
  if (array && !parent && !keeps)
    if (const auto* t = loaded()) report_release(t->cuArrayDestroy(array), "cuArrayDestroy");
}

TexObjectBox::~TexObjectBox() {
  if (tex)
    if (const auto* t = loaded())
      report_release(in_context(*t, ctx ? ctx->ctx : nullptr, [&] { return t->cuTexObjectDestroy(tex); }),
                     "cuTexObjectDestroy");
}

SurfObjectBox::~SurfObjectBox() {
  if (surf)
    if (const auto* t = loaded())
      report_release(in_context(*t, ctx ? ctx->ctx : nullptr, [&] { return t->cuSurfObjectDestroy(surf); }),
                     "cuSurfObjectDestroy");
}

void make_array(ArrayBox& box, const CUDA_ARRAY3D_DESCRIPTOR& desc, ContextHandle ctx) {
  CUarray a = nullptr;
  check(driver().cuArray3DCreate(&a, &desc), "cuArray3DCreate");
  box.array = a;
  box.ctx = std::move(ctx);
}

void make_mipmapped_array(MipmappedArrayBox& box, const CUDA_ARRAY3D_DESCRIPTOR& desc, unsigned levels,
                          ContextHandle ctx) {
  CUmipmappedArray a = nullptr;
  check(driver().cuMipmappedArrayCreate(&a, &desc, levels), "cuMipmappedArrayCreate");
  box.array = a;
  box.ctx = std::move(ctx);
}

void make_mipmap_level(ArrayBox& box, std::shared_ptr<const MipmappedArrayBox> mipmap, unsigned level) {
  CUarray a = nullptr;
  check(driver().cuMipmappedArrayGetLevel(&a, mipmap->array, level), "cuMipmappedArrayGetLevel");
  box.ctx = mipmap->ctx;
  box.parent = std::move(mipmap);  // first: a level's array is never destroyed by its box
  box.array = a;
}

void borrow_array(ArrayBox& box, CUarray array, ContextHandle ctx, Owner keeps) noexcept {
  box.keeps = std::move(keeps);  // first: a borrowed array is never destroyed by its box
  box.ctx = std::move(ctx);
  box.array = array;
}

void make_texture_object(TexObjectBox& box, const CUDA_RESOURCE_DESC& resource, const CUDA_TEXTURE_DESC& texture,
                         Owner reads, ContextHandle ctx) {
  CUtexObject h = 0;
  check(driver().cuTexObjectCreate(&h, &resource, &texture, nullptr), "cuTexObjectCreate");
  box.ctx = std::move(ctx);
  box.tex = h;
  box.reads = std::move(reads);
}

void make_surface_object(SurfObjectBox& box, const CUDA_RESOURCE_DESC& resource, Owner reads, ContextHandle ctx) {
  CUsurfObject h = 0;
  check(driver().cuSurfObjectCreate(&h, &resource), "cuSurfObjectCreate");
  box.ctx = std::move(ctx);
  box.surf = h;
  box.reads = std::move(reads);
}

}  // namespace cucore::detail
