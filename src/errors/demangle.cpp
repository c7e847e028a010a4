#include "errors/demangle.hpp"

#include <cxxabi.h>

#include <cstdlib>

namespace cucore::detail {

std::string demangle(const char* name) {
  if (!name) return {};
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string result = (status == 0 && out) ? out : name;
  std::free(out);
  return result;
}

}  // namespace cucore::detail
