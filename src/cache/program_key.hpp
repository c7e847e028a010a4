#pragma once
// The pieces of a cache key, for Program::compile through a cache to add the
// include search and the headers' digests to what make_program_cache_key
// covers. Internal to libcucore.
#include <cucore/program_cache.hpp>

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "compile/include_resolver.hpp"
#include "compile/include_scan.hpp"

namespace cucore::detail {

// The code's SHA-256 and its include directives, remembered per thread after a
// full comparison with a stored copy of the code (a cached compile keys the
// same source on every call).
const std::string& code_digest(std::string_view code);
const IncludeScan& code_includes(std::string_view code);

// make_program_cache_key's fields, serialized into `buf` (overwritten), with no
// refusal but an unresolved arch. Labelled, length-prefixed fields: no two
// different field lists serialize alike. `rendered`: a C++ Program's NVRTC
// flags as it rendered them (else they are rendered here). `extra_digest`:
// none, or given (an empty one keys apart from none).
void write_key_fields(std::string& buf, std::string_view code, std::string_view code_type,
                      const ProgramOptions& options, CodeType target, std::span<const std::string> name_expressions,
                      std::optional<std::string_view> extra_digest, const std::vector<std::string>* rendered);
// Appended fields: the include search (absolute directories), and every place
// the search looked with what it found (each header's path and digest).
void append_search_field(std::string& buf, const IncludeSearch& search, bool with_source_dir);
void append_includes_field(std::string& buf, const std::vector<IncludeProbe>& probes);

}  // namespace cucore::detail
