"""cucore.texture: opaque and mipmapped CUDA arrays, texture and surface objects
(cuda.core.texture's names). Made by Device.create_opaque_array,
create_mipmapped_array, create_texture_object and create_surface_object;
launch passes a TextureObject or SurfaceObject as its 64-bit handle."""
from cucore._core import MipmappedArray, OpaqueArray, ResourceDescriptor, SurfaceObject, TextureObject
from cucore._options import MipmappedArrayOptions, OpaqueArrayOptions, TextureObjectOptions

__all__ = [
    "MipmappedArray",
    "MipmappedArrayOptions",
    "OpaqueArray",
    "OpaqueArrayOptions",
    "ResourceDescriptor",
    "SurfaceObject",
    "TextureObject",
    "TextureObjectOptions",
]
