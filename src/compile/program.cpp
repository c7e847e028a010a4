// Program: run-time compilation of CUDA C++ through NVRTC (and of PTX through
// the linker). ProgramOptions renders NVRTC's flags with cuda.core's spelling.
// The cache overload of Program::compile lives in program_cache.cpp.
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/linker.hpp>
#include <cucore/pathfinder.hpp>
#include <cucore/program.hpp>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "compile/compile_common.hpp"
#include "compile/include_resolver.hpp"
#include "compile/program_compile.hpp"
#include "loader/driver.hpp"
#include "loader/toolkit.hpp"
#include "options/option_fields.inc"

namespace cucore {
namespace {

[[noreturn]] void invalid(const char* field, const std::string& why) {
  throw InvalidArgumentError(std::string("ProgramOptions::") + field + ": " + why);
}

using detail::ArchParts;
using detail::parse_arch;
using detail::first_error_line;
using detail::squote;

// NVRTC's architecture numbers, read once; empty when NVRTC cannot be loaded
// (then only the spelling of `arch` is checked, and the compile reports it).
const std::vector<int>& supported_arch_numbers() {
  static const std::vector<int> archs = [] {
    std::vector<int> out;
    try {
      const auto& t = detail::nvrtc();
      int n = 0;
      if (t.nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0) {
        out.resize(static_cast<std::size_t>(n));
        if (t.nvrtcGetSupportedArchs(out.data()) != NVRTC_SUCCESS) out.clear();
      }
    } catch (...) {
    }
    return out;
  }();
  return archs;
}

// The spelling only: options are checked without loading NVRTC, so building a
// Program (and its cache key) stays cheap; compile() checks NVRTC's own list.
void check_arch(const std::string& arch) {
  if (arch.empty())
    invalid("arch", "empty; set it (e.g. \"sm_90\"), or let Program resolve it from the current device");
  const ArchParts p = parse_arch(arch);
  if (!p.ok)
    invalid("arch", squote(arch) + " is not an architecture; expected \"sm_<CC>\" or \"compute_<CC>\", "
                                   "optionally with an 'a' or 'f' suffix, e.g. \"sm_90\"");
}

void check_arch_supported(const std::string& arch) {
  const ArchParts p = parse_arch(arch);
  const auto& known = supported_arch_numbers();
  if (!known.empty() && std::find(known.begin(), known.end(), p.number) == known.end()) {
    std::string list;
    for (int n : known) list += (list.empty() ? "sm_" : ", sm_") + std::to_string(n);
    invalid("arch", squote(arch) + " is not supported by this NVRTC (supported: " + list + ")");
  }
}

bool is_identifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// A macro name, optionally function-like: "NAME" or "NAME(a,b)".
bool is_macro_name(std::string_view s) {
  const auto paren = s.find('(');
  if (paren == std::string_view::npos) return is_identifier(s);
  return is_identifier(s.substr(0, paren)) && s.back() == ')';
}

// NVRTC takes C strings: a NUL would silently cut the value short.
void check_no_nul(const char* field, std::string_view value) {
  if (auto at = value.find('\0'); at != std::string_view::npos)
    invalid(field, "contains a NUL byte at offset " + std::to_string(at));
}

void check_entries(const char* field, const std::vector<std::string>& items) {
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (items[i].empty()) invalid(field, "entry " + std::to_string(i) + " is empty");
    check_no_nul(field, items[i]);
  }
}

void check_diag(const char* field, const std::vector<int>& numbers) {
  for (int n : numbers)
    if (n < 0) invalid(field, "diagnostic number " + std::to_string(n) + " is negative");
}

std::string program_log(const detail::NvrtcTable& t, nvrtcProgram prog) {
  std::size_t size = 0;
  if (t.nvrtcGetProgramLogSize(prog, &size) != NVRTC_SUCCESS || size <= 1) return {};
  std::string log(size, '\0');
  if (t.nvrtcGetProgramLog(prog, log.data()) != NVRTC_SUCCESS) return {};
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n' || log.back() == ' ')) log.pop_back();
  // A log of only whitespace says nothing.
  if (log.find_first_not_of(" \t\r\n") == std::string::npos) log.clear();
  return log;
}

std::string resolve_arch_from_device() {
  try {
    return "sm_" + Device().arch();
  } catch (const std::exception& e) {
    throw InvalidArgumentError(
        std::string("ProgramOptions::arch is empty and the current device's architecture could not be read (") +
        e.what() + "); set ProgramOptions::arch, e.g. \"sm_90\"");
  }
}

}  // namespace

