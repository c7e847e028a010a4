#pragma once
// Readable C++ type and symbol names for messages ("float const*" for
// typeid(const float*).name(), "scale<float>(float*, float, int)" for a
// mangled kernel symbol): on the lowest floor, so that every layer's errors
// can name the types they refuse.
#include <string>

namespace cucore::detail {

// The demangled name, or `name` itself where it is not a mangled name.
std::string demangle(const char* name);

}  // namespace cucore::detail
