#pragma once
// Run-time compilation, the first stage of the pipeline
//   source --Program::compile--> ObjectCode --Linker--> ObjectCode (linked)
//          --get_kernel--> Kernel (loaded) --launch
// Each stage is a value that can be cached or serialized.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <cucore/object_code.hpp>

namespace cucore {

class ProgramCache;

// Compiler options, with cuda.core's field names and order (the table in
// src/options/option_fields.inc renders them and checks this struct against
// the Python dataclass). Unset fields are not passed; boolean switches (debug,
// lineinfo, ...) are passed only when true, valued booleans (ftz, prec_div,
// ...) as "=true"/"=false". NVRTC compiles C++; libNVVM compiles NVVM IR and
// takes the subset of fields it supports (unsupported_by_nvvm()).
// Every field has an initializer, so designated initializers may name any
// subset without GCC's -Wmissing-field-initializers.
struct ProgramOptions {
  std::string name = "default_program";
  std::string arch{};  // "sm_90" (or "compute_90"); empty: the current device's
  std::optional<bool> relocatable_device_code{};
  std::optional<bool> extensible_whole_program{};
  std::optional<bool> debug{};
  std::optional<bool> lineinfo{};
  std::optional<bool> device_code_optimize{};
  std::vector<std::string> ptxas_options{};
  std::optional<int> max_register_count{};
  std::optional<bool> ftz{};
  std::optional<bool> prec_sqrt{};
  std::optional<bool> prec_div{};
  std::optional<bool> fma{};
  std::optional<bool> use_fast_math{};
  std::optional<bool> extra_device_vectorization{};
  std::optional<bool> link_time_optimization{};
  std::optional<bool> gen_opt_lto{};
  // "NAME" or {"NAME", "VALUE"}
  std::vector<std::variant<std::string, std::pair<std::string, std::string>>> define_macro{};
  std::vector<std::string> undefine_macro{};
  std::vector<std::string> include_path{};
  std::vector<std::string> pre_include{};
  std::optional<bool> no_source_include{};
  std::string std{};  // "c++17"; empty: NVRTC's default
  std::optional<bool> builtin_move_forward{};
  std::optional<bool> builtin_initializer_list{};
  std::optional<bool> disable_warnings{};
  std::optional<bool> restrict{};
  std::optional<bool> device_as_default_execution_space{};
  std::optional<bool> device_int128{};
  std::string optimization_info{};
  std::optional<bool> no_display_error_number{};
  std::vector<int> diag_error{};
  std::vector<int> diag_suppress{};
  std::vector<int> diag_warn{};
  std::optional<bool> brief_diagnostics{};
  std::string time{};  // timing output file (a side effect: refused by cache keys)
  std::optional<int> split_compile{};
  std::optional<bool> fdevice_syntax_only{};
  std::optional<bool> minimal{};
  std::optional<bool> no_cache{};
  // NVRTC writes a time trace (JSON) to this file (a side effect, like `time`).
  std::string fdevice_time_trace{};
  std::optional<bool> device_float128{};  // sm_100 and later
  std::string frandom_seed{};
  std::string ofast_compile{};  // "0", "min", "mid" or "max"
  std::optional<bool> pch{};
  std::string create_pch{};
  std::string use_pch{};
  std::string pch_dir{};
  std::optional<bool> pch_verbose{};
  std::optional<bool> pch_messages{};
  std::optional<bool> instantiate_templates_in_pch{};
  // NVVM only: more modules compiled with the program, as (name, NVVM IR text
  // or bitcode); and libdevice (the toolkit's nvvm/libdevice) linked lazily.
  std::vector<std::pair<std::string, std::string>> extra_sources{};
  std::optional<bool> use_libdevice{};
  std::optional<bool> numba_debug{};  // Numba's debug-information layout (NVRTC 13.2 and later)
  // Whether the toolkit's headers (CCCL, then the CUDA include directory) are
  // put on the include path, after include_path, so <cuda/std/...>, <cub/...>
  // and <thrust/...> work with no include path given.
  bool use_toolkit_headers = true;