namespace {
// The toolkit's header directories as NVRTC flags (CCCL first), found once.
const std::vector<std::string>& toolkit_include_flags() {
  static const std::vector<std::string> flags = [] {
    std::vector<std::string> dirs;
    if (auto d = pathfinder::cccl_include_dir()) dirs.push_back("--include-path=" + *d);
    if (auto d = pathfinder::cuda_include_dir()) dirs.push_back("--include-path=" + *d);
    return dirs;
  }();
  return flags;
}

// The renderers the option table (options/option_fields.inc) names, one per
// kind, chosen by the field's C++ type where a kind covers several.
namespace nvrtc_render {
using Flags = std::vector<std::string>;
using Macros = decltype(ProgramOptions::define_macro);
// What a renderer may read besides its field: the other fields, and how the
// toolkit's directories are rendered (passed down, never a hidden state).
struct RenderContext {
  const ProgramOptions& options;
  detail::ToolkitFlags toolkit;
};

template <typename T>
void none(Flags&, const char*, const T&, const RenderContext&) {}
void arch(Flags& f, const char* flag, const std::string& v, const RenderContext&) {
  f.push_back(std::string(flag) + "=" + v);
}
void toggle(Flags& f, const char* flag, const std::optional<bool>& v, const RenderContext&) {
  if (v.value_or(false)) f.emplace_back(flag);
}
void boolean(Flags& f, const char* flag, const std::optional<bool>& v, const RenderContext&) {
  if (v) f.push_back(std::string(flag) + (*v ? "=true" : "=false"));
}
void value(Flags& f, const char* flag, const std::string& v, const RenderContext&) {
  if (!v.empty()) f.push_back(std::string(flag) + "=" + v);
}
void value(Flags& f, const char* flag, const std::optional<int>& v, const RenderContext&) {
  if (v) f.push_back(std::string(flag) + "=" + std::to_string(*v));
}
void values(Flags& f, const char* flag, const std::vector<std::string>& v, const RenderContext&) {
  for (const auto& s : v) f.push_back(std::string(flag) + "=" + s);
}
void values(Flags& f, const char* flag, const std::vector<int>& v, const RenderContext&) {
  for (int n : v) f.push_back(std::string(flag) + "=" + std::to_string(n));
}
void macros(Flags& f, const char* flag, const Macros& v, const RenderContext&) {
  for (const auto& m : v) {
    if (const auto* s = std::get_if<std::string>(&m))
      f.push_back(std::string(flag) + "=" + *s);
    else
      f.push_back(std::string(flag) + "=" + std::get<1>(m).first + "=" + std::get<1>(m).second);
  }
}
void include_paths(Flags& f, const char* flag, const std::vector<std::string>& v, const RenderContext& c) {
  values(f, flag, v, c);
  // NVRTC's bundled headers stand in for the toolkit's (two CCCLs would mix).
  if (!c.options.use_toolkit_headers || c.options.use_bundled_headers.value_or(false)) return;
  // After the caller's paths, so their headers win.
  if (c.toolkit == detail::ToolkitFlags::placeholder) {
    f.push_back(std::string(flag) + "=<toolkit headers>");
    return;
  }
  const auto& toolkit = toolkit_include_flags();
  f.insert(f.end(), toolkit.begin(), toolkit.end());
}

void bundled(Flags& f, const char* flag, const std::optional<bool>& v, const RenderContext& c) {
  if (!v.value_or(false)) return;
  // The directory is this user's (keys and rendered options stay portable with the placeholder).
  f.push_back(std::string(flag) + "=" +
              (c.toolkit == detail::ToolkitFlags::placeholder ? std::string("<nvrtc bundled headers>")
                                                              : detail::bundled_headers_dir()));
}

// Whether a field is set, as cuda.core's NVVM check reads it: a switch when
// true, any other field when given.
bool is_set(const std::optional<bool>& v) { return v.has_value(); }
bool is_set(const std::optional<int>& v) { return v.has_value(); }
bool is_set(const std::string& v) { return !v.empty(); }
template <typename T>
bool is_set(const std::vector<T>& v) { return !v.empty(); }
bool is_set_toggle(const std::optional<bool>& v) { return v.value_or(false); }
template <typename T>
bool is_set_boolean(const T& v) { return is_set(v); }
template <typename T>
bool is_set_value(const T& v) { return is_set(v); }
template <typename T>
bool is_set_values(const T& v) { return is_set(v); }
template <typename T>
bool is_set_macros(const T& v) { return is_set(v); }
template <typename T>
bool is_set_include_paths(const T& v) { return is_set(v); }
bool is_set_bundled(const std::optional<bool>& v) { return v.value_or(false); }
template <typename T>
bool is_set_arch(const T&) { return false; }
template <typename T>
bool is_set_none(const T&) { return false; }
}  // namespace nvrtc_render

namespace nvvm_render {
using Flags = std::vector<std::string>;
constexpr bool is_ignored = false, is_unsupported = true, is_arch = false, is_toggle = false, is_digit = false,
               is_opt = false;
template <typename T>
void ignored(Flags&, const char*, const T&) {}
template <typename T>
void unsupported(Flags&, const char*, const T&) {}
void arch(Flags& f, const char* flag, const std::string& v) {
  // libNVVM generates PTX for a virtual architecture.
  f.push_back(std::string(flag) + "=" + (v.starts_with("sm_") ? "compute_" + v.substr(3) : v));
}
void toggle(Flags& f, const char* flag, const std::optional<bool>& v) {
  if (v.value_or(false)) f.emplace_back(flag);
}
void digit(Flags& f, const char* flag, const std::optional<bool>& v) {
  if (v) f.push_back(std::string(flag) + (*v ? "=1" : "=0"));
}
void opt(Flags& f, const char* flag, const std::optional<bool>& v) {
  if (v) f.push_back(std::string(flag) + (*v ? "=3" : "=0"));
}
}  // namespace nvvm_render
}  // namespace

