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

// "error:" (NVRTC), "error   :" (nvJitLink) or "ERROR" -- not a warning that
// merely mentions a variable named error_count.
inline bool reports_error(std::string_view line) {
  if (line.find("ERROR") != std::string_view::npos) return true;
  for (std::size_t at = line.find("error"); at != std::string_view::npos; at = line.find("error", at + 1)) {
    std::size_t after = line.find_first_not_of(' ', at + 5);
    if (after != std::string_view::npos && line[after] == ':') return true;
  }
  return false;
}

// The first line of a compiler or linker log that reports an error, e.g.
// NVRTC's "default_program(3): error: expected a \";\"" (it names file and
// line); else the first non-empty line.
inline std::string first_error_line(const std::string& log) {
  std::size_t start = 0;
  std::string first_nonempty;
  while (start < log.size()) {
    std::size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    std::string_view line(log.data() + start, end - start);
    if (reports_error(line)) return std::string(line);
    if (first_nonempty.empty() && line.find_first_not_of(" \t\r") != std::string_view::npos)
      first_nonempty = std::string(line);
    start = end + 1;
  }
  return first_nonempty;
}

}  // namespace cucore::detail
