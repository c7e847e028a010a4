#pragma once
// An OpaqueArray over a CUDA array cucore did not make and does not destroy
// (a mapped graphics image's, graphics/): its shape, format and channels are
// read from the driver (cuArray3DGetDescriptor), and its box holds `keeps`,
// which must keep the array valid for as long (the mapping).
#include <cuda.h>

#include <cucore/texture.hpp>

#include "handles/handles.hpp"

namespace cucore::texture {

// The array as an OpaqueArray of `device` in `ctx`, which must be current.
// A format OpaqueArray does not describe (ArrayFormat) is std::invalid_argument
// naming it; a driver refusal CudaError.
OpaqueArray borrow_array(CUarray array, int device, detail::ContextHandle ctx, detail::Owner keeps,
                         const char* operation);

}  // namespace cucore::texture
