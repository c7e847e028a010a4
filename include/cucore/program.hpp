#pragma once
// Run-time compilation, the first stage of the pipeline
//   source --Program::compile--> ObjectCode --Linker--> ObjectCode (linked)
//          --get_kernel--> Kernel (loaded) --launch
// Each stage is a value that can be cached or serialized.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <cucore/object_code.hpp>

namespace cucore {

class ProgramCache;

// NVRTC options, with cuda.core's field names. Unset fields are not passed;
// boolean switches (debug, lineinfo, ...) are passed only when true, valued
// booleans (ftz, prec_div, ...) as "=true"/"=false".
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
  std::optional<bool> device_float128{};  // sm_100 and later
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
  // NVRTC writes a time trace to "<name>.json" in the working directory (a side
  // effect, like `time`).
  std::optional<bool> fdevice_time_trace{};
  std::string frandom_seed{};
  std::string ofast_compile{};  // "0", "min", "mid" or "max"
  std::optional<bool> pch{};
  std::string create_pch{};
  std::string use_pch{};
  std::string pch_dir{};
  std::optional<bool> pch_verbose{};
  std::optional<bool> pch_messages{};
  std::optional<bool> instantiate_templates_in_pch{};
  // Whether the toolkit's headers (CCCL, then the CUDA include directory) are
  // put on the include path, after include_path, so <cuda/std/...>, <cub/...>
  // and <thrust/...> work with no include path given.
  bool use_toolkit_headers = true;

  // Checks every field (throws std::invalid_argument naming it) and renders the
  // NVRTC flags, exactly as they reach the compiler. `arch` must be resolved
  // (non-empty) by then: Program does that. Deterministic: the cache key uses it.
  std::vector<std::string> as_nvrtc_flags() const;
};

class Program {
 public:
  // code_type: "c++" (NVRTC) or "ptx" (assembled through the linker). An empty
  // options.arch becomes the current device's ("sm_90"); with no usable device
  // that is std::invalid_argument asking for arch. Options are validated here.
  explicit Program(std::string code, std::string code_type = "c++", ProgramOptions options = {});

  // target: ptx, cubin or ltoir for C++ (ltoir adds --dlink-time-opt when
  // link_time_optimization is unset); cubin (linked) or ptx (the source as is)
  // for PTX. Name expressions ("saxpy<float>") are registered and their lowered
  // names kept, so get_kernel("saxpy<float>") works. Compiler errors throw
  // CompileError (what(): the first error line; log(): all of it); a
  // successful compile's warnings are the result's compile_log(). Each call
  // runs the compiler afresh, so concurrent calls are safe.
  ObjectCode compile(CodeType target, std::vector<std::string> name_expressions = {}) const;
  // Through a cache: a hit returns the stored object with no compiler call.
  ObjectCode compile(CodeType target, std::vector<std::string> name_expressions, ProgramCache* cache) const;

  const std::string& code() const noexcept { return code_; }
  const std::string& code_type() const noexcept { return code_type_; }
  // Options with `arch` resolved.
  const ProgramOptions& options() const noexcept { return options_; }
  // "NVRTC" for C++; for PTX the linker's: "nvJitLink" or "driver" (as cuda.core)
  std::string backend() const;

 private:
  std::string code_;
  std::string code_type_;
  ProgramOptions options_;
};

// NVRTC's version as (major, minor); the architectures it can target ("sm_90" ...).
std::pair<int, int> nvrtc_version();
std::vector<std::string> nvrtc_supported_archs();

}  // namespace cucore
