#pragma once
// Shared pieces of the nanobind layer over libcucore. The layer converts
// Python arguments to cucore's C++ types, calls libcucore, and wraps the
// results; lifetimes and layouts are libcucore's (a Python object's owner
// rides in the C++ object, a StridedMemoryView is libcucore's). What lives
// here is Python's side of things: reading the protocols' Python objects
// (DLPack capsules, array interface dicts, __cuda_stream__), fast C entry
// points for the hot interop calls, faces and their identity, and
// translating errors to the types cuda.core raises.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cucore/buffer.hpp>
#include <cucore/context.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/event.hpp>
#include <cucore/memory.hpp>
#include <cucore/stream.hpp>
#include <cucore/strided_memory_view.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace nb = nanobind;

namespace cucore::python {

// ---- foreign owners ----------------------------------------------------------
// The classes bound here hold libcucore's values: what a Python object must
// keep alive (a PyTorch stream behind a Stream, the owner of a Buffer's
// memory, the object an exported DLPack tensor came from) rides in the C++
// object's owner hook, whose release takes the GIL before the decref.

// Whether Python objects may still be touched from C++ (the interpreter is up
// and not finalizing); releases from C++ destructors check it first.
bool python_alive() noexcept;

// Drops a strong reference from any thread (taking the GIL first); nothing
// once the interpreter is going away.
void release_py_object(PyObject* obj) noexcept;

// A share that keeps `obj` alive (empty for None).
std::shared_ptr<const void> py_owner(nb::handle obj);
// A strong reference to `obj` for an exported DLPack tensor (no allocation),
// dropped by the tensor's deleter with the GIL taken.
cucore::ForeignRef py_ref(nb::handle obj);
// The Python object behind an owner made by py_owner, else null (borrowed).
PyObject* py_owner_object(const std::shared_ptr<const void>& owner) noexcept;

// cucore.Device: a per-thread singleton per GPU.
struct PyDevice {
  cucore::Device dev;
  nb::object mr;     // memory_resource (lazily the device's default pool)
  nb::object cc;     // ComputeCapability namedtuple, cached
  nb::object props;  // DeviceProperties, cached
};

// Python type objects, for fast exact type checks on hot paths.
struct Types {
  PyTypeObject* device = nullptr;
  PyTypeObject* stream = nullptr;
  PyTypeObject* event = nullptr;
  PyTypeObject* buffer = nullptr;
  PyTypeObject* memory_resource = nullptr;
  PyTypeObject* kernel = nullptr;
  PyTypeObject* launch_config = nullptr;
  PyTypeObject* object_code = nullptr;
  PyTypeObject* view = nullptr;
  PyTypeObject* graph_builder = nullptr;    // set by graph.cpp
  PyTypeObject* graph_condition = nullptr;  // set by graph.cpp
  PyTypeObject* texture_object = nullptr;   // set by texture.cpp
  PyTypeObject* surface_object = nullptr;   // set by texture.cpp
  PyTypeObject* tensor_map = nullptr;
};
extern Types g_types;

// ---- errors ------------------------------------------------------------------

// Sets the Python error for the C++ exception being handled (call inside a
// catch block); used by raw C-API entry points that bypass nanobind's dispatch.
void set_error_from_current_exception() noexcept;
[[noreturn]] void raise_type_error(const std::string& msg);
[[noreturn]] void raise_value_error(const std::string& msg);
[[noreturn]] void raise_overflow_error(const std::string& msg);
// The RuntimeError cuda.core's classes raise from __init__ when they are made
// only by factories ("X cannot be instantiated directly. Use ...").
[[noreturn]] void refuse_init(const char* message);
// cucore.CUDAError (cuda.core's CUDAError) with `msg` and no CUresult.
[[noreturn]] void raise_cuda_error(const std::string& msg);
// cucore.CUDAWarning (borrowed; made by bind_errors): what release failures become.
PyObject* cuda_warning_class() noexcept;
// An attribute of cucore.system.exceptions (imported on first use): NVML's exception classes.
nb::object system_exceptions_attr(const char* name);

// ---- arguments ---------------------------------------------------------------
// Python values as C++ ones, each error naming `what` (the argument, field or
// key): every conversion a caller can get wrong goes through these, so none
// ends in nanobind's cast error (a RuntimeError "std::bad_cast").

// A str as UTF-8: TypeError for a non-str, UnicodeEncodeError (a ValueError)
// for one UTF-8 cannot encode (a lone surrogate), as str.encode() raises.
std::string utf8_arg(nb::handle v, const std::string& what);
// A str or os.PathLike as a filesystem path, encoded as os.fsencode does (so a
// name the filesystem gave back, undecodable bytes and all, is that name).
std::string fs_path_arg(nb::handle v, const std::string& what);
// An int (or an object with __index__; not a bool): TypeError otherwise,
// OverflowError when it does not fit.
std::int64_t int64_arg(nb::handle v, const std::string& what);
std::uint64_t uint64_arg(nb::handle v, const std::string& what);
int int_arg(nb::handle v, const std::string& what);
// repr(v) as text (for messages).
std::string repr_text(nb::handle v);

// ---- streams -----------------------------------------------------------------

// A stream argument: a cucore.Stream, or any object with __cuda_stream__
// (PyTorch, CuPy, cuda.core streams). TypeError otherwise, naming `what`.
cucore::StreamRef stream_arg(nb::handle obj, const char* what = "stream");
// None gives the default stream (legacy, or per-thread when
// CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM is set, as cuda.core).
cucore::StreamRef stream_arg_or_default(nb::handle obj, const char* what = "stream");

// A stream argument as the cucore::Stream it is, for what keeps a share of it
// (a Buffer freed on it): a cucore.Stream's own, the default stream's (None),
// or a foreign object's stream adopted with the object as its owner.
class StreamArg {
 public:
  StreamArg(nb::handle obj, const char* what = "stream");
  const cucore::Stream& get() const noexcept { return *stream_; }

