#pragma once
// Finds the header names a CUDA C++ text asks for (#include "x.h", #include
// <x.h>, __has_include(...)) without running a preprocessor, as jitify does:
// NVRTC reports no dependencies and has no preprocess-only mode, so the program
// cache follows includes itself. Comments, string and raw-string literals and
// line splices are understood; conditionals are not (a directive inside #if 0
// is listed too). Internal to libcucore.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cucore::detail {

struct IncludeDirective {
  std::string name;          // the header name, without its delimiters
  bool angled = false;       // <name> rather than "name"
  bool has_include = false;  // a __has_include test rather than an #include
  // The header name's delimiters and text in the original source, [begin, end),
  // for rewriting; both 0 for a __has_include test.
  std::size_t begin = 0, end = 0;
  std::size_t line = 0;  // 1-based, for messages
};

struct IncludeScan {
  std::vector<IncludeDirective> directives;
  // Why the includes cannot all be followed (a computed "#include MACRO",
  // #include_next, #import, a header name broken by a line splice); empty if
  // they can.
  std::string unfollowable;
};

// Never throws for any input; the result's positions are inside `text`.
IncludeScan scan_includes(std::string_view text);

// `text` with the header name of each #include directive that has a
// replacement put in its place, keeping the delimiters ("x.h" -> "/abs/x.h").
// `replacements` runs parallel to `directives`; std::nullopt leaves one alone.
std::string rewrite_includes(std::string_view text, const std::vector<IncludeDirective>& directives,
                             const std::vector<std::optional<std::string>>& replacements);

}  // namespace cucore::detail
