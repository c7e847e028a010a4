#include "handles/texture_handles.hpp"

#include <cucore/errors.hpp>

#include "loader/driver.hpp"

namespace cucore::detail {

namespace {
const DriverTable* loaded() noexcept { return g_driver.load(std::memory_order_acquire); }
}  // namespace

MipmappedArrayBox::~MipmappedArrayBox() {
  if (array)
    if (const auto* t = loaded()) t->cuMipmappedArrayDestroy(array);
}

ArrayBox::~ArrayBox() {
  if (array && !parent)
    if (const auto* t = loaded()) t->cuArrayDestroy(array);
}

TexObjectBox::~TexObjectBox() {
  if (tex)
    if (const auto* t = loaded()) t->cuTexObjectDestroy(tex);
}

SurfObjectBox::~SurfObjectBox() {
  if (surf)
    if (const auto* t = loaded()) t->cuSurfObjectDestroy(surf);
}

std::shared_ptr<const ArrayBox> create_array(const CUDA_ARRAY3D_DESCRIPTOR& desc, ArrayShape info,
                                             ContextHandle ctx) {
  auto box = std::make_shared<ArrayBox>();  // first: should it fail, no array is left behind
  box->ctx = std::move(ctx);
  box->info = std::move(info);
  CUarray a = nullptr;
  check(driver().cuArray3DCreate(&a, &desc), "cuArray3DCreate");
  box->array = a;
  return box;
}

std::shared_ptr<const MipmappedArrayBox> create_mipmapped_array(const CUDA_ARRAY3D_DESCRIPTOR& desc,
                                                                ArrayShape info, unsigned levels, ContextHandle ctx) {
  auto box = std::make_shared<MipmappedArrayBox>();
  box->ctx = std::move(ctx);
  box->info = std::move(info);
  box->num_levels = levels;
  CUmipmappedArray a = nullptr;
  check(driver().cuMipmappedArrayCreate(&a, &desc, levels), "cuMipmappedArrayCreate");
  box->array = a;
  return box;
}

std::shared_ptr<const ArrayBox> mipmap_level(const std::shared_ptr<const MipmappedArrayBox>& mipmap, unsigned level) {
  auto box = std::make_shared<ArrayBox>();
  box->ctx = mipmap->ctx;
  box->info = mipmap->info;
  for (std::size_t& extent : box->info.shape) extent = std::max<std::size_t>(1, extent >> level);
  box->parent = mipmap;
  CUarray a = nullptr;
  check(driver().cuMipmappedArrayGetLevel(&a, mipmap->array, level), "cuMipmappedArrayGetLevel");
  box->array = a;
  return box;
}

std::shared_ptr<const TexObjectBox> create_texture_object(texture::ResourceDescriptor resource,
                                                          const texture::TextureObjectOptions& options, int device) {
  auto box = std::make_shared<TexObjectBox>();
  box->resource = std::move(resource);
  box->options = options;
  box->device = device;
  const CUDA_RESOURCE_DESC res = box->resource.to_driver();
  CUDA_TEXTURE_DESC tex{};
  for (int i = 0; i < 3; ++i) {
    static constexpr CUaddress_mode modes[] = {CU_TR_ADDRESS_MODE_WRAP, CU_TR_ADDRESS_MODE_CLAMP,
                                              CU_TR_ADDRESS_MODE_MIRROR, CU_TR_ADDRESS_MODE_BORDER};
    tex.addressMode[i] = modes[static_cast<int>(options.address_mode[static_cast<std::size_t>(i)])];
  }
  tex.filterMode = options.filter_mode == texture::FilterMode::linear ? CU_TR_FILTER_MODE_LINEAR : CU_TR_FILTER_MODE_POINT;
  tex.flags = 0;
  // Element-type reads of an integer format return integers; float formats
  // are read as floats either way (and filter only so).
  const auto fmt = box->resource.element_format();
  if (options.read_mode == texture::ReadMode::element_type && fmt != texture::ArrayFormat::float16 &&
      fmt != texture::ArrayFormat::float32)
    tex.flags |= CU_TRSF_READ_AS_INTEGER;
  if (options.normalized_coords) tex.flags |= CU_TRSF_NORMALIZED_COORDINATES;
  if (options.srgb) tex.flags |= CU_TRSF_SRGB;
  if (options.disable_trilinear_optimization) tex.flags |= CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION;
  if (options.seamless_cubemap) tex.flags |= CU_TRSF_SEAMLESS_CUBEMAP;
  tex.maxAnisotropy = options.max_anisotropy;
  tex.mipmapFilterMode =
      options.mipmap_filter_mode == texture::FilterMode::linear ? CU_TR_FILTER_MODE_LINEAR : CU_TR_FILTER_MODE_POINT;
  tex.mipmapLevelBias = options.mipmap_level_bias;
  tex.minMipmapLevelClamp = options.min_mipmap_level_clamp;
  tex.maxMipmapLevelClamp = options.max_mipmap_level_clamp;
  if (options.border_color)
    for (std::size_t i = 0; i < 4; ++i) tex.borderColor[i] = (*options.border_color)[i];
  CUtexObject h = 0;
  check(driver().cuTexObjectCreate(&h, &res, &tex, nullptr), "cuTexObjectCreate");
  box->tex = h;
  return box;
}

std::shared_ptr<const SurfObjectBox> create_surface_object(texture::ResourceDescriptor resource, int device) {
  auto box = std::make_shared<SurfObjectBox>();
  box->resource = std::move(resource);
  box->device = device;
  const CUDA_RESOURCE_DESC res = box->resource.to_driver();
  CUsurfObject h = 0;
  check(driver().cuSurfObjectCreate(&h, &res), "cuSurfObjectCreate");
  box->surf = h;
  return box;
}

}  // namespace cucore::detail
