#pragma once
// Shared between program.cpp and cache.cpp.
#include <cucore/linker.hpp>
#include <cucore/program.hpp>

#include <filesystem>

#include "common.hpp"

namespace cucore::python {

struct PyProgram {
  cucore::Program program;  // closing, the handle and the PCH status are libcucore's
};


cucore::ProgramOptions program_options(nb::handle options);
// Whether `options` (a ProgramOptions, a dict of its fields, or None) gives
// `field` a value other than None, whatever it is (cuda.core refuses some
// options by that alone: extra_sources outside NVVM, create_pch="" in a key).
bool option_given(nb::handle options, const char* field);
cucore::LinkerOptions linker_options(nb::handle options);
std::vector<std::string> name_expressions_arg(nb::handle names);
// A code type as Python spells it ("cubin", in any case) as a CodeType;
// ValueError naming `what` for any other string.
cucore::CodeType code_type_arg(std::string name, const char* what);
// A str or os.PathLike giving a str (TypeError naming `what` otherwise).
std::filesystem::path path_arg(nb::handle v, const char* what);
// Program.compile(target_type, name_expressions=(), logs=None, *, cache=None)
nb::object program_compile(PyProgram& p, std::string target, nb::handle name_expressions, nb::handle logs,
                           nb::handle cache);

}  // namespace cucore::python
