// Linker: nvJitLink when it is usable, else the driver's cuLink* API.
#include <cucore/context.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/linker.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "compile/compile_common.hpp"
#include "handles/compiler_handles.hpp"
#include "loader/driver.hpp"
#include "loader/toolkit.hpp"
#include "options/option_fields.inc"

namespace cucore {
namespace {

[[noreturn]] void invalid(const char* field, const std::string& why) {
  throw InvalidArgumentError(std::string("LinkerOptions::") + field + ": " + why);
}

using detail::ArchParts;
using detail::parse_arch;
using detail::first_error_line;
using detail::squote;

const char* nvjitlink_result_name(nvJitLinkResult r) {
  switch (r) {
    case NVJITLINK_SUCCESS: return "NVJITLINK_SUCCESS";
    case NVJITLINK_ERROR_UNRECOGNIZED_OPTION: return "NVJITLINK_ERROR_UNRECOGNIZED_OPTION";
    case NVJITLINK_ERROR_MISSING_ARCH: return "NVJITLINK_ERROR_MISSING_ARCH";
    case NVJITLINK_ERROR_INVALID_INPUT: return "NVJITLINK_ERROR_INVALID_INPUT";
    case NVJITLINK_ERROR_PTX_COMPILE: return "NVJITLINK_ERROR_PTX_COMPILE";
    case NVJITLINK_ERROR_NVVM_COMPILE: return "NVJITLINK_ERROR_NVVM_COMPILE";
    case NVJITLINK_ERROR_INTERNAL: return "NVJITLINK_ERROR_INTERNAL";
    case NVJITLINK_ERROR_THREADPOOL: return "NVJITLINK_ERROR_THREADPOOL";
    case NVJITLINK_ERROR_UNRECOGNIZED_INPUT: return "NVJITLINK_ERROR_UNRECOGNIZED_INPUT";
    case NVJITLINK_ERROR_FINALIZE: return "NVJITLINK_ERROR_FINALIZE";
    case NVJITLINK_ERROR_NULL_INPUT: return "NVJITLINK_ERROR_NULL_INPUT";
    case NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS: return "NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS";
    case NVJITLINK_ERROR_INCORRECT_INPUT_TYPE: return "NVJITLINK_ERROR_INCORRECT_INPUT_TYPE";
    case NVJITLINK_ERROR_ARCH_MISMATCH: return "NVJITLINK_ERROR_ARCH_MISMATCH";
    case NVJITLINK_ERROR_OUTDATED_LIBRARY: return "NVJITLINK_ERROR_OUTDATED_LIBRARY";
    case NVJITLINK_ERROR_MISSING_FATBIN: return "NVJITLINK_ERROR_MISSING_FATBIN";
    case NVJITLINK_ERROR_UNRECOGNIZED_ARCH: return "NVJITLINK_ERROR_UNRECOGNIZED_ARCH";
    case NVJITLINK_ERROR_UNSUPPORTED_ARCH: return "NVJITLINK_ERROR_UNSUPPORTED_ARCH";
    case NVJITLINK_ERROR_LTO_NOT_ENABLED: return "NVJITLINK_ERROR_LTO_NOT_ENABLED";
  }
  return "NVJITLINK_ERROR_UNKNOWN";
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\0' || s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  if (s.find_first_not_of(" \t\r\n") == std::string::npos) s.clear();
  return s;
}


// ---- nvJitLink ----------------------------------------------------------

// nvJitLink's error or info log (read through the table's pair of calls for
// it), trimmed; empty when there is none.
std::string nvjitlink_log(nvJitLinkHandle h, decltype(&::nvJitLinkGetErrorLogSize) size_of,
                          decltype(&::nvJitLinkGetErrorLog) read) {
  std::size_t n = 0;
  if (!h || size_of(h, &n) != NVJITLINK_SUCCESS || n == 0) return {};
  std::string s(n, '\0');
  if (read(h, s.data()) != NVJITLINK_SUCCESS) return {};
  return trimmed(std::move(s));
}

nvJitLinkInputType nvjitlink_input_type(CodeType code_type) {
  switch (code_type) {
    case CodeType::cubin: return NVJITLINK_INPUT_CUBIN;
    case CodeType::ptx: return NVJITLINK_INPUT_PTX;
    case CodeType::ltoir: return NVJITLINK_INPUT_LTOIR;
    case CodeType::fatbin: return NVJITLINK_INPUT_FATBIN;
    case CodeType::object: return NVJITLINK_INPUT_OBJECT;
    case CodeType::library: return NVJITLINK_INPUT_LIBRARY;
  }
  throw InvalidArgumentError("Linker: cannot link code_type " + squote(to_string(code_type)));
}

// ---- the driver's linker ------------------------------------------------

CUjitInputType driver_input_type(CodeType code_type) {
  switch (code_type) {
    case CodeType::cubin: return CU_JIT_INPUT_CUBIN;
    case CodeType::ptx: return CU_JIT_INPUT_PTX;
    case CodeType::fatbin: return CU_JIT_INPUT_FATBINARY;
    case CodeType::object: return CU_JIT_INPUT_OBJECT;
    case CodeType::library: return CU_JIT_INPUT_LIBRARY;
    case CodeType::ltoir: break;
  }
  throw InvalidArgumentError("Linker: the driver's linker cannot link code_type " + squote(to_string(code_type)) +
                              " (LTO-IR needs nvJitLink)");
}

// Options the driver's linker cannot honour are refused rather than dropped.
// (ftz, prec_*, fma, kernels_used, variables_used and optimize_unused_variables
// only steer link-time optimization, which the driver path never does; the
// driver has no counterpart of no_cache, which changes no output.)
void check_driver_options(const LinkerOptions& o) {
  auto refuse = [](const char* field) {
    throw InvalidArgumentError(std::string("LinkerOptions::") + field +
                                ": not supported by the driver's linker (nvJitLink is not usable here)");
  };
  if (o.time.value_or(false)) refuse("time");
  if (o.ptx.value_or(false)) refuse("ptx");
  if (o.link_time_optimization.value_or(false)) refuse("link_time_optimization");
  if (!o.ptxas_options.empty()) refuse("ptxas_options");
  if (o.split_compile) refuse("split_compile");
  if (o.split_compile_extended) refuse("split_compile_extended");
  if (parse_arch(o.arch).compute) refuse("arch (compute_<CC>)");
}

}  // namespace

namespace detail {
std::string linker_backend(bool needs_nvjitlink) {
  if (!nvjitlink_available()) {
    if (needs_nvjitlink)
      throw FeatureUnavailableError("linking LTO-IR (link-time optimization)",
                                    "nvJitLink (the driver's linker cannot do LTO); it could not be loaded");
    return "driver";
  }
  int driver_major = -1;
  try {
    driver_major = driver().version / 1000;
  } catch (...) {
    // No driver (a build or CI machine): nvJitLink works on its own.
  }
  const int nvjitlink_major = static_cast<int>(nvjitlink().major);
  if (driver_major < 0 || driver_major == nvjitlink_major) return "nvJitLink";
  // A cubin from another major release may not load on this driver.
  if (needs_nvjitlink)
    throw FeatureUnavailableError("linking LTO-IR with nvJitLink " + std::to_string(nvjitlink_major) +
                                      ".x for CUDA driver " + std::to_string(driver_major) + ".x",
                                  "an nvJitLink of the driver's major version");
  return "driver";
}
}  // namespace detail

namespace linker_render {
using Flags = std::vector<std::string>;
template <typename T>
void none(Flags&, const char*, const T&, const LinkerOptions&) {}
void arch(Flags& f, const char* flag, const std::string& v, const LinkerOptions&) {
  f.push_back(std::string(flag) + "=" + v);
}
void toggle(Flags& f, const char* flag, const std::optional<bool>& v, const LinkerOptions&) {
  if (v.value_or(false)) f.emplace_back(flag);
}
// cuda.core's "=true"/"=false"; but link-time optimization runs libNVVM,
// which takes only "=1"/"=0" (nvJitLink fails to complete with "-ftz=true").
void boolean(Flags& f, const char* flag, const std::optional<bool>& v, const LinkerOptions& o) {
  if (!v) return;
  const bool digits = o.link_time_optimization.value_or(false);
  f.push_back(std::string(flag) + (digits ? (*v ? "=1" : "=0") : (*v ? "=true" : "=false")));
}
void value(Flags& f, const char* flag, const std::optional<int>& v, const LinkerOptions&) {
  if (v) f.push_back(std::string(flag) + "=" + std::to_string(*v));
}
void number(Flags& f, const char* flag, const std::optional<int>& v, const LinkerOptions&) {
  if (v) f.push_back(std::string(flag) + std::to_string(*v));
}
void values(Flags& f, const char* flag, const std::vector<std::string>& v, const LinkerOptions&) {
  for (const auto& s : v) f.push_back(std::string(flag) + "=" + s);
}
}  // namespace linker_render

std::vector<std::string> LinkerOptions::as_nvjitlink_flags() const {
  if (arch.empty()) invalid("arch", "empty; set it (e.g. \"sm_90\"), or let Linker resolve it from the current device");
  if (!parse_arch(arch).ok)
    invalid("arch", squote(arch) + " is not an architecture; expected \"sm_<CC>\" (or \"compute_<CC>\" for PTX "
                                   "output), e.g. \"sm_90\"");
  if (max_register_count && *max_register_count <= 0)
    invalid("max_register_count", "must be positive, got " + std::to_string(*max_register_count));
  if (optimization_level && *optimization_level != 0 && *optimization_level != 3)
    invalid("optimization_level", "nvJitLink accepts 0 or 3, got " + std::to_string(*optimization_level));
  if (ptx.value_or(false) && !link_time_optimization.value_or(false))
    invalid("ptx", "PTX output needs link_time_optimization = true");
  if (split_compile && *split_compile < 0)
    invalid("split_compile", "must be >= 0 (0: all processors), got " + std::to_string(*split_compile));
  if (split_compile_extended && *split_compile_extended < 0)
    invalid("split_compile_extended", "must be >= 0 (0: all processors), got " + std::to_string(*split_compile_extended));
  // nvJitLink takes each flag as a C string: a NUL would cut it short.
  for (const auto* list : {&kernels_used, &variables_used, &ptxas_options}) {
    const char* field =
        list == &kernels_used ? "kernels_used" : list == &variables_used ? "variables_used" : "ptxas_options";
    for (std::size_t i = 0; i < list->size(); ++i) {
      const std::string& s = (*list)[i];
      if (s.empty()) invalid(field, "an entry is empty");
      if (auto at = s.find('\0'); at != std::string::npos)
        invalid(field, "entry " + std::to_string(i) + " contains a NUL byte at offset " + std::to_string(at));
    }
  }

  std::vector<std::string> f;
#define X(field, kind, flag) linker_render::kind(f, flag, field, *this);
  CUCORE_LINKER_OPTION_FIELDS(X)
#undef X
  return f;
}

Linker::Linker(std::vector<ObjectCode> object_codes, LinkerOptions options)
    : codes_(std::move(object_codes)), options_(std::move(options)) {
  if (codes_.empty())
    throw InvalidArgumentError("At least one ObjectCode object must be provided (Linker: nothing to link)");
  bool has_ltoir = false;
  for (std::size_t i = 0; i < codes_.size(); ++i) {
    if (!codes_[i]) throw InvalidArgumentError("Linker: ObjectCode " + std::to_string(i) + " is empty");
    (void)nvjitlink_input_type(codes_[i].code_type());
    has_ltoir = has_ltoir || codes_[i].code_type() == CodeType::ltoir;
  }
  if (options_.arch.empty()) {
    try {
      options_.arch = "sm_" + Device().arch();
    } catch (const std::exception& e) {
      throw InvalidArgumentError(
          std::string("LinkerOptions::arch is empty and the current device's architecture could not be read (") +
          e.what() + "); set LinkerOptions::arch, e.g. \"sm_90\"");
    }
  }
  (void)options_.as_nvjitlink_flags();  // validate now
  backend_ = detail::linker_backend(has_ltoir || options_.link_time_optimization.value_or(false) ||
                                    options_.ptx.value_or(false));
  if (backend_ == "driver") {
    check_driver_options(options_);
    for (const auto& c : codes_) (void)driver_input_type(c.code_type());
    // Without nvJitLink the driver must load; say both were tried.
    try {
      (void)detail::driver();
    } catch (const std::exception& e) {
      try {
        (void)detail::nvjitlink();
      } catch (const LibraryNotFoundError& nv) {
        throw LibraryNotFoundError("nvjitlink", nv.searched(),
                                   std::string("no linker: nvJitLink is missing and the driver's linker is "
                                               "unavailable too (") +
                                       e.what() + ")");
      }
      throw;
    }
  }
}

namespace detail {
// One link: the backend's handle (exactly one of the boxes holds one) and, for
// the driver, the log buffers it writes into while the state lives.
struct LinkState {
  NvJitLinkBox nvjitlink;
  CuLinkStateHandle culink;
  std::string info, err;
  bool completed = false;  // link() ran (or tried) its completion: the next starts afresh

