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
#include "loader/toolkit.hpp"

namespace cucore {
namespace {

[[noreturn]] void invalid(const char* field, const std::string& why) {
  throw std::invalid_argument(std::string("ProgramOptions::") + field + ": " + why);
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

const char* boolean(bool b) { return b ? "true" : "false"; }


// Owns one nvrtcProgram; destroyed on every path.
struct NvrtcProgram {
  nvrtcProgram prog = nullptr;
  const detail::NvrtcTable& t;
  explicit NvrtcProgram(const detail::NvrtcTable& table) : t(table) {}
  NvrtcProgram(const NvrtcProgram&) = delete;
  NvrtcProgram& operator=(const NvrtcProgram&) = delete;
  ~NvrtcProgram() {
    if (prog) t.nvrtcDestroyProgram(&prog);
  }
};

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
    throw std::invalid_argument(
        std::string("ProgramOptions::arch is empty and the current device's architecture could not be read (") +
        e.what() + "); set ProgramOptions::arch, e.g. \"sm_90\"");
  }
}

LinkerOptions linker_options_for_ptx(const ProgramOptions& o) {
  return LinkerOptions{
      .name = o.name,
      .arch = o.arch,
      .max_register_count = o.max_register_count,
      .time = o.time.empty() ? std::optional<bool>() : std::optional<bool>(true),
      .link_time_optimization = o.link_time_optimization,
      .debug = o.debug,
      .lineinfo = o.lineinfo,
      .ftz = o.ftz,
      .prec_div = o.prec_div,
      .prec_sqrt = o.prec_sqrt,
      .fma = o.fma,
      .ptxas_options = o.ptxas_options,
      .split_compile = o.split_compile,
      .no_cache = o.no_cache,
  };
}

}  // namespace

namespace {
// How the call in progress on this thread renders the toolkit's directories
// (set by detail::nvrtc_flags around as_nvrtc_flags).
thread_local detail::ToolkitFlags t_toolkit_flags = detail::ToolkitFlags::paths;
}  // namespace

std::vector<std::string> detail::nvrtc_flags(const ProgramOptions& options, ToolkitFlags toolkit) {
  struct Restore {
    ToolkitFlags before = t_toolkit_flags;
    ~Restore() { t_toolkit_flags = before; }
  } restore;
  t_toolkit_flags = toolkit;
  return options.as_nvrtc_flags();
}

