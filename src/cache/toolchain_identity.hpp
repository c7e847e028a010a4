#pragma once
// The compiler identity in every cache key, found cheaply: NVRTC's version and
// the versions of the headers it compiles with, remembered in a small memo file
// so that a fresh process need not load NVRTC (~8 ms) to key a cache hit.
// Internal to libcucore.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <cucore/program.hpp>

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
std::optional<ToolchainMemo> parse_toolchain_memo(std::string_view text);
std::string format_toolchain_memo(const ToolchainMemo& memo);  // "" if it cannot be written

}  // namespace cucore::detail
