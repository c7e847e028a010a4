#pragma once
// Linking: several ObjectCodes (cubin, PTX, LTO-IR, fatbin, object, library)
// into one cubin (or PTX, after link-time optimization). nvJitLink does it when
// present; otherwise the driver's linker (cuLink*), which cannot do LTO.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <cucore/object_code.hpp>

namespace cucore {

// nvJitLink options, with cuda.core's field names and order (rendered from the
// table in src/options/option_fields.inc). Unset fields are not passed.
// Every field has an initializer, so designated initializers may name any
// subset without GCC's -Wmissing-field-initializers.
struct LinkerOptions {
  std::string name = "<default linker>";  // the linked ObjectCode's name
  std::string arch{};                     // "sm_90"; empty: the current device's
  std::optional<int> max_register_count{};
  std::optional<bool> time{};     // timing in the info log
  std::optional<bool> verbose{};  // verbose info log
  std::optional<bool> link_time_optimization{};
  std::optional<bool> ptx{};                 // emit PTX (needs link_time_optimization)
  std::optional<int> optimization_level{};   // 0 or 3
  std::optional<bool> debug{};
  std::optional<bool> lineinfo{};
  std::optional<bool> ftz{};
  std::optional<bool> prec_div{};
  std::optional<bool> prec_sqrt{};
  std::optional<bool> fma{};
  std::vector<std::string> kernels_used{};    // the rest may be dropped
  std::vector<std::string> variables_used{};  // the rest may be dropped
  std::optional<bool> optimize_unused_variables{};
  std::vector<std::string> ptxas_options{};
  std::optional<int> split_compile{};           // threads; 0: all processors
  std::optional<int> split_compile_extended{};  // threads, LTO only; 0: all processors
  std::optional<bool> no_cache{};
  std::optional<bool> numba_debug{};  // Numba's debug-information layout (newer nvJitLink)

  // Checks every field (throws std::invalid_argument naming it) and renders
  // nvJitLink's flags ("-arch=sm_90", "-lto", "-ftz=true", "-Xptxas=-v", ...) in
  // a fixed order; with link_time_optimization the valued booleans are
  // "=1"/"=0", which libNVVM needs. `arch` must be set by then (Linker
  // resolves an empty one).
  std::vector<std::string> as_nvjitlink_flags() const;
};

// Not thread-safe: one Linker is used by one thread at a time (each link()
// runs the whole link afresh, so a Linker can link again, e.g. after a failure).
class Linker {
 public:
  // At least one object; the backend is chosen here, and options that the
  // chosen backend cannot honour are std::invalid_argument. LTO-IR inputs or
  // link-time optimization with no usable nvJitLink: FeatureUnavailableError.
  explicit Linker(std::vector<ObjectCode> object_codes, LinkerOptions options = {});

  // target: CodeType::cubin, or CodeType::ptx (which needs options.ptx).
  // Failures throw CompileError whose log() is the linker's error log; a
  // closed Linker throws ClosedError.
  ObjectCode link(CodeType target);
  // Lets go of the inputs (idempotent); the logs of the last link() stay.
  void close() noexcept;
  bool is_closed() const noexcept { return closed_; }

  // The logs of the last link() (empty before it).
  const std::string& error_log() const noexcept { return error_log_; }
  const std::string& info_log() const noexcept { return info_log_; }

  const std::string& backend() const noexcept { return backend_; }  // "nvJitLink" or "driver"
  const LinkerOptions& options() const noexcept { return options_; }  // arch resolved
  const std::vector<ObjectCode>& object_codes() const noexcept { return codes_; }

 private:
  std::vector<ObjectCode> codes_;
  LinkerOptions options_;
  std::string backend_;
  std::string error_log_, info_log_;
  bool closed_ = false;
};

namespace detail {
// The backend a Linker would use now: "nvJitLink" when it loads and its major
// version matches the driver's (or there is no driver), else "driver". With
// `needs_nvjitlink` (LTO) and no such nvJitLink: FeatureUnavailableError.
std::string linker_backend(bool needs_nvjitlink);
}  // namespace detail

}  // namespace cucore