std::vector<std::string> ProgramOptions::as_nvrtc_flags() const {
  return detail::nvrtc_flags(*this, detail::ToolkitFlags::paths);
}

std::vector<std::string> detail::nvrtc_flags(const ProgramOptions& o, ToolkitFlags toolkit) {
  // Validate everything first, so no half-rendered state escapes.
  check_arch(o.arch);
  if (o.max_register_count && *o.max_register_count <= 0)
    invalid("max_register_count", "must be positive, got " + std::to_string(*o.max_register_count));
  if (o.split_compile && *o.split_compile < 0)
    invalid("split_compile", "must be >= 0 (0: all processors), got " + std::to_string(*o.split_compile));
  if (!o.std.empty()) {
    static constexpr const char* kStd[] = {"c++03", "c++11", "c++14", "c++17", "c++20"};
    if (std::none_of(std::begin(kStd), std::end(kStd), [&](const char* s) { return o.std == s; }))
      invalid("std", squote(o.std) + " is not a dialect NVRTC knows (c++03, c++11, c++14, c++17, c++20)");
  }
  if (!o.ofast_compile.empty() && o.ofast_compile != "0" && o.ofast_compile != "min" && o.ofast_compile != "mid" &&
      o.ofast_compile != "max")
    invalid("ofast_compile", squote(o.ofast_compile) + " is not one of \"0\", \"min\", \"mid\", \"max\"");
  for (const auto& m : o.define_macro) {
    if (const auto* s = std::get_if<std::string>(&m)) {
      const std::string_view macro = std::string_view(*s).substr(0, s->find('='));
      if (!is_macro_name(macro)) invalid("define_macro", squote(*s) + " does not start with a macro name");
    } else {
      const auto& macro = std::get<std::pair<std::string, std::string>>(m).first;
      if (!is_macro_name(macro)) invalid("define_macro", squote(macro) + " is not a macro name");
    }
  }
  for (const auto& m : o.undefine_macro)
    if (!is_identifier(m)) invalid("undefine_macro", squote(m) + " is not a macro name");
  check_entries("ptxas_options", o.ptxas_options);
  check_entries("include_path", o.include_path);
  check_entries("pre_include", o.pre_include);
  check_entries("undefine_macro", o.undefine_macro);
  for (const auto& m : o.define_macro) {
    if (const auto* s = std::get_if<std::string>(&m)) {
      check_no_nul("define_macro", *s);
    } else {
      check_no_nul("define_macro", std::get<std::pair<std::string, std::string>>(m).first);
      check_no_nul("define_macro", std::get<std::pair<std::string, std::string>>(m).second);
    }
  }
  for (const auto& [field, value] : {std::pair<const char*, const std::string*>{"name", &o.name},
                                     {"optimization_info", &o.optimization_info},
                                     {"time", &o.time},
                                     {"frandom_seed", &o.frandom_seed},
                                     {"create_pch", &o.create_pch},
                                     {"use_pch", &o.use_pch},
                                     {"pch_dir", &o.pch_dir}})
    check_no_nul(field, *value);
  check_diag("diag_error", o.diag_error);
  check_diag("diag_suppress", o.diag_suppress);
  check_diag("diag_warn", o.diag_warn);
  if (!o.create_pch.empty() && !o.use_pch.empty())
    invalid("use_pch", "cannot be combined with create_pch (one program either makes or uses a header)");

  std::vector<std::string> f;
  f.reserve(16);
  const nvrtc_render::RenderContext context{o, toolkit};
#define X(field, nvrtc, nvrtc_flag, nvvm, nvvm_flag) nvrtc_render::nvrtc(f, nvrtc_flag, o.field, context);
  CUCORE_PROGRAM_OPTION_FIELDS(X)
#undef X
  return f;
}

