#pragma once
// Resolves a program's includes along NVRTC's search order, as jitify does, so
// the program cache can key on the headers' contents and NVRTC can be handed
// exactly the contents that were keyed (nvrtcCreateProgram's header list).
//
// The search order, NVRTC's: for "name", the directory of the including file
// (for the program itself, the directory of its name, unless
// no_source_include); then each include_path; then the toolkit's (CCCL, CUDA).
// <name> skips the first. Headers found outside the toolkit's directories are
// read, digested and followed; includes that reach the toolkit's directories
// are left to NVRTC (the toolchain identity in the key covers them). Internal
// to libcucore.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <cucore/program.hpp>

namespace cucore::detail {

// One place looked at along the search order, and what was there.
struct IncludeProbe {
  enum Kind : std::uint8_t {
    absent = 0,     // nothing (or nothing that could be opened as a file)
    directory = 1,  // a directory: searched past, as compilers do
    file = 2,       // a regular file: the header
    other = 3,      // a FIFO, socket or device: never opened; the includes cannot be followed
  };
  std::string path;  // absolute, lexically normal
  Kind kind = absent;
  // For files: the SHA-256 of the contents, and the stat stamp that lets a
  // later check skip reading them (trusted only if the file was not modified
  // within the last seconds before it was read: a write in the same clock tick
  // could otherwise go unseen).
  std::string digest;
  std::uint64_t ino = 0, size = 0;
  std::int64_t mtime_ns = 0, ctime_ns = 0;
  bool stamp_trusted = false;
  bool operator==(const IncludeProbe&) const = default;
};

struct IncludeSearch {
  std::filesystem::path source_dir;  // empty with no_source_include
  std::vector<std::filesystem::path> user_dirs;
  std::vector<std::filesystem::path> toolkit_dirs;
  // From the options, relative paths made absolute against the working directory.
  static IncludeSearch of(const ProgramOptions& options);
};

struct ResolvedIncludes {
  // Every place looked at, in search order, each path once.
  std::vector<IncludeProbe> probes;
  // For NVRTC: the program with its resolved includes naming the headers' paths,
  // the headers (path, contents, their includes rewritten alike), and the
  // --pre-include flags, rewritten alike.
  std::string source;
  std::vector<std::pair<std::string, std::string>> headers;
  std::vector<std::string> pre_include;
  // Non-empty: the includes cannot be followed (a computed #include, too many
  // or too large headers); why. The compile can still go on, uncached.
  std::string unfollowable;
  // Non-empty: a header candidate that no compiler can read (a FIFO, socket or
  // device, which would block NVRTC) or a header with a NUL byte (which NVRTC,
  // handed it as a C string, would cut short), naming its path; the compile
  // must not go on.
  std::string error;
};

// Reads and follows every include of `source` (and of options.pre_include).
// Never throws for what it finds on disk: problems land in `unfollowable`.
ResolvedIncludes resolve_includes(std::string_view source, const ProgramOptions& options);

// What is at `path` now, as a probe with no digest (kind and stamp only).
IncludeProbe stat_probe(const std::string& path);

// SHA-256 of a header, read safely (no blocking on a FIFO, bounded by its size);
// std::nullopt if it cannot be read as a regular file.
std::optional<std::string> header_digest(const std::string& path, std::string* contents = nullptr);

}  // namespace cucore::detail
