#pragma once
// Small pieces Program and Linker share: architecture names and quoting.
#include <string>
#include <string_view>

namespace cucore::detail {

// "sm_90", "sm_90a", "sm_100f", "compute_90": the number is what NVRTC and
// nvJitLink list as supported.
struct ArchParts {
  bool ok = false;
  bool compute = false;
  int number = 0;
  char suffix = 0;  // 'a', 'f' or 0
};

inline ArchParts parse_arch(std::string_view arch) {
  ArchParts p;
  std::string_view rest;
  if (arch.starts_with("sm_")) {
    rest = arch.substr(3);
  } else if (arch.starts_with("compute_")) {
    rest = arch.substr(8);
    p.compute = true;
  } else {
    return {};
  }
  if (!rest.empty() && (rest.back() == 'a' || rest.back() == 'f')) {
    p.suffix = rest.back();
    rest.remove_suffix(1);
  }
  if (rest.size() < 2 || rest.size() > 3) return {};
  for (char c : rest) {
    if (c < '0' || c > '9') return {};
    p.number = p.number * 10 + (c - '0');
  }
  p.ok = true;
  return p;
}

// 'text', for messages.
inline std::string squote(std::string_view s) {
  // Appended piecewise: GCC 12 reports a false -Wrestrict for "'" + std::string.
  std::string r(1, '\'');
  r.append(s);
  r += '\'';
  return r;
}

}  // namespace cucore::detail