std::vector<std::string> ProgramOptions::unsupported_by_nvvm() const {
  std::vector<std::string> out;
#define X(field, nvrtc, nvrtc_flag, nvvm, nvvm_flag) \
  if (nvvm_render::is_##nvvm && nvrtc_render::is_set_##nvrtc(field)) out.emplace_back(#field);
  CUCORE_PROGRAM_OPTION_FIELDS(X)
#undef X
  return out;
}

std::vector<std::string> ProgramOptions::as_nvvm_flags(std::optional<CodeType> target) const {
  check_arch(arch);
  if (auto bad = unsupported_by_nvvm(); !bad.empty()) {
    std::string list;
    for (const auto& b : bad) list += (list.empty() ? "" : ", ") + b;
    throw InvalidArgumentError("The following options are not supported by NVVM backend: " + list);
  }
  for (std::size_t i = 0; i < extra_sources.size(); ++i) {
    if (extra_sources[i].second.empty())
      invalid("extra_sources", "Module source for '" + extra_sources[i].first + "' (index " + std::to_string(i) +
                                   ") cannot be empty");
    check_no_nul("extra_sources", extra_sources[i].first);
  }
  std::vector<std::string> f;
#define X(field, nvrtc, nvrtc_flag, nvvm, nvvm_flag) nvvm_render::nvvm(f, nvvm_flag, field);
  CUCORE_PROGRAM_OPTION_FIELDS(X)
#undef X
  if (target == CodeType::ltoir) f.emplace_back("-gen-lto");
  return f;
}

namespace {
// The translations CUCORE_PTX_LINKER_OPTION_FIELDS names.
namespace ptx_linker {
template <typename T>
void copy(T& to, const T& from) {
  to = from;
}
void given(std::optional<bool>& to, const std::string& from) {
  if (!from.empty()) to = true;
}
}  // namespace ptx_linker
}  // namespace

LinkerOptions detail::linker_options_for_ptx(const ProgramOptions& o) {
  LinkerOptions l;
#define X(program_field, linker_field, how) ptx_linker::how(l.linker_field, o.program_field);
  CUCORE_PTX_LINKER_OPTION_FIELDS(X)
#undef X
  return l;
}

std::string_view to_string(PchStatus status) noexcept {
  switch (status) {
    case PchStatus::created: return "created";
    case PchStatus::not_attempted: return "not_attempted";
    case PchStatus::failed: return "failed";
  }
  return "failed";
}

Program::Program(std::string code, std::string code_type, ProgramOptions options)
    : code_(std::move(code)), code_type_(std::move(code_type)), options_(std::move(options)) {
  // cuda.core accepts any case ("C++", "PTX", "NVVM").
  std::transform(code_type_.begin(), code_type_.end(), code_type_.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (code_type_ != "c++" && code_type_ != "ptx" && code_type_ != "nvvm")
    throw InvalidArgumentError("Program: unknown code_type " + squote(code_type_) +
                                " (valid: \"c++\", \"ptx\", \"nvvm\")");
  if (!options_.extra_sources.empty() && code_type_ != "nvvm")
    throw InvalidArgumentError(code_type_ == "c++"
                                    ? "extra_sources is not supported by the NVRTC backend (C++ code_type)"
                                    : "extra_sources is not supported by the PTX backend.");
  // NVRTC and the linker read the source as a C string: a NUL would silently
  // cut it short. NVVM IR may be bitcode, which has NULs. A C string's own
  // terminator (PTX as NVRTC hands it out, decoded) is dropped, as harmless.
  if (code_type_ != "nvvm") {
    while (!code_.empty() && code_.back() == '\0') code_.pop_back();
    if (auto at = code_.find('\0'); at != std::string::npos)
      throw InvalidArgumentError("Program: the source contains a NUL byte at offset " + std::to_string(at));
  }
  // As cuda.core: empty C++ and NVVM IR are the compilers' to judge (NVRTC
  // compiles it; libNVVM takes it and refuses it at compile), but the linker
  // refuses empty PTX at once, and cuda.core adds the PTX to its linker here.
  if (code_type_ == "ptx" && code_.empty())
    throw InvalidArgumentError("Program: the PTX source is empty (the linker refuses empty input)");
  if (options_.arch.empty()) options_.arch = resolve_arch_from_device();
  state_ = std::make_shared<detail::ProgramState>();
  // Fail on bad options now, not at compile; NVRTC's flags are rendered once,
  // here (the toolkit's directories can wait: a placeholder stands for them).
  if (code_type_ == "c++") {
    if (options_.use_bundled_headers.value_or(false)) {
      // NVRTC learned --use-bundled-headers in 13.3; an older one would only say "invalid option".
      const auto [major, minor] = nvrtc_version();
      if (major * 100 + minor < 1303)
        throw FeatureUnavailableError("ProgramOptions::use_bundled_headers (NVRTC's bundled headers)",
                                      "NVRTC 13.3 or later; this NVRTC is " + std::to_string(major) + "." +
                                          std::to_string(minor));
    }
    state_->kind = detail::ProgramState::Kind::nvrtc;
    state_->nvrtc_flags = detail::nvrtc_flags(options_, detail::ToolkitFlags::placeholder);
  } else if (code_type_ == "nvvm") {
    state_->kind = detail::ProgramState::Kind::nvvm;
    (void)options_.as_nvvm_flags();
  } else {
    (void)detail::linker_options_for_ptx(options_).as_nvjitlink_flags();
  }
}

std::string Program::backend() const {
  if (code_type_ == "c++") return "NVRTC";
  if (code_type_ == "nvvm") return "NVVM";
  try {
    return detail::linker_backend(options_.link_time_optimization.value_or(false));
  } catch (...) {
    return "nvJitLink";  // the only backend that could do it
  }
}

const std::vector<std::string>& Program::nvrtc_flags() const noexcept { return state_->nvrtc_flags; }

namespace {
// An nvvmProgram holding the program's modules (the source, extra_sources).
detail::NvvmProgramHandle make_nvvm_program(const detail::NvvmTable& t, const std::string& code,
                                            const ProgramOptions& o) {
  detail::NvvmProgramHandle prog;
  detail::check_nvvm(detail::create_nvvm_program(t, prog), "nvvmCreateProgram");
  detail::check_nvvm(t.nvvmAddModuleToProgram(prog.get(), code.data(), code.size(), o.name.c_str()),
                     "nvvmAddModuleToProgram");
  for (const auto& [name, source] : o.extra_sources)
    detail::check_nvvm(t.nvvmAddModuleToProgram(prog.get(), source.data(), source.size(), name.c_str()),
                       "nvvmAddModuleToProgram");
  return prog;
}
}  // namespace

void* Program::handle() const {
  if (!state_ || state_->closed.load(std::memory_order_acquire)) return nullptr;
  std::lock_guard lock(state_->handle_mutex);
  auto& h = state_->handle;
  if (std::holds_alternative<std::monostate>(h)) {
    if (state_->kind == detail::ProgramState::Kind::nvrtc) {
      detail::NvrtcProgramHandle prog;
      detail::check_nvrtc(detail::create_nvrtc_program(detail::nvrtc(), code_.c_str(), options_.name.c_str(), 0,
                                                       nullptr, nullptr, prog),
                          "nvrtcCreateProgram");
      h = std::move(prog);
    } else if (state_->kind == detail::ProgramState::Kind::nvvm) {
      h = make_nvvm_program(detail::libnvvm(), code_, options_);
    } else {
      h = Linker({ObjectCode::from_ptx(std::string_view(code_), options_.name)},
                 detail::linker_options_for_ptx(options_));
    }
  }
  if (const auto* p = std::get_if<detail::NvrtcProgramHandle>(&h)) return p->get();
  if (const auto* p = std::get_if<detail::NvvmProgramHandle>(&h)) return p->get();
  if (auto* l = std::get_if<Linker>(&h)) return l->handle();
  return nullptr;
}

std::optional<PchStatus> Program::pch_status() const noexcept {
  const int s = state_ ? state_->pch_status.load(std::memory_order_acquire) : -1;
  if (s < 0) return std::nullopt;
  return static_cast<PchStatus>(s);
}

void Program::close() noexcept {
  if (!state_) return;
  state_->closed.store(true, std::memory_order_release);
  state_->release_handle();
}

bool Program::is_closed() const noexcept { return !state_ || state_->closed.load(std::memory_order_acquire); }

namespace {
std::atomic<detail::CompileThroughCache> g_compile_through_cache{nullptr};
}  // namespace

void detail::set_compile_through_cache(CompileThroughCache fn) noexcept {
  g_compile_through_cache.store(fn, std::memory_order_release);
}

namespace {
std::atomic<detail::BundledHeadersDir> g_bundled_headers_dir{nullptr};
}  // namespace

void detail::set_bundled_headers_dir(BundledHeadersDir fn) noexcept {
  g_bundled_headers_dir.store(fn, std::memory_order_release);
}

std::string detail::bundled_headers_dir() {
  auto fn = g_bundled_headers_dir.load(std::memory_order_acquire);
  if (!fn) throw LogicError("use_bundled_headers: no cache layer is registered to say where the headers go");
  return fn();
}

ObjectCode Program::compile(CodeType target, std::vector<std::string> name_expressions, ProgramCache* cache) const {
  if (!cache) return compile(target, std::move(name_expressions));
  auto through = g_compile_through_cache.load(std::memory_order_acquire);
  if (!through) throw LogicError("Program::compile: no program cache layer is registered");
  return through(*this, target, std::move(name_expressions), *cache);
}

ObjectCode Program::compile(CodeType target, std::vector<std::string> name_expressions) const {
  // NVRTC opens the headers it includes with a blocking read of its own: a
  // FIFO among them would hang it, and nothing it reads is checked. The headers
  // found outside the toolkit are read here instead, safely (as a compile
  // through a cache reads them), and handed to NVRTC; what cannot be followed
  // (a computed #include) is left to NVRTC as before.
  if (!is_closed() && code_type_ == "c++") {
    detail::ResolvedIncludes includes = detail::resolve_includes(code_, options_);
    if (!includes.error.empty()) throw InvalidArgumentError("Program::compile: " + includes.error);
    if (includes.unfollowable.empty() && !includes.headers.empty())
      return detail::compile_program(*this, target, name_expressions, &includes);
  }
  return detail::compile_program(*this, target, name_expressions, nullptr);
}

namespace {

ObjectCode compile_nvvm(const Program& program, CodeType target) {
  const ProgramOptions& o = program.options();
  if (target != CodeType::ptx && target != CodeType::ltoir)
    throw InvalidArgumentError("Unsupported target_type=\"" + std::string(to_string(target)) +
                                "\" for NVVM (supported: 'ptx', 'ltoir'): the NVVM backend only supports "
                                "target_type=\"ptx\" or \"ltoir\"");
  const std::vector<std::string> flags = o.as_nvvm_flags(target);
  const auto& t = detail::libnvvm();
  const detail::NvvmProgramHandle p = make_nvvm_program(t, program.code(), o);
  std::vector<const char*> argv;
  for (const auto& f : flags) argv.push_back(f.c_str());
  auto log = [&] {
    std::size_t size = 0;
    if (t.nvvmGetProgramLogSize(p.get(), &size) != detail::nvvm::SUCCESS || size <= 1) return std::string();
    std::string text(size, '\0');
    if (t.nvvmGetProgramLog(p.get(), text.data()) != detail::nvvm::SUCCESS) return std::string();
    while (!text.empty() && (text.back() == '\0' || text.back() == '\n')) text.pop_back();
    return text;
  };
  auto fail = [&](const char* call, detail::nvvm::Result r) {
    std::string l = log();
    std::string first = first_error_line(l);
    if (first.empty()) first = t.nvvmGetErrorString(r);
    throw CompileError(std::string(call) + " of '" + o.name + "' for " + flags.front().substr(6) +
                           " failed: " + first,
                       std::move(l));
  };
  if (auto r = t.nvvmVerifyProgram(p.get(), static_cast<int>(argv.size()), argv.data()); r != detail::nvvm::SUCCESS)
    fail("nvvmVerifyProgram", r);
  if (o.use_libdevice.value_or(false)) {
    const std::string libdevice = detail::libdevice_bitcode();
    detail::check_nvvm(t.nvvmLazyAddModuleToProgram(p.get(), libdevice.data(), libdevice.size(), "libdevice"),
                       "nvvmLazyAddModuleToProgram");
  }
  if (auto r = t.nvvmCompileProgram(p.get(), static_cast<int>(argv.size()), argv.data()); r != detail::nvvm::SUCCESS)
    fail("nvvmCompileProgram", r);
  std::size_t size = 0;
  detail::check_nvvm(t.nvvmGetCompiledResultSize(p.get(), &size), "nvvmGetCompiledResultSize");
  std::vector<std::byte> out(size);
  detail::check_nvvm(t.nvvmGetCompiledResult(p.get(), reinterpret_cast<char*>(out.data())), "nvvmGetCompiledResult");
  // PTX text comes with its terminating NUL, as NVRTC's does; LTO-IR is binary.
  return ObjectCode::from_bytes(std::move(out), target, o.name, {}, log());
}

// The flags as NVRTC takes them: the placeholder rendered at construction
// expanded into the toolkit's directories.
std::vector<std::string> expand_toolkit(const std::vector<std::string>& rendered) {
  static const std::string placeholder = "--include-path=<toolkit headers>";
  std::vector<std::string> out;
  out.reserve(rendered.size() + 2);
  for (const auto& f : rendered) {
    if (f != placeholder) {
      out.push_back(f);
      continue;
    }
    const auto& toolkit = toolkit_include_flags();
    out.insert(out.end(), toolkit.begin(), toolkit.end());
  }
  return out;
}

}  // namespace

ObjectCode detail::compile_program(const Program& program, CodeType target,
                                   const std::vector<std::string>& name_expressions,
                                   const ResolvedIncludes* includes) {
  if (program.is_closed()) detail::throw_closed("Program", "compile");
  const std::string& code_ = program.code();
  const std::string& code_type_ = program.code_type();
  const ProgramOptions& options_ = program.options();
  if (code_type_ == "nvvm") return compile_nvvm(program, target);
  if (code_type_ == "ptx") {
    if (target == CodeType::ptx) {
      return ObjectCode::from_ptx(std::string_view(code_), options_.name);
    }
    if (target == CodeType::cubin) {
      Linker linker({ObjectCode::from_ptx(std::string_view(code_), options_.name)}, detail::linker_options_for_ptx(options_));
      return linker.link(CodeType::cubin);
    }
    throw InvalidArgumentError("Unsupported target_type=\"" + std::string(to_string(target)) + "\" for " +
                                program.backend() + " (supported: 'cubin', 'ptx')");
  }

  if (target != CodeType::ptx && target != CodeType::cubin && target != CodeType::ltoir)
    throw InvalidArgumentError("Unsupported target_type=\"" + std::string(to_string(target)) +
                                "\" for NVRTC (supported: 'ptx', 'cubin', 'ltoir')");
  for (const auto& n : name_expressions) {
    if (n.empty()) throw InvalidArgumentError("Program::compile: a name expression is empty");
    if (n.find('\0') != std::string::npos)
      throw InvalidArgumentError("Program::compile: the name expression " + squote(n.substr(0, n.find('\0'))) +
                                  "... contains a NUL byte");
  }

  if (target == CodeType::cubin && options_.arch.starts_with("compute_"))
    throw InvalidArgumentError("Program::compile: arch " + squote(options_.arch) +
                                " makes PTX only; a cubin needs \"sm_<CC>\"");

  std::vector<std::string> flags;
  if (includes && !options_.pre_include.empty()) {
    ProgramOptions o = options_;  // the pre-included headers by the paths they were read from
    o.pre_include = includes->pre_include;
    flags = o.as_nvrtc_flags();
  } else {
    flags = expand_toolkit(program.nvrtc_flags());
  }
  const bool lto = options_.link_time_optimization.value_or(false);
  if (target == CodeType::ltoir && !lto) {
    // LTO-IR is what -dlto makes; unset means "do what the target needs".
    if (options_.link_time_optimization.has_value())
      throw InvalidArgumentError(
          "Program::compile: target \"ltoir\" needs link_time_optimization, which is set to false");
    flags.emplace_back("--dlink-time-opt");
  }
  // With link_time_optimization NVRTC makes LTO-IR only: a PTX target gets an
  // empty PTX (as from cuda.core); a cubin target would fail inside NVRTC, so
  // say why instead.
  if (target == CodeType::cubin && lto)
    throw InvalidArgumentError(
        "Program::compile: link_time_optimization makes LTO-IR; target \"cubin\" needs it unset or false (or "
        "compile to \"ltoir\" and link)");

  const auto& t = detail::nvrtc();
  check_arch_supported(options_.arch);
  const bool makes_pch = options_.pch.value_or(false) || !options_.create_pch.empty();
  detail::NvrtcProgramHandle p;
  // With resolved includes, NVRTC compiles exactly the header contents that
  // were read (and keyed), handed over by name.
  std::vector<const char*> header_names, header_sources;
  if (includes) {
    for (const auto& [name, text] : includes->headers) {
      header_names.push_back(name.c_str());
      header_sources.push_back(text.c_str());
    }
  }
  std::vector<const char*> argv;
  argv.reserve(flags.size());
  for (const auto& s : flags) argv.push_back(s.c_str());
  auto run = [&] {
    // A second run (after growing the PCH heap) makes a fresh program.
    detail::check_nvrtc(detail::create_nvrtc_program(t, includes ? includes->source.c_str() : code_.c_str(),
                                                     options_.name.c_str(), static_cast<int>(header_names.size()),
                                                     header_sources.data(), header_names.data(), p),
                        "nvrtcCreateProgram");
    for (const auto& n : name_expressions)
      detail::check_nvrtc(t.nvrtcAddNameExpression(p.get(), n.c_str()), "nvrtcAddNameExpression");
    return t.nvrtcCompileProgram(p.get(), static_cast<int>(argv.size()), argv.data());
  };
  nvrtcResult r = run();
  if (makes_pch && r == NVRTC_SUCCESS) {
    nvrtcResult pch = t.nvrtcGetPCHCreateStatus(p.get());
    if (pch == NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED) {
      // The header did not fit NVRTC's (process-wide) PCH heap: grow it to
      // what this one needs and compile again, as cuda.core does.
      std::size_t needed = 0;
      if (t.nvrtcGetPCHHeapSizeRequired(p.get(), &needed) == NVRTC_SUCCESS && needed > 0 &&
          t.nvrtcSetPCHHeapSize(needed) == NVRTC_SUCCESS) {
        r = run();
        if (r == NVRTC_SUCCESS) pch = t.nvrtcGetPCHCreateStatus(p.get());
      }
    }
    const PchStatus status = pch == NVRTC_SUCCESS                       ? PchStatus::created
                             : pch == NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED ? PchStatus::not_attempted
                                                                          : PchStatus::failed;
    program.state()->pch_status.store(static_cast<int>(status), std::memory_order_release);
  }
  std::string log = program_log(t, p.get());
  if (r == NVRTC_ERROR_COMPILATION || r == NVRTC_ERROR_INVALID_OPTION) {
    std::string first = first_error_line(log);
    if (first.empty()) first = t.nvrtcGetErrorString(r);
    throw CompileError("compiling '" + options_.name + "' for " + options_.arch + " failed: " + first,
                       std::move(log));
  }
  detail::check_nvrtc(r, "nvrtcCompileProgram");

  std::size_t size = 0;
  std::vector<std::byte> out;
  if (target == CodeType::ptx) {
    detail::check_nvrtc(t.nvrtcGetPTXSize(p.get(), &size), "nvrtcGetPTXSize");
    out.resize(size);
    detail::check_nvrtc(t.nvrtcGetPTX(p.get(), reinterpret_cast<char*>(out.data())), "nvrtcGetPTX");
  } else if (target == CodeType::cubin) {
    detail::check_nvrtc(t.nvrtcGetCUBINSize(p.get(), &size), "nvrtcGetCUBINSize");
    out.resize(size);
    detail::check_nvrtc(t.nvrtcGetCUBIN(p.get(), reinterpret_cast<char*>(out.data())), "nvrtcGetCUBIN");
  } else {
    detail::check_nvrtc(t.nvrtcGetLTOIRSize(p.get(), &size), "nvrtcGetLTOIRSize");
    out.resize(size);
    detail::check_nvrtc(t.nvrtcGetLTOIR(p.get(), reinterpret_cast<char*>(out.data())), "nvrtcGetLTOIR");
  }
  if (out.empty())
    throw CompileError("compiling '" + options_.name + "': NVRTC produced no " + std::string(to_string(target)) +
                           " (a compute_ arch gives PTX only; use sm_ for cubin)",
                       std::move(log));

  std::map<std::string, std::string> mapping;
  for (const auto& n : name_expressions) {
    const char* lowered = nullptr;
    detail::check_nvrtc(t.nvrtcGetLoweredName(p.get(), n.c_str(), &lowered), "nvrtcGetLoweredName");
    if (lowered) mapping.emplace(n, lowered);
  }
  return ObjectCode::from_bytes(std::move(out), target, options_.name, std::move(mapping),
                                std::move(log));
}

bool can_load_generated_ptx() noexcept {
  try {
    const auto& t = detail::nvrtc();
    return t.major * 1000 + t.minor * 10 <= detail::driver().version;
  } catch (...) {
    return false;
  }
}

std::pair<int, int> nvvm_version() {
  const auto& t = detail::libnvvm();
  return {t.major, t.minor};
}

std::array<int, 4> nvvm_ir_version() {
  const auto& t = detail::libnvvm();
  return {t.ir_major, t.ir_minor, t.dbg_major, t.dbg_minor};
}

std::pair<int, int> nvrtc_version() {
  const auto& t = detail::nvrtc();
  return {t.major, t.minor};
}

std::vector<std::string> nvrtc_supported_archs() {
  detail::nvrtc();  // throws LibraryNotFoundError when NVRTC is missing
  std::vector<std::string> out;
  for (int n : supported_arch_numbers()) out.push_back("sm_" + std::to_string(n));
  return out;
}

}  // namespace cucore