std::vector<std::string> ProgramOptions::as_nvrtc_flags() const {
  // Validate everything first, so no half-rendered state escapes.
  check_arch(arch);
  if (max_register_count && *max_register_count <= 0)
    invalid("max_register_count", "must be positive, got " + std::to_string(*max_register_count));
  if (split_compile && *split_compile < 0)
    invalid("split_compile", "must be >= 0 (0: all processors), got " + std::to_string(*split_compile));
  if (!std.empty()) {
    static constexpr const char* kStd[] = {"c++03", "c++11", "c++14", "c++17", "c++20"};
    if (std::none_of(std::begin(kStd), std::end(kStd), [&](const char* s) { return std == s; }))
      invalid("std", squote(std) + " is not a dialect NVRTC knows (c++03, c++11, c++14, c++17, c++20)");
  }
  if (!ofast_compile.empty() && ofast_compile != "0" && ofast_compile != "min" && ofast_compile != "mid" &&
      ofast_compile != "max")
    invalid("ofast_compile", squote(ofast_compile) + " is not one of \"0\", \"min\", \"mid\", \"max\"");
  for (const auto& m : define_macro) {
    if (const auto* s = std::get_if<std::string>(&m)) {
      const std::string_view macro = std::string_view(*s).substr(0, s->find('='));
      if (!is_macro_name(macro)) invalid("define_macro", squote(*s) + " does not start with a macro name");
    } else {
      const auto& macro = std::get<std::pair<std::string, std::string>>(m).first;
      if (!is_macro_name(macro)) invalid("define_macro", squote(macro) + " is not a macro name");
    }
  }
  for (const auto& m : undefine_macro)
    if (!is_identifier(m)) invalid("undefine_macro", squote(m) + " is not a macro name");
  check_entries("ptxas_options", ptxas_options);
  check_entries("include_path", include_path);
  check_entries("pre_include", pre_include);
  check_entries("undefine_macro", undefine_macro);
  for (const auto& m : define_macro) {
    if (const auto* s = std::get_if<std::string>(&m)) {
      check_no_nul("define_macro", *s);
    } else {
      check_no_nul("define_macro", std::get<std::pair<std::string, std::string>>(m).first);
      check_no_nul("define_macro", std::get<std::pair<std::string, std::string>>(m).second);
    }
  }
  for (const auto& [field, value] : {std::pair<const char*, const std::string*>{"name", &name},
                                     {"optimization_info", &optimization_info},
                                     {"time", &time},
                                     {"frandom_seed", &frandom_seed},
                                     {"create_pch", &create_pch},
                                     {"use_pch", &use_pch},
                                     {"pch_dir", &pch_dir}})
    check_no_nul(field, *value);
  check_diag("diag_error", diag_error);
  check_diag("diag_suppress", diag_suppress);
  check_diag("diag_warn", diag_warn);
  if (!create_pch.empty() && !use_pch.empty())
    invalid("use_pch", "cannot be combined with create_pch (one program either makes or uses a header)");

  std::vector<std::string> f;
  f.reserve(16);
  f.push_back("-arch=" + arch);
  if (relocatable_device_code) f.push_back(std::string("--relocatable-device-code=") + boolean(*relocatable_device_code));
  if (extensible_whole_program.value_or(false)) f.emplace_back("--extensible-whole-program");
  if (debug.value_or(false)) f.emplace_back("--device-debug");
  if (lineinfo.value_or(false)) f.emplace_back("--generate-line-info");
  // NVRTC takes only "--dopt=on"; off is its default without -G.
  if (device_code_optimize.value_or(false)) f.emplace_back("--dopt=on");
  for (const auto& o : ptxas_options) f.push_back("--ptxas-options=" + o);
  if (max_register_count) f.push_back("--maxrregcount=" + std::to_string(*max_register_count));
  if (ftz) f.push_back(std::string("--ftz=") + boolean(*ftz));
  if (prec_sqrt) f.push_back(std::string("--prec-sqrt=") + boolean(*prec_sqrt));
  if (prec_div) f.push_back(std::string("--prec-div=") + boolean(*prec_div));
  if (fma) f.push_back(std::string("--fmad=") + boolean(*fma));
  if (use_fast_math.value_or(false)) f.emplace_back("--use_fast_math");
  if (extra_device_vectorization.value_or(false)) f.emplace_back("--extra-device-vectorization");
  if (link_time_optimization.value_or(false)) f.emplace_back("--dlink-time-opt");
  if (gen_opt_lto.value_or(false)) f.emplace_back("--gen-opt-lto");
  for (const auto& m : define_macro) {
    if (const auto* s = std::get_if<std::string>(&m))
      f.push_back("--define-macro=" + *s);
    else {
      const auto& [macro, value] = std::get<std::pair<std::string, std::string>>(m);
      f.push_back("--define-macro=" + macro + "=" + value);
    }
  }
  for (const auto& m : undefine_macro) f.push_back("--undefine-macro=" + m);
  for (const auto& p : include_path) f.push_back("--include-path=" + p);
  if (use_toolkit_headers) {
    // After the caller's paths, so their headers win.
    if (t_toolkit_flags == detail::ToolkitFlags::placeholder) {
      f.emplace_back("--include-path=<toolkit headers>");
    } else {
      static const std::vector<std::string> toolkit = [] {
        std::vector<std::string> dirs;
        if (auto d = pathfinder::cccl_include_dir()) dirs.push_back("--include-path=" + *d);
        if (auto d = pathfinder::cuda_include_dir()) dirs.push_back("--include-path=" + *d);
        return dirs;
      }();
      f.insert(f.end(), toolkit.begin(), toolkit.end());
    }
  }
  for (const auto& h : pre_include) f.push_back("--pre-include=" + h);
  if (no_source_include.value_or(false)) f.emplace_back("--no-source-include");
  if (!std.empty()) f.push_back("--std=" + std);
  if (builtin_move_forward) f.push_back(std::string("--builtin-move-forward=") + boolean(*builtin_move_forward));
  if (builtin_initializer_list)
    f.push_back(std::string("--builtin-initializer-list=") + boolean(*builtin_initializer_list));
  if (disable_warnings.value_or(false)) f.emplace_back("--disable-warnings");
  if (restrict.value_or(false)) f.emplace_back("--restrict");
  if (device_as_default_execution_space.value_or(false)) f.emplace_back("--device-as-default-execution-space");
  if (device_int128.value_or(false)) f.emplace_back("--device-int128");
  if (device_float128.value_or(false)) f.emplace_back("--device-float128");
  if (!optimization_info.empty()) f.push_back("--optimization-info=" + optimization_info);
  if (no_display_error_number.value_or(false)) f.emplace_back("--no-display-error-number");
  for (int n : diag_error) f.push_back("--diag-error=" + std::to_string(n));
  for (int n : diag_suppress) f.push_back("--diag-suppress=" + std::to_string(n));
  for (int n : diag_warn) f.push_back("--diag-warn=" + std::to_string(n));
  if (brief_diagnostics) f.push_back(std::string("--brief-diagnostics=") + boolean(*brief_diagnostics));
  if (!time.empty()) f.push_back("--time=" + time);
  if (split_compile) f.push_back("--split-compile=" + std::to_string(*split_compile));
  if (fdevice_syntax_only.value_or(false)) f.emplace_back("--fdevice-syntax-only");
  if (minimal.value_or(false)) f.emplace_back("--minimal");
  if (no_cache.value_or(false)) f.emplace_back("--no-cache");
  if (fdevice_time_trace.value_or(false)) f.emplace_back("--fdevice-time-trace");
  if (!frandom_seed.empty()) f.push_back("--frandom-seed=" + frandom_seed);
  if (!ofast_compile.empty()) f.push_back("--Ofast-compile=" + ofast_compile);
  if (pch.value_or(false)) f.emplace_back("--pch");
  if (!create_pch.empty()) f.push_back("--create-pch=" + create_pch);
  if (!use_pch.empty()) f.push_back("--use-pch=" + use_pch);
  if (!pch_dir.empty()) f.push_back("--pch-dir=" + pch_dir);
  if (pch_verbose) f.push_back(std::string("--pch-verbose=") + boolean(*pch_verbose));
  if (pch_messages) f.push_back(std::string("--pch-messages=") + boolean(*pch_messages));
  if (instantiate_templates_in_pch)
    f.push_back(std::string("--instantiate-templates-in-pch=") + boolean(*instantiate_templates_in_pch));
  return f;
}