 private:
  std::optional<cucore::Stream> adopted_;
  const cucore::Stream* stream_ = nullptr;
};

nb::object default_stream_object();
cucore::StreamRef default_stream_ref() noexcept;  // the same, usable without the GIL
nb::object wrap_foreign_stream(nb::handle obj);  // Stream(obj) via __cuda_stream__

// ---- options (Python dataclasses in cucore._options) ------------------------

// The options object: None -> default instance of the dataclass, a dict ->
// dataclass(**dict), an instance -> itself; anything else is TypeError.
nb::object options_arg(nb::handle options, const char* cls_name);
std::optional<bool> opt_bool(nb::handle o, const char* name);
std::optional<long long> opt_int(nb::handle o, const char* name);
std::string opt_str(nb::handle o, const char* name);
nb::module_& options_module();

// Reads the options object's attribute `name` into `field` by the field's C++
// type (None keeps the default): the conversion the option table's field
// lists (option_fields.inc) expand to.
void read_option(bool& field, nb::handle o, const char* name);
void read_option(std::size_t& field, nb::handle o, const char* name);
void read_option(std::optional<int>& field, nb::handle o, const char* name);
void read_option(std::string& field, nb::handle o, const char* name);

cucore::StreamOptions stream_options(nb::handle options);
cucore::EventOptions event_options(nb::handle options);

// ---- wrappers -----------------------------------------------------------------

nb::object device_object(int ordinal);  // the per-thread singleton
nb::object wrap_context(const cucore::Context& ctx);
// The Python face of a memory resource: the object a Buffer was allocated
// from while that lives (buffer.memory_resource is mr), else a new one.
nb::object memory_resource_face(const cucore::MemoryResource& mr);
void register_memory_resource_face(nb::handle face);
// An instance of one of cucore's resource classes (not a Python subclass):
// allocating from it needs no Python call.
bool is_native_resource(nb::handle mr);
// Marks a resource class bound elsewhere as one of cucore's own.
void register_native_resource_type(nb::handle type);

// Integer from a pointer-like argument (int, or an object with __int__ /
// __index__, e.g. cuda.bindings' CUdeviceptr).
std::uintptr_t pointer_arg(nb::handle obj, const char* what);
// ---- handles as cuda.core gives and takes them -------------------------------
// cuda.core's .handle is a cuda.bindings object (cuda.bindings.driver.CUstream,
// ...; code mixing cuda.core and cuda.bindings compares them by value, and
// int() of one is the driver's handle). cucore returns those where cuda.bindings
// imports, else the int: cucore does not need cuda.bindings.
enum class HandleKind : int {
  context,            // cuda.bindings.driver.CUcontext
  stream,             // CUstream
  event,              // CUevent
  kernel,             // CUkernel
  library,            // CUlibrary
  module,             // CUmodule (ObjectCode.get_module)
  memory_pool,        // CUmemoryPool
  graph,              // CUgraph
  graph_exec,         // CUgraphExec
  graph_node,         // CUgraphNode
  graph_conditional,  // CUgraphConditionalHandle (taken as a kernel argument, never returned)
  link_state,         // CUlinkState (the driver's linker)
  graph_node_type,    // the enum CUgraphNodeType (GraphNode.type), made the same way from an int
  nvrtc_program,      // cuda.bindings.nvrtc.nvrtcProgram
  count
};
// `value` as cuda.core returns a handle of `kind`: the cuda.bindings object,
// or the int where cuda.bindings does not import. The module is imported on
// the first call and its classes kept (a failed import is not retried), so a
// call costs one object construction.
nb::object bindings_handle(HandleKind kind, std::uintptr_t value);
inline nb::object bindings_handle(HandleKind kind, const void* p) {
  return bindings_handle(kind, reinterpret_cast<std::uintptr_t>(p));
}
// Whether `obj` is the cuda.bindings class of `kind` (read from its type's
// name: no import).
bool is_bindings_handle(nb::handle obj, HandleKind kind) noexcept;
// A handle argument of `kind`: an int (or an object with __index__) or the
// cuda.bindings object of that kind; TypeError naming `what` otherwise.
std::uintptr_t handle_arg(nb::handle obj, HandleKind kind, const char* what);

// ---- binders -----------------------------------------------------------------
void bind_errors(nb::module_& m);
void bind_device(nb::module_& m);
void bind_stream(nb::module_& m);
void bind_memory(nb::module_& m);
void bind_program(nb::module_& m);
void bind_launch(nb::module_& m);
void bind_view(nb::module_& m);
void bind_layout(nb::module_& m);      // layout.cpp: _StridedLayout's arithmetic
void bind_tensor_map(nb::module_& m);
void bind_cache(nb::module_& m);
void bind_misc(nb::module_& m);
void bind_memory_ops(nb::module_& m);  // memory_ops.cpp
void bind_texture(nb::module_& m);     // texture.cpp
// Device.create_opaque_array and friends (texture.cpp).
nb::object create_opaque_array(const cucore::Device& dev, nb::handle options);
nb::object create_mipmapped_array(const cucore::Device& dev, nb::handle options);
nb::object create_texture_object(const cucore::Device& dev, nb::handle resource, nb::handle options);
nb::object create_surface_object(const cucore::Device& dev, nb::handle resource);

}  // namespace cucore::python
