#pragma once
// Program::compile's body, for the cache to call with resolved includes.
// Internal to libcucore.
#include <cucore/program.hpp>

#include <string>
#include <vector>

namespace cucore::detail {

struct ResolvedIncludes;

// ProgramOptions::as_nvrtc_flags, with the toolkit's include directories as
// they are (paths: for NVRTC) or as one placeholder (for validating options and
// for cache keys, whose toolchain identity names the toolkit): the placeholder
// spares finding the directories, which a warm start need never do.
enum class ToolkitFlags { paths, placeholder };
std::vector<std::string> nvrtc_flags(const ProgramOptions& options, ToolkitFlags toolkit);

// Compiles `program` as Program::compile does. With `includes`, NVRTC compiles
// includes->source and gets includes->headers through nvrtcCreateProgram's
// header list (and the pre-included headers by their resolved paths).
ObjectCode compile_program(const Program& program, CodeType target, const std::vector<std::string>& name_expressions,
                           const ResolvedIncludes* includes);

}  // namespace cucore::detail