Program::Program(std::string code, std::string code_type, ProgramOptions options)
    : code_(std::move(code)), code_type_(std::move(code_type)), options_(std::move(options)) {
  // cuda.core accepts any case ("C++", "PTX").
  std::transform(code_type_.begin(), code_type_.end(), code_type_.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (code_type_ != "c++" && code_type_ != "ptx")
    throw std::invalid_argument("Program: unknown code_type " + squote(code_type_) + " (valid: \"c++\", \"ptx\")");
  // Compilers read the source as a C string: a NUL would silently cut it short.
  if (auto at = code_.find('\0'); at != std::string::npos)
    throw std::invalid_argument("Program: the source contains a NUL byte at offset " + std::to_string(at));
  if (options_.arch.empty()) options_.arch = resolve_arch_from_device();
  if (code_type_ == "c++")  // fail on bad options now, not at compile (the toolkit's directories can wait)
    (void)detail::nvrtc_flags(options_, detail::ToolkitFlags::placeholder);
  else
    (void)linker_options_for_ptx(options_).as_nvjitlink_flags();
}

std::string Program::backend() const {
  if (code_type_ == "c++") return "NVRTC";
  try {
    return detail::linker_backend(options_.link_time_optimization.value_or(false));
  } catch (...) {
    return "nvJitLink";  // the only backend that could do it
  }
}

ObjectCode Program::compile(CodeType target, std::vector<std::string> name_expressions) const {
  return detail::compile_program(*this, target, name_expressions, nullptr);
}

ObjectCode detail::compile_program(const Program& program, CodeType target,
                                   const std::vector<std::string>& name_expressions,
                                   const ResolvedIncludes* includes) {
  const std::string& code_ = program.code();
  const std::string& code_type_ = program.code_type();
  const ProgramOptions& options_ = program.options();
  if (code_type_ == "ptx") {
    if (!name_expressions.empty())
      throw std::invalid_argument("Program::compile: name expressions need C++ source; this program is PTX");
    if (target == CodeType::ptx) {
      return ObjectCode::from_ptx(std::string_view(code_), options_.name);
    }
    if (target == CodeType::cubin) {
      Linker linker({ObjectCode::from_ptx(std::string_view(code_), options_.name)}, linker_options_for_ptx(options_));
      return linker.link(CodeType::cubin);
    }
    throw std::invalid_argument("Program::compile: unknown target " + squote(to_string(target)) +
                                " for PTX (valid: \"cubin\", \"ptx\")");
  }

  if (target != CodeType::ptx && target != CodeType::cubin && target != CodeType::ltoir)
    throw std::invalid_argument("Program::compile: unknown target " + squote(to_string(target)) +
                                " (valid: \"ptx\", \"cubin\", \"ltoir\")");
  for (const auto& n : name_expressions) {
    if (n.empty()) throw std::invalid_argument("Program::compile: a name expression is empty");
    if (n.find('\0') != std::string::npos)
      throw std::invalid_argument("Program::compile: the name expression " + squote(n.substr(0, n.find('\0'))) +
                                  "... contains a NUL byte");
  }

  if (target == CodeType::cubin && options_.arch.starts_with("compute_"))
    throw std::invalid_argument("Program::compile: arch " + squote(options_.arch) +
                                " makes PTX only; a cubin needs \"sm_<CC>\"");

  std::vector<std::string> flags;
  if (includes && !options_.pre_include.empty()) {
    ProgramOptions o = options_;  // the pre-included headers by the paths they were read from
    o.pre_include = includes->pre_include;
    flags = o.as_nvrtc_flags();
  } else {
    flags = options_.as_nvrtc_flags();
  }
  const bool lto = options_.link_time_optimization.value_or(false);
  if (target == CodeType::ltoir && !lto) {
    // LTO-IR is what -dlto makes; unset means "do what the target needs".
    if (options_.link_time_optimization.has_value())
      throw std::invalid_argument(
          "Program::compile: target \"ltoir\" needs link_time_optimization, which is set to false");
    flags.emplace_back("--dlink-time-opt");
  } else if (target != CodeType::ltoir && lto) {
    throw std::invalid_argument(std::string("Program::compile: link_time_optimization makes LTO-IR; target ") +
                                squote(to_string(target)) + " needs it unset or false (or compile to \"ltoir\" and link)");
  }

  const auto& t = detail::nvrtc();
  check_arch_supported(options_.arch);
  NvrtcProgram p(t);
  // With resolved includes, NVRTC compiles exactly the header contents that
  // were read (and keyed), handed over by name.
  std::vector<const char*> header_names, header_sources;
  if (includes) {
    for (const auto& [name, text] : includes->headers) {
      header_names.push_back(name.c_str());
      header_sources.push_back(text.c_str());
    }
  }
  detail::check_nvrtc(t.nvrtcCreateProgram(&p.prog, includes ? includes->source.c_str() : code_.c_str(),
                                           options_.name.c_str(), static_cast<int>(header_names.size()),
                                           header_sources.data(), header_names.data()),
                      "nvrtcCreateProgram");
  for (const auto& n : name_expressions)
    detail::check_nvrtc(t.nvrtcAddNameExpression(p.prog, n.c_str()), "nvrtcAddNameExpression");

  std::vector<const char*> argv;
  argv.reserve(flags.size());
  for (const auto& s : flags) argv.push_back(s.c_str());
  const nvrtcResult r = t.nvrtcCompileProgram(p.prog, static_cast<int>(argv.size()), argv.data());
  std::string log = program_log(t, p.prog);
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
    detail::check_nvrtc(t.nvrtcGetPTXSize(p.prog, &size), "nvrtcGetPTXSize");
    out.resize(size);
    detail::check_nvrtc(t.nvrtcGetPTX(p.prog, reinterpret_cast<char*>(out.data())), "nvrtcGetPTX");
  } else if (target == CodeType::cubin) {
    detail::check_nvrtc(t.nvrtcGetCUBINSize(p.prog, &size), "nvrtcGetCUBINSize");
    out.resize(size);
    detail::check_nvrtc(t.nvrtcGetCUBIN(p.prog, reinterpret_cast<char*>(out.data())), "nvrtcGetCUBIN");
  } else {
    detail::check_nvrtc(t.nvrtcGetLTOIRSize(p.prog, &size), "nvrtcGetLTOIRSize");
    out.resize(size);
    detail::check_nvrtc(t.nvrtcGetLTOIR(p.prog, reinterpret_cast<char*>(out.data())), "nvrtcGetLTOIR");
  }
  if (out.empty())
    throw CompileError("compiling '" + options_.name + "': NVRTC produced no " + std::string(to_string(target)) +
                           " (a compute_ arch gives PTX only; use sm_ for cubin)",
                       std::move(log));

  std::map<std::string, std::string> mapping;
  for (const auto& n : name_expressions) {
    const char* lowered = nullptr;
    detail::check_nvrtc(t.nvrtcGetLoweredName(p.prog, n.c_str(), &lowered), "nvrtcGetLoweredName");
    if (lowered) mapping.emplace(n, lowered);
  }
  return ObjectCode::from_bytes(std::move(out), target, options_.name, std::move(mapping),
                                std::move(log));
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
