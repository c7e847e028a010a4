#pragma once
// Boxes for textures and surfaces (handles.hpp's rules): an array box owns its
// CUarray (or, for a mip level, holds the mipmapped array's box that owns it;
// for an array it only borrows, such as a mapped graphics image's, holds what
// keeps that array: the mapping);
// a texture or surface object's box holds what it reads, so the array
// outlives every object made over it.
//
// The boxes hold driver facts only. texture/ keeps its own facts (shapes,
// formats, options, the resource a view was made from) in states derived
// from these boxes and made by it; each make_* below gives the box its native
// object, which the box owns from the moment the driver returns it.
#include <cuda.h>

#include <memory>

#include "handles/handles.hpp"

namespace cucore::detail {

struct MipmappedArrayBox {
  CUmipmappedArray array = nullptr;
  ContextHandle ctx;
  MipmappedArrayBox() = default;
  MipmappedArrayBox(const MipmappedArrayBox&) = delete;
  MipmappedArrayBox& operator=(const MipmappedArrayBox&) = delete;
  ~MipmappedArrayBox();  // cuMipmappedArrayDestroy
};

struct ArrayBox {
  CUarray array = nullptr;
  ContextHandle ctx;
  std::shared_ptr<const MipmappedArrayBox> parent;  // a mip level: the parent owns the array
  Owner keeps;  // a borrowed array (a mapped graphics image): what keeps it valid owns it
  ArrayBox() = default;
  ArrayBox(const ArrayBox&) = delete;
  ArrayBox& operator=(const ArrayBox&) = delete;
  ~ArrayBox();  // cuArrayDestroy unless a level or borrowed
};

// The driver destroys a texture or surface object only in its context: the
// box holds that context and makes it current for the destroy.
struct TexObjectBox {
  CUtexObject tex = 0;
  ContextHandle ctx;
  Owner reads;  // what it reads (released after the object: a member outlives the destructor's body)
  TexObjectBox() = default;
  TexObjectBox(const TexObjectBox&) = delete;
  TexObjectBox& operator=(const TexObjectBox&) = delete;
  ~TexObjectBox();  // cuTexObjectDestroy
};

struct SurfObjectBox {
  CUsurfObject surf = 0;
  ContextHandle ctx;
  Owner reads;
  SurfObjectBox() = default;
  SurfObjectBox(const SurfObjectBox&) = delete;
  SurfObjectBox& operator=(const SurfObjectBox&) = delete;
  ~SurfObjectBox();  // cuSurfObjectDestroy
};

// Each in the current context (the caller's ScopedContext); on failure the
// box is left empty and throws CudaError.
void make_array(ArrayBox& box, const CUDA_ARRAY3D_DESCRIPTOR& desc, ContextHandle ctx);
void make_mipmapped_array(MipmappedArrayBox& box, const CUDA_ARRAY3D_DESCRIPTOR& desc, unsigned levels,
                          ContextHandle ctx);
void make_mipmap_level(ArrayBox& box, std::shared_ptr<const MipmappedArrayBox> mipmap, unsigned level);
// An array cucore does not own (never destroyed by the box): `keeps` is held
// as long as the box, and must keep `array` valid (a graphics mapping).
void borrow_array(ArrayBox& box, CUarray array, ContextHandle ctx, Owner keeps) noexcept;
void make_texture_object(TexObjectBox& box, const CUDA_RESOURCE_DESC& resource, const CUDA_TEXTURE_DESC& texture,
                         Owner reads, ContextHandle ctx);
void make_surface_object(SurfObjectBox& box, const CUDA_RESOURCE_DESC& resource, Owner reads, ContextHandle ctx);

}  // namespace cucore::detail
