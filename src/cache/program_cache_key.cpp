// make_program_cache_key: the digest that names a cache entry, and the pieces
// Program::compile adds to it for headers.
#include <cucore/errors.hpp>
#include <cucore/program_cache.hpp>

#include <cstdint>
#include <algorithm>
#include <cctype>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "hashing/hashing.hpp"
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

[[noreturn]] void refuse(const std::string& what) { throw InvalidArgumentError("make_program_cache_key: " + what); }

}  // namespace

const std::string& code_digest(std::string_view code) { return source_slot(code).digest; }

const IncludeScan& code_includes(std::string_view code) {
  SourceSlot& s = source_slot(code);
  if (!s.scan) s.scan = scan_includes(code);
  return *s.scan;
}

std::vector<std::string> key_flags(std::string_view code_type, const ProgramOptions& options, CodeType target,
                                   const std::vector<std::string>* rendered) {
  if (code_type == "ptx")  // what the linker is handed: NVRTC-only fields do not count
    return linker_options_for_ptx(options).as_nvjitlink_flags();
  if (code_type == "nvvm") {
    std::vector<std::string> f = options.as_nvvm_flags(target);
    // The extra modules by name and digest; libdevice by the toolkit libNVVM
    // comes with (its identity) and the caller's extra_digest.
    for (const auto& [name, source] : options.extra_sources) f.push_back("module " + name + " " + sha256(source));
    if (options.use_libdevice.value_or(false)) f.emplace_back("libdevice");
    return f;
  }
  // The toolkit's header directories as a placeholder: the compiler identity
  // names the toolkit, and finding the directories costs a warm start ~0.1 ms.
  return rendered ? *rendered : nvrtc_flags(options, ToolkitFlags::placeholder);
}

void write_key_fields(std::string& buf, std::string_view code, std::string_view code_type,
                      const ProgramOptions& options, CodeType target, std::span<const std::string> name_expressions,
                      std::optional<std::string_view> extra_digest, const std::vector<std::string>* rendered) {
  const std::vector<std::string> flags = key_flags(code_type, options, target, rendered);
  // NVRTC alone takes name expressions (the others ignore them).
  std::vector<std::string_view> names;
  if (code_type == "c++") names.assign(name_expressions.begin(), name_expressions.end());
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  buf.clear();
  KeyWriter w{buf};
  w.field("schema", "cucore-program-cache-key-3");
  w.field("compiler", code_type == "c++"   ? nvrtc_identity()
                      : code_type == "nvvm" ? nvvm_identity()
                                            : linker_identity(options));
  w.field("code_type", code_type);
  w.field("target", to_string(target));
  w.field("code_sha256", code_digest(code));
  w.list("flags", flags);
  w.list("name_expressions", names);
  w.field("name", options.name);
  // None and a non-empty digest keep the field they always had (keys made
  // before empty digests were told apart stay valid); a given empty one has its own.
  if (extra_digest && extra_digest->empty()) w.field("extra_digest_empty", "");
  else w.field("extra_digest", extra_digest.value_or(std::string_view()));
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

namespace {

// `extra_digest`: none (std::nullopt), or given (possibly empty).
std::string make_key(std::string_view code, std::string_view code_type_in, const ProgramOptions& options,
                     CodeType target, std::span<const std::string> name_expressions,
                     std::optional<std::string_view> extra_digest) {
  using detail::refuse;
  std::string code_type(code_type_in);  // any case, as Program takes it
  std::transform(code_type.begin(), code_type.end(), code_type.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (code_type != "c++" && code_type != "ptx" && code_type != "nvvm")
    refuse("code_type must be \"c++\", \"ptx\" or \"nvvm\", got \"" + code_type + "\"");
  // The targets Program::compile makes for each code type.
  const bool valid = code_type == "c++"   ? target == CodeType::cubin || target == CodeType::ptx || target == CodeType::ltoir
                     : code_type == "ptx" ? target == CodeType::cubin || target == CodeType::ptx
                                          : target == CodeType::ptx || target == CodeType::ltoir;
  if (!valid)
    refuse("target_type \"" + std::string(to_string(target)) + "\" is not valid for code_type \"" + code_type +
           "\" (Program::compile refuses it)");
  if (options.arch.empty())
    refuse("options.arch is empty: pass the Program's options() (arch resolved) or set arch, e.g. \"sm_90\"");
  if (code_type != "nvvm" && !options.extra_sources.empty())
    refuse("extra_sources is only supported for code_type \"nvvm\" (Program refuses it for \"" + code_type + "\")");
  if (code_type == "c++") {
    // Side effects a cache hit would skip, which no digest can stand for.
    for (const auto& [field, value] : {std::pair<const char*, const std::string*>{"create_pch", &options.create_pch},
                                       {"time", &options.time},
                                       {"fdevice_time_trace", &options.fdevice_time_trace}})
      if (!value->empty())
        refuse(std::string(field) + " writes a file as a side effect of compiling, which a cache hit would skip: "
                                    "compile without a cache");
    // Inputs the key cannot see.
    if (!extra_digest) {
      std::vector<std::string> external;
      if (!options.include_path.empty()) external.push_back("include_path");
      if (!options.pre_include.empty()) external.push_back("pre_include");
      if (options.pch.value_or(false)) external.push_back("pch");
      if (!options.use_pch.empty()) external.push_back("use_pch");
      if (!options.pch_dir.empty()) external.push_back("pch_dir");
      if (!external.empty()) {
        std::string list;
        for (const auto& e : external) list += (list.empty() ? "" : ", ") + e;
        refuse("options read files the key cannot see (" + list +
               "): fingerprint those files and pass the digest as extra_digest");
      }
      if (options.name.find_first_of("/\\") != std::string::npos)
        refuse("options.name '" + options.name +
               "' has a directory component (NVRTC reads quoted includes from it): strip it, or fingerprint "
               "those headers and pass the digest as extra_digest");
    }
  } else if (code_type == "nvvm" && options.use_libdevice.value_or(false) && !extra_digest) {
    refuse("use_libdevice links the toolkit's libdevice bitcode, which the key cannot see: pass a digest of it as "
           "extra_digest");
  }
  thread_local std::string buf;  // reused: keys are computed on every cached compile
  detail::write_key_fields(buf, code, code_type, options, target, name_expressions, extra_digest, nullptr);
  return detail::sha256(buf);
}

}  // namespace

std::string make_program_cache_key(std::string_view code, std::string_view code_type, const ProgramOptions& options,
                                   CodeType target, std::span<const std::string> name_expressions,
                                   std::string_view extra_digest) {
  return make_key(code, code_type, options, target, name_expressions,
                  extra_digest.empty() ? std::nullopt : std::optional<std::string_view>(extra_digest));
}

std::string make_program_cache_key(std::string_view code, std::string_view code_type, const ProgramOptions& options,
                                   CodeType target, std::span<const std::string> name_expressions,
                                   GivenExtraDigest extra_digest) {
  return make_key(code, code_type, options, target, name_expressions, extra_digest.bytes);
}

std::string program_cache_key_hex(std::string_view key) { return detail::to_hex(key); }

}  // namespace cucore
