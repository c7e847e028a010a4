#pragma once
// The fuzz targets' bodies, shared by the libFuzzer binaries (fuzz_*.cpp) and
// the regression test that replays the corpus and every crash found
// (tests/cpu/test_program_cache_fuzz_regressions.cpp). Each feeds untrusted
// bytes to one parser the program caches read from disk or from a user, and
// checks properties that must hold for any input.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cache/code_format.hpp"
#include "cache/entry_record.hpp"
#include "cache/include_manifest.hpp"
#include "cache/toolchain_identity.hpp"
#include "compile/include_scan.hpp"

// A broken property: libFuzzer needs a crash; the regression test a throw.
#ifndef CUCORE_FUZZ_FAIL
#define CUCORE_FUZZ_FAIL(what) (std::fprintf(stderr, "fuzz property broken: %s\n", what), std::abort())
#endif
#define CUCORE_FUZZ_CHECK(cond) \
  do {                          \
    if (!(cond)) CUCORE_FUZZ_FAIL(#cond); \
  } while (0)

namespace cucore::fuzz {

// An entry's record as the disk cache reads it (from an xattr or a sidecar),
// and the bytes it describes through the structural checks. A record that
// decodes re-encodes to the very same bytes.
inline int entry_record(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (auto rec = detail::decode_entry_record(bytes)) {
    CUCORE_FUZZ_CHECK(rec->size > 0);
    CUCORE_FUZZ_CHECK(static_cast<unsigned>(rec->code_type) <= static_cast<unsigned>(CodeType::library));
    CUCORE_FUZZ_CHECK(detail::encode_entry_record(*rec) == bytes);
  }
  const auto code = std::as_bytes(std::span(data, size));
  const auto detected = detail::detect_code_type(code);
  for (CodeType t : {CodeType::cubin, CodeType::ptx, CodeType::ltoir, CodeType::fatbin, CodeType::object,
                     CodeType::library}) {
    const bool valid = detail::structurally_valid(t, code);
    if (detected == t) CUCORE_FUZZ_CHECK(valid);
  }
  return 0;
}

// A program's text as the cache key reads it: the include directives found lie
// inside the text, and rewriting each with its own name gives the text back.
inline int include_scan(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const detail::IncludeScan scan = detail::scan_includes(text);
  std::vector<std::optional<std::string>> same, renamed;
  for (const auto& d : scan.directives) {
    CUCORE_FUZZ_CHECK(d.line >= 1);
    if (d.has_include) {
      CUCORE_FUZZ_CHECK(d.begin == 0 && d.end == 0);
    } else {
      CUCORE_FUZZ_CHECK(d.begin < d.end && d.end <= text.size());
      CUCORE_FUZZ_CHECK(text[d.begin] == (d.angled ? '<' : '"'));
      CUCORE_FUZZ_CHECK(text[d.end - 1] == (d.angled ? '>' : '"'));
    }
    same.push_back(d.name);
    renamed.push_back("/fuzz/" + d.name);
  }
  if (scan.unfollowable.empty()) {
    CUCORE_FUZZ_CHECK(detail::rewrite_includes(text, scan.directives, same) == text);
    const std::string out = detail::rewrite_includes(text, scan.directives, renamed);
    CUCORE_FUZZ_CHECK(out.size() >= text.size());
  }
  return 0;
}

// The include manifests and the toolchain memo, as read back from the cache
// root: whatever parses formats back to the same text.
inline int manifests(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto probes = detail::parse_include_manifest(text)) {
    const std::string again = detail::format_include_manifest(*probes);
    auto reparsed = detail::parse_include_manifest(again);
    CUCORE_FUZZ_CHECK(reparsed && *reparsed == *probes);
  }
  if (auto memo = detail::parse_toolchain_memo(text)) {
    CUCORE_FUZZ_CHECK(!memo->identity.empty() && !memo->stamps.empty());
    auto reparsed = detail::parse_toolchain_memo(detail::format_toolchain_memo(*memo));
    CUCORE_FUZZ_CHECK(reparsed && reparsed->identity == memo->identity && reparsed->stamps == memo->stamps);
  }
  return 0;
}

}  // namespace cucore::fuzz
