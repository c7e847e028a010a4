// cucore.checkpoint: cuda.core.checkpoint's Process over cucore::checkpoint.
#include <cucore/checkpoint.hpp>
#include <cucore/ipc.hpp>

#include <cstdint>
#include <cstring>
#include <map>
#include <string>

#include "common.hpp"

namespace cucore::python {
namespace {

using cucore::checkpoint::GpuUuid;
using cucore::checkpoint::Process;

// cuda.core's word for a driver or platform without checkpointing, so code
// that looks for it (as cuda.core's own tests do) finds it.
constexpr const char* kUnsupported = "CUDA checkpointing is not supported by the installed NVIDIA driver. ";

template <typename F>
auto call(F&& f) {
  try {
    nb::gil_scoped_release release;
    return f();
  } catch (const cucore::FeatureUnavailableError& e) {
    throw cucore::FeatureUnavailableError(kUnsupported + e.feature(), e.requirement());
  }
}

int int_arg(nb::handle v, const char* name) {
  if (PyBool_Check(v.ptr()) || !PyLong_Check(v.ptr())) raise_type_error(std::string(name) + " must be an int");
  long long x = PyLong_AsLongLong(v.ptr());
  if (x == -1 && PyErr_Occurred()) throw nb::python_error();
  if (x > INT32_MAX || x < INT32_MIN) raise_value_error(std::string(name) + " is out of range: " + std::to_string(x));
  return static_cast<int>(x);
}

// A GPU's UUID: "GPU-xxxxxxxx-...", the same without the prefix, a
// uuid.UUID, its 16 bytes, or an object with a `uuid` of those (a Device).
GpuUuid gpu_uuid_arg(nb::handle obj, bool nested = false) {
  if (PyUnicode_Check(obj.ptr())) {
    std::string s = utf8_arg(obj, "uuid");
    if (s.rfind("GPU-", 0) == 0) s = s.substr(4);
    return cucore::uuid_from_string(s);
  }
  if (PyBytes_Check(obj.ptr()) && PyBytes_Size(obj.ptr()) == 16) {
    GpuUuid u;
    std::memcpy(u.data(), PyBytes_AsString(obj.ptr()), 16);
    return u;
  }
  if (!nested && nb::hasattr(obj, "bytes")) return gpu_uuid_arg(obj.attr("bytes"), true);  // uuid.UUID
  if (!nested && nb::hasattr(obj, "uuid")) return gpu_uuid_arg(obj.attr("uuid"), true);    // a Device
  raise_type_error("gpu_mapping must map GPU UUIDs (str, uuid.UUID, 16 bytes or a Device), got " +
                   nb::cast<std::string>(nb::str(nb::handle((PyObject*)Py_TYPE(obj.ptr())).attr("__name__"))));
}

}  // namespace

void bind_checkpoint(nb::module_& m) {
  nb::module_ cp = m.def_submodule("checkpoint", "CUDA process checkpointing (Linux, CUDA driver 12.8+), as cuda.core.checkpoint.");
  nb::class_<Process>(cp, "Process", "A CUDA process that can be locked, checkpointed, restored and unlocked, by pid.")
      .def("__init__", [](Process* self, nb::handle pid) {
        int p = int_arg(pid, "pid");
        if (p <= 0) raise_value_error("pid must be a positive int");
        new (self) Process(p);
      }, nb::arg("pid").none())
      .def_prop_ro("pid", &Process::pid)
      .def_prop_ro("state", [](const Process& p) { return std::string(checkpoint::to_string(call([&] { return p.state(); }))); },
                   "'running', 'locked', 'checkpointed' or 'failed'.")
      .def_prop_ro("restore_thread_id", [](const Process& p) { return call([&] { return p.restore_thread_id(); }); },
                   "The process's CUDA restore thread id.")
      .def("lock", [](const Process& p, nb::handle timeout_ms) {
        int t = int_arg(timeout_ms, "timeout_ms");
        if (t < 0) raise_value_error("timeout_ms must be >= 0");
        call([&] { p.lock(static_cast<unsigned>(t)); });
      }, nb::arg("timeout_ms") = 0, "Blocks the process's further CUDA calls (timeout_ms 0: wait without limit).")
      .def("checkpoint", [](const Process& p) { call([&] { p.checkpoint(); }); },
           "Copies the locked process's GPU memory to host memory and releases it on the GPU.")
      .def("restore", [](const Process& p, nb::handle gpu_mapping) {
        std::map<GpuUuid, GpuUuid> mapping;
        if (!gpu_mapping.is_none()) {
          nb::object mapping_abc = nb::module_::import_("collections.abc").attr("Mapping");
          if (PyObject_IsInstance(gpu_mapping.ptr(), mapping_abc.ptr()) != 1)
            raise_type_error("gpu_mapping must be a mapping from checkpointed GPU UUID to restore GPU UUID");
          for (nb::handle item : nb::borrow<nb::object>(gpu_mapping.attr("items")())) {
            nb::object pair = nb::borrow(item);
            mapping[gpu_uuid_arg(pair[0])] = gpu_uuid_arg(pair[1]);
          }
        }
        call([&] { p.restore(mapping); });
      }, nb::arg("gpu_mapping") = nb::none(),
         "Restores the checkpointed process (onto other GPUs with gpu_mapping, which then names every checkpointed "
         "GPU); it stays locked.")
      .def("unlock", [](const Process& p) { call([&] { p.unlock(); }); }, "Lets the locked process's CUDA calls go on.")
      .def("__repr__", [](const Process& p) { return "<checkpoint.Process pid=" + std::to_string(p.pid()) + ">"; });

  cp.attr("ProcessStateT") =
      nb::module_::import_("typing").attr("Literal")[nb::make_tuple("running", "locked", "checkpointed", "failed")];
  nb::list all;
  all.append("Process");
  cp.attr("__all__") = all;
}

}  // namespace cucore::python
