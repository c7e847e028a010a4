// A lexer just deep enough to find include directives: translation phases 2
// (line splices) and 3 (comments, literals) of C++, then the directive lines.
#include "compile/include_scan.hpp"

#include <algorithm>
#include <iterator>
#include <utility>

namespace cucore::detail {
namespace {

bool ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || static_cast<unsigned char>(c) >= 0x80;
}
bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9'); }
bool digit(char c) { return c >= '0' && c <= '9'; }
bool hspace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

// The length of a line splice (backslash, then \n or \r\n) at text[k], or 0.
std::size_t splice_at(std::string_view text, std::size_t k) {
  if (text[k] != '\\') return 0;
  if (k + 1 < text.size() && text[k + 1] == '\n') return 2;
  if (k + 2 < text.size() && text[k + 1] == '\r' && text[k + 2] == '\n') return 3;
  return 0;
}

struct Lexer {
  // The text lexed: the original itself, or (when it has line splices) a copy
  // with them removed, copied run by run between the splices. A char per
  // push_back with a per-char offset map cost a warm cache hit more than the
  // rest of its key.
  std::string spliced;
  // For each splice, the logical offset where the text after it starts and
  // how many original chars were removed up to there (ascending).
  std::vector<std::pair<std::size_t, std::size_t>> jumps;
  std::string_view s, original;
  std::size_t i = 0;
  IncludeScan out;
  // Original line numbers, counted as the scan moves forward.
  std::size_t line_at = 0, line_no = 1;

  explicit Lexer(std::string_view text) : s(text), original(text) {
    std::size_t copied = 0, removed = 0;
    for (auto k = text.find('\\'); k != std::string_view::npos; k = text.find('\\', k + 1)) {
      const std::size_t n = splice_at(text, k);
      if (!n) continue;
      if (jumps.empty()) spliced.reserve(text.size());
      spliced.append(text.substr(copied, k - copied));
      removed += n;
      copied = k + n;
      jumps.emplace_back(copied - removed, removed);
      k = copied - 1;
    }
    if (jumps.empty()) return;
    spliced.append(text.substr(copied));
    s = spliced;
  }

  // The offset in the original of the lexed char at `logical`.
  std::size_t origin(std::size_t logical) const {
    auto after = std::upper_bound(jumps.begin(), jumps.end(), logical,
                                  [](std::size_t l, const auto& j) { return l < j.first; });
    return after == jumps.begin() ? logical : logical + std::prev(after)->second;
  }

  char at(std::size_t k) const { return k < s.size() ? s[k] : '\0'; }

  std::size_t line_of(std::size_t logical) {
    const std::size_t target = logical < s.size() ? origin(logical) : original.size();
    if (target < line_at) {  // never needed by the forward scan; kept correct anyway
      line_at = 0;
      line_no = 1;
    }
    line_no += static_cast<std::size_t>(std::count(original.begin() + static_cast<std::ptrdiff_t>(line_at),
                                                   original.begin() + static_cast<std::ptrdiff_t>(target), '\n'));
    line_at = target;
    return line_no;
  }

  void unfollowable(const std::string& why, std::size_t where) {
    if (out.unfollowable.empty()) out.unfollowable = why + " (line " + std::to_string(line_of(where)) + ")";
  }

  // Skips spaces and comments within the current line; stops at its end.
  void skip_hspace_and_comments() {
    while (i < s.size()) {
      if (hspace(s[i])) {
        ++i;
      } else if (s[i] == '/' && at(i + 1) == '*') {
        const auto end = s.find("*/", i + 2);
        i = end == std::string_view::npos ? s.size() : end + 2;
      } else {
        return;
      }
    }
  }

  std::string_view identifier() {
    const std::size_t b = i;
    while (i < s.size() && ident_char(s[i])) ++i;
    return s.substr(b, i - b);
  }

  // A quoted or angled header name at i, up to its closing delimiter on this
  // line. Returns false (i unchanged) if there is none.
  bool header_name(IncludeDirective& d) {
    const char open = at(i);
    if (open != '"' && open != '<') return false;
    const char close = open == '"' ? '"' : '>';
    std::size_t k = i + 1;
    while (k < s.size() && s[k] != close && s[k] != '\n') ++k;
    if (k >= s.size() || s[k] != close) return false;
    d.name.assign(s.substr(i + 1, k - i - 1));
    d.angled = open == '<';
    d.line = line_of(i);
    if (!d.has_include) {
      d.begin = origin(i);
      d.end = origin(k) + 1;
      if (d.end - d.begin != k + 1 - i) {
        unfollowable("a header name broken across lines by a backslash", i);
        return true;
      }
    }
    i = k + 1;
    return true;
  }

