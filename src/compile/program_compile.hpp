#pragma once
// Program::compile's body, for the cache to call with resolved includes.
// Internal to libcucore.
#include <cucore/program.hpp>

#include <string>
#include <vector>

namespace cucore::detail {

struct ResolvedIncludes;

// Compiles `program` as Program::compile does. With `includes`, NVRTC compiles
// includes->source and gets includes->headers through nvrtcCreateProgram's
// header list (and the pre-included headers by their resolved paths).
ObjectCode compile_program(const Program& program, CodeType target, const std::vector<std::string>& name_expressions,
                           const ResolvedIncludes* includes);

}  // namespace cucore::detail
