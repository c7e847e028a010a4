// cucore.GraphicsResource: OpenGL buffers and images registered with CUDA, as
// cuda.core's GraphicsResource (include/cucore/graphics.hpp). The mapped
// Buffer (or, for an image, the mapped OpaqueArray) is libcucore's object,
// shared with the resource, so closing either face unmaps and both see it; the
// binding keeps only the stream given to from_gl_buffer for `with`.
#include <nanobind/stl/shared_ptr.h>

#include <cucore/graphics.hpp>
#include <cucore/texture.hpp>

#include <cstdio>
#include <string>

#include "common.hpp"

namespace cucore::python {

namespace {

using cucore::GraphicsRegisterFlags;
using cucore::GraphicsResource;

// The Python face: the resource, and the stream from_gl_buffer(stream=) gave,
// which `with resource:` maps on.
struct PyGraphicsResource {
  GraphicsResource res;
  nb::object enter_stream;
};

// cuda.core's flags argument: None, a str, or an iterable of str; another name
// is ValueError naming it (repr) and the valid ones; a non-iterable is
// TypeError, as iterating it raises.
unsigned register_flags(nb::handle flags) {
  if (flags.is_none()) return 0;
  nb::object items = PyUnicode_Check(flags.ptr()) ? nb::object(nb::make_tuple(flags)) : nb::borrow(flags);
  nb::object it = nb::steal(PyObject_GetIter(items.ptr()));
  if (!it) throw nb::python_error();
  unsigned result = 0;
  while (PyObject* raw = PyIter_Next(it.ptr())) {
    nb::object f = nb::steal(raw);
    if (PyUnicode_Check(f.ptr())) {
      try {
        result |= static_cast<unsigned>(cucore::parse_graphics_register_flag(nb::cast<std::string>(f)));
        continue;
      } catch (const std::invalid_argument&) {
        // the message below, with Python's repr of the name
      }
    } else if (PyObject_Hash(f.ptr()) == -1) {
      throw nb::python_error();  // an unhashable flag: TypeError, as a dict lookup of it raises
    }
    raise_value_error("Unknown register flag " + repr_text(f) + ". Valid flags: " +
                      cucore::graphics_register_flag_names());
  }
  if (PyErr_Occurred()) throw nb::python_error();
  return result;
}

// A GL name or target: an int that fits 32 bits (a negative C int wraps, as
// cuda.core's cast to GLuint does).
std::uint32_t gl_uint(nb::handle v, const char* what) {
  const std::int64_t x = int64_arg(v, what);
  if (x < INT32_MIN || x > static_cast<std::int64_t>(UINT32_MAX))
    raise_overflow_error(std::string(what) + " must fit a 32-bit GL name or enum, got " + std::to_string(x));
  return static_cast<std::uint32_t>(x);
}

// The mapped object, as libcucore shares it: one Python object per mapping.
nb::object mapped_object(const GraphicsResource& r) {
  if (r.kind() == GraphicsResource::Kind::image) return nb::cast(r.mapped_image());
  return nb::cast(r.mapped_buffer());
}

nb::object map_on(PyGraphicsResource& self, nb::handle stream) {
  StreamArg s(stream);
  {
    nb::gil_scoped_release release;
    if (!self.res.is_closed() && self.res.kind() == GraphicsResource::Kind::image) self.res.map_array(s.get());
    else self.res.map(s.get());
  }
  return mapped_object(self.res);
}

std::string hex(std::uintptr_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

void bind_graphics(nb::module_& m) {
  nb::class_<PyGraphicsResource>(m, "GraphicsResource",
      "An OpenGL buffer or image registered for access by CUDA (cuda.core's GraphicsResource). Made by "
      "GraphicsResource.from_gl_buffer / from_gl_image with the GL context current; map(stream=) gives the mapped "
      "Buffer (an image: its mapped OpaqueArray), whose close() unmaps; close() unregisters. A context manager.",
      nb::is_weak_referenceable())
      .def("__init__", [](PyGraphicsResource*, nb::args, nb::kwargs) {
        refuse_init("GraphicsResource objects cannot be instantiated directly. Use GraphicsResource.from_gl_buffer() "
                    "or GraphicsResource.from_gl_image().");
      })
      .def_static("from_gl_buffer", [](nb::handle gl_buffer, nb::handle flags, nb::handle stream) {
        const std::uint32_t name = gl_uint(gl_buffer, "gl_buffer");
        const auto f = static_cast<GraphicsRegisterFlags>(register_flags(flags));
        PyGraphicsResource r;
        {
          nb::gil_scoped_release release;
          r.res = GraphicsResource::from_gl_buffer(name, f);
        }
        r.enter_stream = nb::borrow(stream);
        return r;
      }, nb::arg("gl_buffer"), nb::kw_only(), nb::arg("flags") = nb::none(), nb::arg("stream") = nb::none(),
         nb::sig("def from_gl_buffer(gl_buffer: int, *, flags: str | tuple[str, ...] | list[str] | None = None, "
                 "stream: Stream | None = None) -> GraphicsResource"),
         "Registers the OpenGL buffer object `gl_buffer` (a GLuint) in the current CUDA context. flags: 'none', "
         "'read_only', 'write_discard', 'surface_load_store', 'texture_gather', or a sequence of them. With "
         "`stream`, `with GraphicsResource.from_gl_buffer(vbo, stream=s) as buf:` maps on entry and gives the "
         "Buffer; without, `with` gives the resource; either way the resource is closed on exit.")
      .def_static("from_gl_image", [](nb::handle image, nb::handle target, nb::handle flags) {
        const std::uint32_t name = gl_uint(image, "image");
        const std::uint32_t tgt = gl_uint(target, "target");
        const auto f = static_cast<GraphicsRegisterFlags>(register_flags(flags));
        PyGraphicsResource r;
        {
          nb::gil_scoped_release release;
          r.res = GraphicsResource::from_gl_image(name, tgt, f);
        }
        return r;
      }, nb::arg("image"), nb::arg("target"), nb::kw_only(), nb::arg("flags") = nb::none(),
         nb::sig("def from_gl_image(image: int, target: int, *, flags: str | tuple[str, ...] | list[str] | None = "
                 "None) -> GraphicsResource"),
         "Registers the OpenGL texture or renderbuffer `image` (a GLuint) of GL target `target` (GL_TEXTURE_2D, "
         "GL_RENDERBUFFER, ...) in the current CUDA context; flags as from_gl_buffer's.")
      .def("map", [](PyGraphicsResource& self, nb::args args, nb::kwargs kwargs) {
        // cuda.core's map(self, *, stream): keyword-only and required, with Python's messages.
        if (args.size() != 0)
          raise_type_error("GraphicsResource.map() takes 1 positional argument but " +
                           std::to_string(args.size() + 1) + " were given");
        nb::handle stream;
        for (auto [k, v] : kwargs) {
          if (nb::cast<std::string>(nb::str(k)) != "stream")
            raise_type_error("GraphicsResource.map() got an unexpected keyword argument '" +
                             nb::cast<std::string>(nb::str(k)) + "'");
          stream = v;
        }
        if (!stream.is_valid())
          raise_type_error("GraphicsResource.map() missing 1 required keyword-only argument: 'stream'");
        return map_on(self, stream);
      }, nb::sig("def map(self, *, stream: Stream) -> Buffer | cucore.texture.OpaqueArray"),
         "Maps the resource on `stream` (required, keyword-only) and gives the mapped Buffer, whose close() (or "
         "`with`'s exit, or unmap()) unmaps; an image resource gives its mapped OpaqueArray (layer 0, level 0: a "
         "cucore extra). RuntimeError if already mapped or closed; CUDAError where the driver refuses.")
      .def("unmap", [](PyGraphicsResource& self, nb::handle stream) {
        if (stream.is_none()) {
          nb::gil_scoped_release release;
          self.res.unmap();
        } else {
          StreamRef s = stream_arg(stream);
          nb::gil_scoped_release release;
          self.res.unmap(s);
        }
      }, nb::kw_only(), nb::arg("stream") = nb::none(),
         "Unmaps (closes the mapped Buffer) on `stream`, else on the stream it was mapped on. RuntimeError if not "
         "mapped or closed.")
      .def("close", [](PyGraphicsResource& self, nb::handle stream) {
        if (stream.is_none()) {
          nb::gil_scoped_release release;
          self.res.close();
        } else {
          StreamRef s = stream_arg(stream);
          nb::gil_scoped_release release;
          self.res.close(s);
        }
        self.enter_stream = nb::none();
      }, nb::arg("stream") = nb::none(),
         "Unmaps first if mapped (on `stream`, else the mapping's), then unregisters. Idempotent.")
      .def("mapped_array", [](const PyGraphicsResource& self, unsigned array_index, unsigned mip_level) {
        return self.res.mapped_array(array_index, mip_level);
      }, nb::arg("array_index") = 0, nb::arg("mip_level") = 0,
         "cucore extra: layer `array_index`, level `mip_level` of the mapped image as an OpaqueArray, which keeps "
         "the mapping while it lives. RuntimeError if not mapped.")
      .def("set_map_flags", [](PyGraphicsResource& self, const std::string& flags) {
        self.res.set_map_flags(cucore::parse_graphics_map_flag(flags));
      }, nb::arg("flags"),
         "cucore extra: how the next mappings will be accessed, 'none', 'read_only' or 'write_discard' "
         "(cuGraphicsResourceSetMapFlags); the driver refuses while mapped.")
      .def("__enter__", [](nb::handle self) -> nb::object {
        auto& r = *nb::inst_ptr<PyGraphicsResource>(self);
        if (r.enter_stream.is_valid() && !r.enter_stream.is_none()) return map_on(r, r.enter_stream);
        return nb::borrow(self);
      })
      .def("__exit__", [](PyGraphicsResource& self, nb::args) {
        {
          nb::gil_scoped_release release;
          self.res.close();
        }
        self.enter_stream = nb::none();
        return false;
      })
      .def_prop_ro("is_mapped", [](const PyGraphicsResource& self) { return self.res.is_mapped(); },
                   "Whether the resource is mapped (its mapped Buffer or array is open).")
      .def_prop_ro("is_closed", [](const PyGraphicsResource& self) { return self.res.is_closed(); },
                   "Whether the resource has been closed.")
      .def_prop_ro("handle", [](const PyGraphicsResource& self) {
        return reinterpret_cast<std::uintptr_t>(self.res.handle());
      }, "The CUgraphicsResource as an int (0 once closed).")
      .def_prop_ro("resource_handle", [](const PyGraphicsResource& self) {
        return reinterpret_cast<std::uintptr_t>(self.res.handle());
      }, "Alias for handle.")
      .def("__repr__", [](const PyGraphicsResource& self) {
        return "<GraphicsResource handle=" + hex(reinterpret_cast<std::uintptr_t>(self.res.handle())) +
               (self.res.is_mapped() ? " mapped" : "") + (self.res.is_closed() ? " closed" : "") + ">";
      });
}

}  // namespace cucore::python
