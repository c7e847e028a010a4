#pragma once
// The compiler identity in every cache key, found cheaply: NVRTC's version and
// the versions of the headers it compiles with, remembered in a small memo file
// so that a fresh process need not load NVRTC (~8 ms) to key a cache hit.
// Internal to libcucore.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <cucore/program.hpp>

struct dl_phdr_info;

namespace cucore::detail {

// "nvrtc 13.0; cuda.h 13000; cccl 3000001", from the memo when its files are
// unchanged, else by loading NVRTC (and rewriting the memo).
// refresh_nvrtc_identity() is called once NVRTC is loaded (after a compile): it
// returns true when the identity differed from the memo's (so the caller
// recomputes its key), and corrects the memo.
std::string nvrtc_identity();
bool refresh_nvrtc_identity();

// The linker a PTX Program is assembled with: "nvJitLink 13.0" or "driver 13000".
std::string linker_identity(const ProgramOptions& options);

// libNVVM for NVVM programs: "nvvm 2.0; ir 2.0.3.2" (a patch release changes
// codegen without the IR version, so both); "nvvm unavailable" when it does
// not load (such a key can never be a compile's).
std::string nvvm_identity();

// The memo file's contents, parsed (the stamps not yet checked against the files).
struct ToolchainStamp {
  std::string path;
  std::uint64_t ino = 0, size = 0;
  std::int64_t mtime_ns = 0;
  bool operator==(const ToolchainStamp&) const = default;
};
struct ToolchainMemo {
  std::string identity;
  std::vector<ToolchainStamp> stamps;
};

// What names the memo: everything that steers the search for NVRTC.
std::string toolchain_search_fingerprint();

// A loaded object's run paths (DT_RPATH, DT_RUNPATH), read from its dynamic
// section in memory: all of it that steers the OS loader's search for a
// library it dlopens, but for its location where they use $ORIGIN. std::nullopt
// when the section or its strings lie outside the object's loaded segments.
struct RunPaths {
  std::string rpath, runpath;
};
std::optional<RunPaths> run_paths_of(const dl_phdr_info& object);
// Appends an object's run paths to a fingerprint, and its `location()` (asked
// for only then) when they name it through a token or could not be read.
void append_run_paths(std::string& fp, std::string_view label, const std::optional<RunPaths>& paths,
                      const std::function<std::string()>& location);

// Memos of searches no longer made (another executable, a moved library, an
// older fingerprint) would stay forever: when a memo is written, the memo
// directory (open as `dirfd`) keeps the `keep` most recently written
// "nvrtc-" files and unlinks the rest, never `just_written`. Returns how many
// it removed. Best effort; follows no link.
std::size_t prune_toolchain_memos(int dirfd, std::size_t keep, std::string_view just_written);
inline constexpr std::size_t kToolchainMemosKept = 64;

std::optional<ToolchainMemo> parse_toolchain_memo(std::string_view text);
std::string format_toolchain_memo(const ToolchainMemo& memo);  // "" if it cannot be written

}  // namespace cucore::detail