  void directive() {
    skip_hspace_and_comments();
    const std::size_t name_at = i;
    const std::string_view name = identifier();
    if (name != "include" && name != "include_next" && name != "import") return;
    skip_hspace_and_comments();
    IncludeDirective d;
    if (!header_name(d)) {
      std::string why = "a computed #";
      why.append(name).append(" (the header's name comes from a macro)");
      unfollowable(why, name_at);
      return;
    }
    if (name != "include") {
      std::string why(1, '#');
      why.append(name).append(" \"").append(d.name).append("\"");
      unfollowable(why, name_at);
      return;
    }
    out.directives.push_back(std::move(d));
  }

  void has_include(std::string_view which, std::size_t where) {
    skip_hspace_and_comments();
    if (at(i) != '(') return;  // "defined(__has_include)" and the like
    ++i;
    skip_hspace_and_comments();
    IncludeDirective d;
    d.has_include = true;
    if (!header_name(d)) {
      std::string why = "a computed ";
      why.append(which).append("(...)");
      unfollowable(why, where);
      return;
    }
    if (which != "__has_include") {
      unfollowable(std::string(which).append("(...)"), where);
      return;
    }
    out.directives.push_back(std::move(d));
  }

  void skip_quoted(char q) {
    ++i;
    while (i < s.size() && s[i] != q && s[i] != '\n') i += s[i] == '\\' ? 2 : 1;
    if (i < s.size() && s[i] == q) ++i;
  }

  // R"delim( ... )delim", i at the opening quote. False if malformed.
  bool skip_raw_string() {
    const std::size_t open = s.find('(', i + 1);
    if (open == std::string_view::npos || open - i - 1 > 16) return false;
    const std::string_view delim = s.substr(i + 1, open - i - 1);
    if (delim.find_first_of(" \t\n\\)\"") != std::string_view::npos) return false;
    std::string closing(1, ')');  // appended piecewise: GCC 12 reports a false -Wrestrict otherwise
    closing.append(delim);
    closing.push_back('"');
    const auto end = s.find(closing, open + 1);
    i = end == std::string_view::npos ? s.size() : end + closing.size();
    return true;
  }

  void run() {
    bool line_start = true;
    while (i < s.size()) {
      const char c = s[i];
      if (c == '\n') {
        line_start = true;
        ++i;
      } else if (hspace(c)) {
        ++i;
      } else if (c == '/' && at(i + 1) == '/') {
        while (i < s.size() && s[i] != '\n') ++i;
      } else if (c == '/' && at(i + 1) == '*') {
        const auto end = s.find("*/", i + 2);
        i = end == std::string_view::npos ? s.size() : end + 2;
      } else if (line_start && (c == '#' || (c == '%' && at(i + 1) == ':'))) {
        line_start = false;
        i += c == '#' ? 1 : 2;
        directive();
      } else {
        line_start = false;
        if (c == '"' || c == '\'') {
          skip_quoted(c);
        } else if (digit(c) || (c == '.' && digit(at(i + 1)))) {
          // A pp-number, digit separators (1'000) and exponent signs included.
          ++i;
          while (i < s.size() && (ident_char(s[i]) || s[i] == '.' || s[i] == '\'' ||
                                  ((s[i] == '+' || s[i] == '-') && std::string_view("eEpP").find(s[i - 1]) !=
                                                                       std::string_view::npos)))
            ++i;
        } else if (ident_start(c)) {
          const std::size_t where = i;
          const std::string_view id = identifier();
          if (at(i) == '"' && (id == "R" || id == "LR" || id == "uR" || id == "UR" || id == "u8R")) {
            if (!skip_raw_string()) skip_quoted('"');
          } else if (id == "__has_include" || id == "__has_include_next") {
            has_include(id, where);
          }
        } else {
          ++i;
        }
      }
    }
  }
};

}  // namespace

IncludeScan scan_includes(std::string_view text) {
  // A directive needs a '#' (or its digraph "%:"), a test the name
  // __has_include; line splices could join either from pieces. A text with
  // none of them has nothing to find: kernels without includes skip the lexer,
  // which costs a fresh process's warm start ~6 us per 2 KB.
  if (text.find('#') == std::string_view::npos && text.find('\\') == std::string_view::npos &&
      text.find("%:") == std::string_view::npos && text.find("__has_include") == std::string_view::npos)
    return {};
  Lexer lexer(text);
  lexer.run();
  return std::move(lexer.out);
}

std::string rewrite_includes(std::string_view text, const std::vector<IncludeDirective>& directives,
                             const std::vector<std::optional<std::string>>& replacements) {
  std::string out;
  out.reserve(text.size() + 64 * directives.size());
  std::size_t copied = 0;
  for (std::size_t k = 0; k < directives.size() && k < replacements.size(); ++k) {
    const IncludeDirective& d = directives[k];
    if (!replacements[k] || d.has_include || d.end <= d.begin || d.begin < copied || d.end > text.size()) continue;
    out.append(text.substr(copied, d.begin - copied));
    out.push_back(d.angled ? '<' : '"');
    out.append(*replacements[k]);
    out.push_back(d.angled ? '>' : '"');
    copied = d.end;
  }
  out.append(text.substr(copied));
  return out;
}

}  // namespace cucore::detail
