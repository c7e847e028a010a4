// ObjectCode's load side: the library is loaded lazily, once per object, with
// the context-independent library API (cuLibraryLoadData), so one ObjectCode
// serves every device and context; kernels are looked up once per symbol and
// share a KernelInfo (their box, handles/kernel_handles.hpp) that holds a
// share of the library's box.
#include <cucore/object_code.hpp>

#include <cucore/errors.hpp>
#include <cucore/kernel.hpp>

#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "compile/object_code_state.hpp"
#include "handles/handles.hpp"
#include "launch/kernel_info.hpp"
#include "launch/launch_internal.hpp"
#include "loader/driver.hpp"

namespace cucore {
namespace detail {
namespace {

std::string describe(const ObjectCodeState& s) {
  return "ObjectCode" + (s.name.empty() ? std::string() : " '" + s.name + "'") + " (" + std::string(to_string(s.code_type)) + ")";
}

void load(ObjectCodeState& s) {
  const CodeType type = s.code_type;
  if (type == CodeType::ltoir)
    throw InvalidArgumentError(describe(s) +
                                " holds LTO-IR, which the driver cannot load: link it first, e.g. "
                                "Linker({code}, {.link_time_optimization = true}).link(CodeType::cubin)");
  if (type == CodeType::object || type == CodeType::library)
    throw InvalidArgumentError(describe(s) +
                                " holds relocatable device code, which the driver cannot load: link it first "
                                "(Linker({code, ...}).link(CodeType::cubin))");
  const std::vector<std::byte>& code = s.bytes();  // a path-backed object reads its file now
  if (code.empty()) throw InvalidArgumentError(describe(s) + " is empty");

  const void* image = code.data();
  std::vector<std::byte> terminated;
  if (type == CodeType::ptx && code.back() != std::byte{0}) {
    // The driver reads PTX as a C string.
    terminated.reserve(code.size() + 1);
    terminated.assign(code.begin(), code.end());
    terminated.push_back(std::byte{0});
    image = terminated.data();
  }
  LibraryHandle lib = load_library(image, ("cuLibraryLoadData (" + describe(s) + ")").c_str());
  std::lock_guard lock(s.kernels_mutex);  // is_loaded() reads `library` under this lock
  s.library = std::move(lib);
}

const LibraryHandle& ensure_loaded(ObjectCodeState& s) {
  std::call_once(s.load_once, [&s] {
    try {
      load(s);
    } catch (...) {
      s.load_error = std::current_exception();  // remembered: every later use says the same
    }
  });
  if (s.load_error) std::rethrow_exception(s.load_error);
  return s.library;  // call_once orders this after the load
}

std::vector<std::string> list_kernels(CUlibrary lib) {
  const DriverTable& d = driver();
  require(reinterpret_cast<const void*>(d.cuLibraryGetKernelCount), 12040, "listing kernels (cuLibraryGetKernelCount)");
  require(reinterpret_cast<const void*>(d.cuLibraryEnumerateKernels), 12040, "listing kernels (cuLibraryEnumerateKernels)");
  require(reinterpret_cast<const void*>(d.cuKernelGetName), 12030, "kernel names (cuKernelGetName)");
  unsigned count = 0;
  check(d.cuLibraryGetKernelCount(&count, lib), "cuLibraryGetKernelCount");
  std::vector<CUkernel> kernels(count);
  if (count) check(d.cuLibraryEnumerateKernels(kernels.data(), count, lib), "cuLibraryEnumerateKernels");
  std::vector<std::string> names;
  names.reserve(count);
  for (CUkernel k : kernels) {
    const char* name = nullptr;
    check(d.cuKernelGetName(&name, k), "cuKernelGetName");
    names.emplace_back(name ? name : "");
  }
  return names;
}

[[noreturn]] void throw_unknown_kernel(const ObjectCodeState& s, CUlibrary lib, const std::string& asked,
                                       const std::string& symbol) {
  std::string msg = describe(s) + " has no kernel '" + asked + "'";
  if (symbol != asked) msg += " (symbol '" + symbol + "')";
  try {
    std::vector<std::string> names = list_kernels(lib);
    if (names.empty()) {
      msg += "; it has no kernels";
    } else {
      msg += "; its kernels are: ";
      for (std::size_t i = 0; i < names.size(); ++i) {
        if (i) msg += ", ";
        msg += names[i];
        std::string readable = demangle(names[i].c_str());
        if (readable != names[i]) msg += " (" + readable + ")";
      }
    }
  } catch (const std::exception&) {
    msg += " (the driver cannot list the kernels it has)";
  }
  if (!s.symbol_mapping.empty()) {
    msg += "; name expressions: ";
    bool first = true;
    for (const auto& [expr, lowered] : s.symbol_mapping) {
      msg += (first ? "" : ", ") + expr;
      first = false;
    }
  } else if (asked.find('<') != std::string::npos) {
    msg += "; a template instance is found by its name expression only when Program::compile was given it";
  }
  throw InvalidArgumentError(msg);
}

}  // namespace
}  // namespace detail

using detail::ObjectCodeState;

Kernel ObjectCode::get_kernel(std::string_view name) const {
  if (!state_) throw InvalidArgumentError("ObjectCode::get_kernel: the ObjectCode is empty");
  if (name.empty()) throw InvalidArgumentError("ObjectCode::get_kernel: the kernel name is empty");
  ObjectCodeState& s = *state_;
  const detail::LibraryHandle& library = detail::ensure_loaded(s);
  CUlibrary lib = library->library;
  std::string asked(name);
  auto mapped = s.symbol_mapping.find(asked);
  const std::string symbol = mapped != s.symbol_mapping.end() ? mapped->second : asked;
  {
    std::lock_guard lock(s.kernels_mutex);
    if (auto it = s.kernels.find(symbol); it != s.kernels.end()) return Kernel(it->second);
  }
  const detail::DriverTable& d = detail::driver();
  detail::require(reinterpret_cast<const void*>(d.cuLibraryGetKernel), 12000, "cuLibraryGetKernel");
  CUkernel handle = nullptr;
  CUresult r = d.cuLibraryGetKernel(&handle, lib, symbol.c_str());
  if (r == CUDA_ERROR_NOT_FOUND || (r == CUDA_SUCCESS && !handle)) detail::throw_unknown_kernel(s, lib, asked, symbol);
  detail::check(r, "cuLibraryGetKernel");
  auto info = std::make_shared<detail::KernelInfo>(handle, library);
  info->name = std::move(asked);
  info->mangled_name = symbol;
  std::lock_guard lock(s.kernels_mutex);
  auto [it, inserted] = s.kernels.emplace(symbol, std::move(info));  // a racing thread's entry wins
  return Kernel(it->second);
}

std::vector<std::string> ObjectCode::kernel_names() const {
  if (!state_) throw InvalidArgumentError("ObjectCode::kernel_names: the ObjectCode is empty");
  return detail::list_kernels(detail::ensure_loaded(*state_)->library);
}

void* ObjectCode::library_handle() const {
  if (!state_) throw InvalidArgumentError("ObjectCode::library_handle: the ObjectCode is empty");
  return detail::ensure_loaded(*state_)->library;
}

void* ObjectCode::exported_library_handle() const {
  if (!state_) throw InvalidArgumentError("ObjectCode::exported_library_handle: the ObjectCode is empty");
  const detail::LibraryHandle& library = detail::ensure_loaded(*state_);
  // One share per exported library, kept for the process's life (never
  // destroyed: a process ends without unloading what it handed out).
  static auto* exported = new std::unordered_map<const detail::LibraryBox*, detail::LibraryHandle>;
  static auto* mutex = new std::mutex;  // never destroyed, as the map
  {
    std::lock_guard lock(*mutex);
    exported->try_emplace(library.get(), library);
  }
  return library->library;
}

CUmodule ObjectCode::get_module() const {
  if (!state_) throw InvalidArgumentError("ObjectCode::get_module: the ObjectCode is empty");
  auto library = static_cast<CUlibrary>(exported_library_handle());  // the module lives as long as the library
  const detail::DriverTable& d = detail::driver();
  detail::require(reinterpret_cast<const void*>(d.cuLibraryGetModule), 12000, "cuLibraryGetModule");
  CUmodule module = nullptr;
  detail::check(d.cuLibraryGetModule(&module, library), "cuLibraryGetModule");
  return module;
}

bool ObjectCode::is_loaded() const noexcept {
  if (!state_) return false;
  std::lock_guard lock(state_->kernels_mutex);
  return state_->library != nullptr;
}

}  // namespace cucore