  void* handle() const noexcept {
    return nvjitlink ? static_cast<void*>(nvjitlink.get()) : static_cast<void*>(culink.get());
  }
};
}  // namespace detail

Linker::Linker(Linker&&) noexcept = default;
Linker& Linker::operator=(Linker&&) noexcept = default;
Linker::~Linker() = default;

namespace {
constexpr std::size_t kDriverLogSize = 1 << 20;

// The state's logs, trimmed (the driver's buffers are C strings).
void read_logs(const detail::LinkState& s, std::string& error_log, std::string& info_log) {
  if (s.nvjitlink) {
    const auto& t = detail::nvjitlink();
    error_log = nvjitlink_log(s.nvjitlink.get(), t.nvJitLinkGetErrorLogSize, t.nvJitLinkGetErrorLog);
    info_log = nvjitlink_log(s.nvjitlink.get(), t.nvJitLinkGetInfoLogSize, t.nvJitLinkGetInfoLog);
  } else {
    info_log = trimmed(std::string(s.info.c_str()));
    error_log = trimmed(std::string(s.err.c_str()));
  }
}
}  // namespace

std::unique_ptr<detail::LinkState> Linker::make_state() {
  auto s = std::make_unique<detail::LinkState>();
  // On failure, keep the logs for error_log()/info_log() and throw.
  auto fail = [&](const std::string& what, const std::string& result) {
    read_logs(*s, error_log_, info_log_);
    std::string first = first_error_line(error_log_);
    throw CompileError("linking '" + options_.name + "' for " + options_.arch + " failed (" + what + ": " + result +
                           ")" + (first.empty() ? "" : ": " + first),
                       error_log_);
  };
  if (backend_ == "nvJitLink") {
    const auto& t = detail::nvjitlink();
    const std::vector<std::string> flags = options_.as_nvjitlink_flags();
    std::vector<const char*> argv;
    argv.reserve(flags.size());
    for (const auto& f : flags) argv.push_back(f.c_str());
    if (nvJitLinkResult r =
            detail::create_nvjitlink(t, static_cast<std::uint32_t>(argv.size()), argv.data(), s->nvjitlink);
        r != NVJITLINK_SUCCESS) {
      std::string all;
      for (const auto& f : flags) all += " " + f;
      throw CompileError(std::string("nvJitLinkCreate failed: ") + nvjitlink_result_name(r) + " (options:" + all + ")",
                         {});
    }
    for (const auto& c : codes_) {
      auto bytes = c.code();
      std::size_t size = bytes.size();
      // PTX is a C string to nvJitLink: the size leaves the NUL out.
      if (c.code_type() == CodeType::ptx && size && bytes[size - 1] == std::byte{0}) --size;
      const std::string name = c.name().empty() ? std::string(to_string(c.code_type())) : c.name();
      if (nvJitLinkResult r = t.nvJitLinkAddData(s->nvjitlink.get(), nvjitlink_input_type(c.code_type()),
                                                 bytes.data(), size, name.c_str());
          r != NVJITLINK_SUCCESS)
        fail("adding '" + name + "'", nvjitlink_result_name(r));
    }
    return s;
  }
  const auto& d = detail::driver();
  // cuLink* works in the current context: use the device's primary one if
  // none is current (as the runtime API would).
  CUcontext ctx = nullptr;
  if (d.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx) (void)Device().set_current();
  detail::require(reinterpret_cast<const void*>(d.cuLinkCreate), 0, "the driver's linker (cuLinkCreate)");
  s->info.assign(kDriverLogSize, '\0');
  s->err.assign(kDriverLogSize, '\0');
  std::vector<CUjit_option> keys;
  std::vector<void*> values;
  auto add = [&](CUjit_option k, std::uintptr_t v) {
    keys.push_back(k);
    values.push_back(reinterpret_cast<void*>(v));
  };
  keys.push_back(CU_JIT_INFO_LOG_BUFFER);
  values.push_back(s->info.data());
  add(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, kDriverLogSize);
  keys.push_back(CU_JIT_ERROR_LOG_BUFFER);
  values.push_back(s->err.data());
  add(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, kDriverLogSize);
  const ArchParts arch = parse_arch(options_.arch);
  std::uintptr_t target_value = static_cast<std::uintptr_t>(arch.number);
  if (arch.suffix == 'a') target_value += CU_COMPUTE_ACCELERATED_TARGET_BASE;
  if (arch.suffix == 'f') target_value += CU_COMPUTE_FAMILY_TARGET_BASE;
  add(CU_JIT_TARGET, target_value);
  if (options_.max_register_count) add(CU_JIT_MAX_REGISTERS, static_cast<std::uintptr_t>(*options_.max_register_count));
  if (options_.verbose.value_or(false)) add(CU_JIT_LOG_VERBOSE, 1);
  if (options_.optimization_level)
    add(CU_JIT_OPTIMIZATION_LEVEL, static_cast<std::uintptr_t>(*options_.optimization_level));
  if (options_.debug.value_or(false)) add(CU_JIT_GENERATE_DEBUG_INFO, 1);
  if (options_.lineinfo.value_or(false)) add(CU_JIT_GENERATE_LINE_INFO, 1);
  if (CUresult r = detail::create_culink(d, static_cast<unsigned>(keys.size()), keys.data(), values.data(), s->culink);
      r != CUDA_SUCCESS)
    fail("cuLinkCreate", result_name(r));
  for (const auto& c : codes_) {
    auto bytes = c.code();
    const std::string name = c.name().empty() ? std::string(to_string(c.code_type())) : c.name();
    if (CUresult r = d.cuLinkAddData(s->culink.get(), driver_input_type(c.code_type()),
                                     const_cast<std::byte*>(bytes.data()), bytes.size(), name.c_str(), 0, nullptr,
                                     nullptr);
        r != CUDA_SUCCESS)
      fail("adding '" + name + "'", result_name(r));
  }
  return s;
}

void* Linker::handle() {
  if (closed_) return nullptr;
  if (!state_) state_ = make_state();
  return state_->handle();
}

void Linker::close() noexcept {
  codes_.clear();
  codes_.shrink_to_fit();
  state_.reset();
  closed_ = true;
}

ObjectCode Linker::link(CodeType target) {
  if (closed_) detail::throw_closed("Linker", "link");
  if (target != CodeType::cubin && target != CodeType::ptx)
    throw InvalidArgumentError("Linker::link: unknown target " + squote(to_string(target)) +
                                " (valid: \"cubin\", \"ptx\")");
  const bool want_ptx = options_.ptx.value_or(false);
  if ((target == CodeType::ptx) != want_ptx)
    throw InvalidArgumentError(target == CodeType::ptx
                                    ? "Linker::link: target \"ptx\" needs LinkerOptions::ptx = true (with "
                                      "link_time_optimization)"
                                    : "Linker::link: LinkerOptions::ptx is set, so the output is PTX; link(\"ptx\")");
  error_log_.clear();
  info_log_.clear();
  // The state handle() gave, if no link has completed it yet; else a new one
  // (the old one goes first).
  if (state_ && state_->completed) state_.reset();
  if (!state_) state_ = make_state();
  detail::LinkState& s = *state_;
  s.completed = true;
  std::vector<std::byte> out;

  if (s.nvjitlink) {
    const auto& t = detail::nvjitlink();
    const nvJitLinkHandle h = s.nvjitlink.get();
    auto fail = [&](const char* what, nvJitLinkResult r) {
      read_logs(s, error_log_, info_log_);
      std::string first = first_error_line(error_log_);
      throw CompileError("linking '" + options_.name + "' for " + options_.arch + " failed (" + what + ": " +
                             nvjitlink_result_name(r) + ")" + (first.empty() ? "" : ": " + first),
                         error_log_);
    };
    if (nvJitLinkResult r = t.nvJitLinkComplete(h); r != NVJITLINK_SUCCESS) fail("nvJitLinkComplete", r);
    std::size_t size = 0;
    nvJitLinkResult r = target == CodeType::cubin ? t.nvJitLinkGetLinkedCubinSize(h, &size)
                                          : t.nvJitLinkGetLinkedPtxSize(h, &size);
    if (r != NVJITLINK_SUCCESS) fail("getting the output size", r);
    out.resize(size);
    r = target == CodeType::cubin ? t.nvJitLinkGetLinkedCubin(h, out.data())
                          : t.nvJitLinkGetLinkedPtx(h, reinterpret_cast<char*>(out.data()));
    if (r != NVJITLINK_SUCCESS) fail("getting the output", r);
  } else {
    const auto& d = detail::driver();
    void* cubin = nullptr;
    std::size_t size = 0;
    if (CUresult r = d.cuLinkComplete(s.culink.get(), &cubin, &size); r != CUDA_SUCCESS) {
      read_logs(s, error_log_, info_log_);
      std::string first = first_error_line(error_log_);
      throw CompileError("linking '" + options_.name + "' for " + options_.arch + " failed (cuLinkComplete: " +
                             result_name(r) + ")" + (first.empty() ? "" : ": " + first),
                         error_log_);
    }
    // The cubin belongs to the link state, which a later link() or close() destroys: copy it.
    const auto* p = static_cast<const std::byte*>(cubin);
    out.assign(p, p + size);
  }
  read_logs(s, error_log_, info_log_);

  if (out.empty()) throw CompileError("linking '" + options_.name + "' produced no output", error_log_);
  // The inputs' name expressions still name the same kernels after linking.
  std::map<std::string, std::string> mapping;
  for (const auto& c : codes_) mapping.insert(c.symbol_mapping().begin(), c.symbol_mapping().end());
  return ObjectCode::from_bytes(std::move(out), target, options_.name, std::move(mapping), info_log_);
}

}  // namespace cucore
