#pragma once
// Boxes for textures and surfaces (handles.hpp's rules): an array box owns its
// CUarray (or, for a mip level, holds the mipmapped array's box that owns it);
// a texture or surface object's box holds what it reads, so the array outlives
// every object made over it.
#include <cuda.h>

#include <cucore/texture.hpp>

#include <memory>
#include <vector>

#include "handles/handles.hpp"

namespace cucore::detail {

struct ArrayShape {
  std::vector<std::size_t> shape;
  texture::ArrayFormat format = texture::ArrayFormat::float32;
  unsigned num_channels = 1;
  bool surface_load_store = false;
  int device = -1;
};

struct MipmappedArrayBox {
  CUmipmappedArray array = nullptr;
  ContextHandle ctx;
  ArrayShape info;
  unsigned num_levels = 0;
  MipmappedArrayBox() = default;
  MipmappedArrayBox(const MipmappedArrayBox&) = delete;
  MipmappedArrayBox& operator=(const MipmappedArrayBox&) = delete;
  ~MipmappedArrayBox();  // cuMipmappedArrayDestroy
};

struct ArrayBox {
  CUarray array = nullptr;
  ContextHandle ctx;
  ArrayShape info;
  std::shared_ptr<const MipmappedArrayBox> parent;  // a mip level: the parent owns the array
  ArrayBox() = default;
  ArrayBox(const ArrayBox&) = delete;
  ArrayBox& operator=(const ArrayBox&) = delete;
  ~ArrayBox();  // cuArrayDestroy unless a level
};

struct TexObjectBox {
  CUtexObject tex = 0;
  texture::ResourceDescriptor resource;  // keeps the array (or the linear memory's owner) alive
  texture::TextureObjectOptions options;
  int device = -1;
  TexObjectBox() = default;
  TexObjectBox(const TexObjectBox&) = delete;
  TexObjectBox& operator=(const TexObjectBox&) = delete;
  ~TexObjectBox();  // cuTexObjectDestroy
};

struct SurfObjectBox {
  CUsurfObject surf = 0;
  texture::ResourceDescriptor resource;
  int device = -1;
  SurfObjectBox() = default;
  SurfObjectBox(const SurfObjectBox&) = delete;
  SurfObjectBox& operator=(const SurfObjectBox&) = delete;
  ~SurfObjectBox();  // cuSurfObjectDestroy
};

// Each made in the current context (the caller's ScopedContext); the box owns
// the object from the moment the driver returns it.
std::shared_ptr<const ArrayBox> create_array(const CUDA_ARRAY3D_DESCRIPTOR& desc, ArrayShape info,
                                             ContextHandle ctx);
std::shared_ptr<const MipmappedArrayBox> create_mipmapped_array(const CUDA_ARRAY3D_DESCRIPTOR& desc,
                                                                ArrayShape info, unsigned levels, ContextHandle ctx);
std::shared_ptr<const ArrayBox> mipmap_level(const std::shared_ptr<const MipmappedArrayBox>& mipmap, unsigned level);
std::shared_ptr<const TexObjectBox> create_texture_object(texture::ResourceDescriptor resource,
                                                          const texture::TextureObjectOptions& options, int device);
std::shared_ptr<const SurfObjectBox> create_surface_object(texture::ResourceDescriptor resource, int device);

}  // namespace cucore::detail
