#pragma once
// Include manifests, as ccache's direct mode keeps them: for a program whose
// includes were followed, every place the search looked (and what it found
// there, with each header's digest and stat stamp), remembered under a key of
// everything but the headers. A later lookup re-checks those places by stat
// (reading a header only when its stamp differs or is too recent to trust) and,
// when all hold, keys the cache by the recorded digests without reading any
// header. Kept in this process and in the cache root's "includes" directory.
// Internal to libcucore.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compile/include_resolver.hpp"

namespace cucore::detail {

// Whether every probe still holds: the same kind of thing at each path, and
// each header's contents unchanged (by stamp, else by digest).
bool probes_hold(const std::vector<IncludeProbe>& probes);

// The probes remembered under `manifest_key` (32 bytes), if any: this
// process's, else the disk's. Not yet checked against the files.
std::optional<std::vector<IncludeProbe>> load_include_manifest(std::string_view manifest_key);
void store_include_manifest(std::string_view manifest_key, const std::vector<IncludeProbe>& probes);

// The manifest file's text; "" when a path cannot be written in it.
std::string format_include_manifest(const std::vector<IncludeProbe>& probes);
// std::nullopt unless `text` is exactly a well-formed manifest. Never throws.
std::optional<std::vector<IncludeProbe>> parse_include_manifest(std::string_view text) noexcept;

}  // namespace cucore::detail
