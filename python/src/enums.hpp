#pragma once
// cuda.core's option enums are StrEnums (cucore.typing): their value is the
// string; a plain string is taken as is.
#include "common.hpp"

namespace cucore::python {

inline std::string enum_value(nb::handle v) {
  if (nb::hasattr(v, "value")) return nb::cast<std::string>(nb::str(v.attr("value")));
  return nb::cast<std::string>(nb::str(v));
}

}  // namespace cucore::python