  // Checks every field (throws std::invalid_argument naming it) and renders the
  // NVRTC flags, exactly as they reach the compiler. `arch` must be resolved
  // (non-empty) by then: Program does that. Deterministic: the cache key uses it.
  std::vector<std::string> as_nvrtc_flags() const;
  // The fields set that libNVVM does not support (cuda.core's list), in order.
  std::vector<std::string> unsupported_by_nvvm() const;
  // libNVVM's flags ("-arch=compute_90", "-g", "-opt=3", "-ftz=1", ...), plus
  // "-gen-lto" for an LTO-IR target. Throws std::invalid_argument naming the
  // unsupported fields set, as unsupported_by_nvvm() lists them.
  std::vector<std::string> as_nvvm_flags(std::optional<CodeType> target = std::nullopt) const;
};

namespace detail {
struct ProgramState;
}

// What became of a precompiled header the last compile was asked to make
// (cuda.core's PCHStatusType): "created", "not_attempted" or "failed".
enum class PchStatus : std::uint8_t { created, not_attempted, failed };
std::string_view to_string(PchStatus status) noexcept;

class Program {
 public:
  // code_type: "c++" (NVRTC), "ptx" (assembled through the linker) or "nvvm"
  // (NVVM IR text or bitcode, through libNVVM), in any case. An empty
  // options.arch becomes the current device's ("sm_90"); with no usable device
  // that is std::invalid_argument asking for arch. Options are validated and
  // NVRTC's flags rendered here, once.
  explicit Program(std::string code, std::string code_type = "c++", ProgramOptions options = {});

  // target: ptx, cubin or ltoir for C++ (ltoir adds --dlink-time-opt when
  // link_time_optimization is unset); cubin (linked) or ptx (the source as is)
  // for PTX; ptx or ltoir for NVVM. Name expressions ("saxpy<float>") are
  // registered and their lowered names kept, so get_kernel("saxpy<float>")
  // works (C++ only; other code types ignore them, as cuda.core). Compiler
  // errors throw CompileError (what(): the first error line; log(): all of
  // it); a successful compile's warnings are the result's compile_log(). Each
  // call runs the compiler afresh, so concurrent calls are safe.
  ObjectCode compile(CodeType target, std::vector<std::string> name_expressions = {}) const;
  // Through a cache: a hit returns the stored object with no compiler call.
  ObjectCode compile(CodeType target, std::vector<std::string> name_expressions, ProgramCache* cache) const;

  const std::string& code() const noexcept { return code_; }
  const std::string& code_type() const noexcept { return code_type_; }
  // Options with `arch` resolved.
  const ProgramOptions& options() const noexcept { return options_; }
  // "NVRTC" for C++, "NVVM" for NVVM IR; for PTX the linker's: "nvJitLink" or
  // "driver" (as cuda.core)
  std::string backend() const;
  // The NVRTC flags as rendered at construction (the toolkit's header
  // directories as one placeholder, "--include-path=<toolkit headers>").
  const std::vector<std::string>& nvrtc_flags() const noexcept;

  // The compiler's own program for this source, made on first call (an
  // nvrtcProgram for C++, an nvvmProgram holding the modules for NVVM; null
  // for PTX and once closed), destroyed by close() or with the last copy.
  // compile() does not use it: each compile makes its own.
  void* handle() const;
  // What became of the precompiled header the last compile() of this program
  // (or a copy) was asked to create; nullopt when none was asked (or not C++).
  std::optional<PchStatus> pch_status() const noexcept;
  // Releases handle(); a closed Program refuses compile() with ClosedError.
  // Idempotent; shared by copies.
  void close() noexcept;
  bool is_closed() const noexcept;

  // Internal: the state copies share.
  const std::shared_ptr<detail::ProgramState>& state() const noexcept { return state_; }

 private:
  std::string code_;
  std::string code_type_;
  ProgramOptions options_;
  std::shared_ptr<detail::ProgramState> state_;
};

// Whether the driver can load the PTX this NVRTC makes (the driver's CUDA
// version is at least NVRTC's); false without a driver or NVRTC.
bool can_load_generated_ptx() noexcept;

// libNVVM's version as (major, minor), and the NVVM IR version it reads as
// (major, minor, debug major, debug minor). Throw LibraryNotFoundError when
// libNVVM is missing.
std::pair<int, int> nvvm_version();
std::array<int, 4> nvvm_ir_version();

// NVRTC's version as (major, minor); the architectures it can target ("sm_90" ...).
std::pair<int, int> nvrtc_version();
std::vector<std::string> nvrtc_supported_archs();

}  // namespace cucore
