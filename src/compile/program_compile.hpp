#pragma once
// Program::compile's body, for the cache to call with resolved includes.
// Internal to libcucore.
#include <cucore/linker.hpp>
#include <cucore/program.hpp>

#include <atomic>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include "handles/compiler_handles.hpp"

namespace cucore::detail {

// What copies of a Program share: the flags rendered once, the compiler's own
// program behind Program::handle(), the last PCH outcome, the closed state.
struct ProgramState {
  enum class Kind { nvrtc, nvvm, linker } kind = Kind::linker;
  std::vector<std::string> nvrtc_flags;  // C++ only; the toolkit's directories as a placeholder
  std::atomic<int> pch_status{-1};       // a PchStatus, or -1 for none
  std::atomic<bool> closed{false};
  std::mutex handle_mutex;
  // Program::handle()'s program (for PTX a linker of the source, whose handle it gives), made on demand;
  // its box releases it.
  std::variant<std::monostate, NvrtcProgramHandle, NvvmProgramHandle, Linker> handle;

  ProgramState() = default;
  ProgramState(const ProgramState&) = delete;
  ProgramState& operator=(const ProgramState&) = delete;
  void release_handle() noexcept {
    std::lock_guard lock(handle_mutex);
    handle = std::monostate{};
  }
};

struct ResolvedIncludes;

// ProgramOptions' checks and NVRTC flags, with the toolkit's include
// directories as they are (paths: for NVRTC, what as_nvrtc_flags gives) or as
// one placeholder (for validating options and for cache keys, whose toolchain
// identity names the toolkit): the placeholder spares finding the directories,
// which a warm start need never do. The mode is an argument all the way down.
enum class ToolkitFlags { paths, placeholder };
std::vector<std::string> nvrtc_flags(const ProgramOptions& options, ToolkitFlags toolkit);

// The linker options a PTX Program is assembled with (cuda.core's translation:
// the fields the linker shares with NVRTC, as options_table.py marks them).
LinkerOptions linker_options_for_ptx(const ProgramOptions& options);

// Compiles `program` as Program::compile does. With `includes`, NVRTC compiles
// includes->source and gets includes->headers through nvrtcCreateProgram's
// header list (and the pre-included headers by their resolved paths).
ObjectCode compile_program(const Program& program, CodeType target, const std::vector<std::string>& name_expressions,
                           const ResolvedIncludes* includes);

// Program::compile through a cache: cache/ (a floor above) registers how, so
// compile/ names no cache code. (Registered when libcucore loads.)
using CompileThroughCache = ObjectCode (*)(const Program& program, CodeType target,
                                           std::vector<std::string> name_expressions, ProgramCache& cache);
void set_compile_through_cache(CompileThroughCache fn) noexcept;

// The directory NVRTC installs its bundled headers in (use_bundled_headers):
// nvrtc-bundled-headers under cucore's cache root, which cache/ (a floor above)
// keeps private; it registers how it is found. Throws when it cannot be used.
using BundledHeadersDir = std::string (*)();
void set_bundled_headers_dir(BundledHeadersDir fn) noexcept;
std::string bundled_headers_dir();

}  // namespace cucore::detail
