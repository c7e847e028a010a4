// make_program_cache_key: the digest that names a cache entry, and the pieces
// Program::compile adds to it for headers.
#include <cucore/program_cache.hpp>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cache/hashing.hpp"
#include "cache/program_key.hpp"
#include "cache/toolchain_identity.hpp"
#include "compile/program_compile.hpp"

namespace cucore {
namespace detail {
namespace {

// Labelled, length-prefixed fields: no two different field lists serialize alike.
struct KeyWriter {
  std::string& buf;
  void u64(std::uint64_t v) {
    char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(v >> (8 * i));
    buf.append(b, 8);
  }
  void field(std::string_view label, std::string_view value) {
    buf.push_back(static_cast<char>(label.size()));
    buf.append(label);
    u64(value.size());
    buf.append(value);
  }
  template <typename List>
  void list(std::string_view label, const List& items) {
    buf.push_back(static_cast<char>(label.size()));
    buf.append(label);
    u64(items.size());
    for (const auto& s : items) {
      u64(s.size());
      buf.append(s);
    }
  }
};

// Remembered per source, per thread: hashing 2 KB with SHA-256 costs ~2 us,
// most of a hit. A slot is used only after a full comparison with its copy of
// the code, so it can never stand for other code.
struct SourceSlot {
  std::uint64_t hash = 0;
  std::string code, digest;
  std::optional<IncludeScan> scan;
};

SourceSlot& source_slot(std::string_view code) {
  thread_local SourceSlot slots[8];
  thread_local SourceSlot uncached;
  if (code.size() > (256u << 10)) {  // big sources: not worth a copy
    uncached.digest = sha256(code);
    uncached.scan.reset();
    uncached.code.clear();
    return uncached;
  }
  const std::uint64_t h = checksum64(code.data(), code.size(), 0x636f6465);
  SourceSlot& s = slots[h % 8];
  if (s.digest.empty() || s.hash != h || s.code != code) {
    s.digest = sha256(code);
    s.code.assign(code);
    s.hash = h;
    s.scan.reset();
  }
  return s;
}

[[noreturn]] void refuse(const std::string& what) { throw std::invalid_argument("make_program_cache_key: " + what); }

}  // namespace

const std::string& code_digest(std::string_view code) { return source_slot(code).digest; }

const IncludeScan& code_includes(std::string_view code) {
  SourceSlot& s = source_slot(code);
  if (!s.scan) s.scan = scan_includes(code);
  return *s.scan;
}

void write_key_fields(std::string& buf, std::string_view code, std::string_view code_type,
                      const ProgramOptions& options, CodeType target, std::span<const std::string> name_expressions,
                      std::string_view extra_digest) {
  // The toolkit's header directories as a placeholder: the compiler identity
  // names the toolkit, and finding the directories costs a warm start ~0.1 ms.
  const std::vector<std::string> flags = nvrtc_flags(options, ToolkitFlags::placeholder);
  std::vector<std::string_view> names(name_expressions.begin(), name_expressions.end());
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  buf.clear();
  KeyWriter w{buf};
  w.field("schema", "cucore-program-cache-key-2");
  w.field("compiler", code_type == "c++" ? nvrtc_identity() : linker_identity(options));
  w.field("code_type", code_type);
  w.field("target", to_string(target));
  w.field("code_sha256", code_digest(code));
  w.list("flags", flags);
  w.list("name_expressions", names);
  w.field("name", options.name);
  w.field("extra_digest", extra_digest);
}

void append_search_field(std::string& buf, const IncludeSearch& search, bool with_source_dir) {
  std::vector<std::string> dirs;
  if (with_source_dir) dirs.push_back("source " + search.source_dir.string());
  for (const auto& d : search.user_dirs) dirs.push_back("-I " + d.string());
  KeyWriter{buf}.list("include_search", dirs);
}

void append_includes_field(std::string& buf, const std::vector<IncludeProbe>& probes) {
  std::vector<std::string> items;
  items.reserve(probes.size());
  for (const auto& p : probes)
    items.push_back(std::string(1, static_cast<char>('0' + p.kind)) + (p.kind == IncludeProbe::file ? p.digest : "") +
                    p.path);
  KeyWriter{buf}.list("includes", items);
}

}  // namespace detail

std::string make_program_cache_key(std::string_view code, std::string_view code_type, const ProgramOptions& options,
                                   CodeType target, std::span<const std::string> name_expressions,
                                   std::string_view extra_digest) {
  using detail::refuse;
  if (code_type != "c++" && code_type != "ptx")
    refuse("code_type must be \"c++\" or \"ptx\", got \"" + std::string(code_type) + "\"");
  if (target != CodeType::cubin && target != CodeType::ptx && target != CodeType::ltoir)
    refuse("target must be cubin, ptx or ltoir, got " + std::string(to_string(target)));
  if (options.arch.empty())
    refuse("options.arch is empty: pass the Program's options() (arch resolved) or set arch, e.g. \"sm_90\"");
  // Side effects a cache hit would skip.
  if (!options.create_pch.empty())
    refuse("create_pch writes a file, which a cache hit would not: compile without a cache");
  if (!options.time.empty()) refuse("time writes a timing file, which a cache hit would not: compile without a cache");
  if (options.fdevice_time_trace.value_or(false))
    refuse("fdevice_time_trace writes a trace, which a cache hit would not: compile without a cache");
  // Inputs the key cannot see.
  if (extra_digest.empty()) {
    std::vector<std::string> external;
    if (!options.include_path.empty()) external.push_back("include_path");
    if (!options.pre_include.empty()) external.push_back("pre_include");
    if (options.pch.value_or(false)) external.push_back("pch");
    if (!options.use_pch.empty()) external.push_back("use_pch");
    if (!options.pch_dir.empty()) external.push_back("pch_dir");
    if (options.name.find('/') != std::string::npos)
      external.push_back("name (with a directory: quoted includes are read from it)");
    if (!external.empty()) {
      std::string list;
      for (const auto& e : external) list += (list.empty() ? "" : ", ") + e;
      refuse("options read files the key cannot see (" + list +
             "): fingerprint those files and pass the digest as extra_digest");
    }
  }
  thread_local std::string buf;  // reused: keys are computed on every cached compile
  detail::write_key_fields(buf, code, code_type, options, target, name_expressions, extra_digest);
  return detail::sha256(buf);
}

std::string program_cache_key_hex(std::string_view key) { return detail::to_hex(key); }

}  // namespace cucore
