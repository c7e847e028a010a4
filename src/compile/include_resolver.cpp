// Include resolution along NVRTC's search order (see include_resolver.hpp).
#include "compile/include_resolver.hpp"

#include <sys/stat.h>

#include <cucore/pathfinder.hpp>

#include <cstdint>
#include <algorithm>
#include <ctime>
#include <deque>
#include <unordered_map>

#include "hashing/hashing.hpp"
#include "compile/include_scan.hpp"
#include "files/regular_file.hpp"

namespace fs = std::filesystem;

namespace cucore::detail {
namespace {

constexpr std::size_t kMaxHeaders = 4096;
constexpr std::uint64_t kMaxHeaderBytes = 64ull << 20, kMaxTotalBytes = 256ull << 20;
// A stamp taken within this many seconds of the file's last change is not
// trusted later: another write in the same clock tick would leave it alike.
constexpr std::int64_t kFreshSeconds = 2;

std::int64_t ns(const struct timespec& t) { return std::int64_t(t.tv_sec) * 1000000000 + t.tv_nsec; }

void stamp(IncludeProbe& p, const struct stat& st) {
  p.ino = static_cast<std::uint64_t>(st.st_ino);
  p.size = static_cast<std::uint64_t>(st.st_size);
  p.mtime_ns = ns(st.st_mtim);
  p.ctime_ns = ns(st.st_ctim);
}

// Reads a header whole (files/regular_file.hpp: never blocking, bounded by its
// size, refused with a NUL byte as a source is); the stat it was read under in
// `st`. Retries once if the file changed while it was read. On failure `why`
// says why and `refused` tells a header no compiler should read (not a regular
// file, a NUL byte: an error) from one that is only not followed (too large,
// unreadable, changing: the compile goes on uncached).
std::optional<std::string> read_header(const std::string& path, struct stat& st, std::string& why, bool& refused) {
  ReadOptions o;
  o.limit = kMaxHeaderBytes;
  o.text = true;
  o.what = "header";
  refused = false;
  for (int attempt = 0;; ++attempt) {
    try {
      return read_text_file(path, o, &st);
    } catch (const FileError& e) {
      if (e.kind() == FileError::Kind::changed && attempt == 0) continue;
      why = e.what();
      refused = e.kind() == FileError::Kind::not_regular || e.kind() == FileError::Kind::nul_byte;
      return std::nullopt;
    }
  }
}

std::string normal(const fs::path& p) { return p.lexically_normal().string(); }

struct Resolver {
  const IncludeSearch& search;
  ResolvedIncludes out;
  std::unordered_map<std::string, std::size_t> probed;  // path -> index in out.probes
  std::unordered_map<std::string, std::size_t> read;    // path -> index in out.headers
  std::deque<std::size_t> pending;                      // headers still to follow
  std::uint64_t total = 0;

  bool failed() const { return !out.unfollowable.empty(); }
  void fail(std::string why) {
    if (out.unfollowable.empty()) out.unfollowable = std::move(why);
  }

  const IncludeProbe& probe(const std::string& path) {
    if (auto it = probed.find(path); it != probed.end()) return out.probes[it->second];
    IncludeProbe p = stat_probe(path);
    if (p.kind == IncludeProbe::file) {
      struct stat st;
      std::string why;
      bool refused = false;
      auto contents = read_header(path, st, why, refused);
      if (!contents) {
        if (refused) out.error = why;
        fail(why);
        p.kind = IncludeProbe::absent;
      } else {
        stamp(p, st);
        p.digest = sha256(*contents);
        struct timespec now;
        ::clock_gettime(CLOCK_REALTIME, &now);
        p.stamp_trusted = std::max(p.mtime_ns, p.ctime_ns) < ns(now) - kFreshSeconds * 1000000000;
        total += contents->size();
        if (out.headers.size() >= kMaxHeaders || total > kMaxTotalBytes)
          fail("more than " + std::to_string(kMaxHeaders) + " headers or " + std::to_string(kMaxTotalBytes >> 20) +
               " MiB of them");
        read.emplace(path, out.headers.size());
        pending.push_back(out.headers.size());
        out.headers.emplace_back(path, std::move(*contents));
      }
    } else if (p.kind == IncludeProbe::other) {
      out.error = path + " is not a regular file or directory (a FIFO or device?): NVRTC would block reading it";
      fail(out.error);
    }
    probed.emplace(path, out.probes.size());
    out.probes.push_back(std::move(p));
    return out.probes.back();
  }

  // The header `name` names from a file in `includer_dir`, if one is found
  // outside the toolkit's directories.
  std::optional<std::string> resolve(const std::string& name, bool angled, const fs::path& includer_dir) {
    std::vector<std::string> candidates;
    const fs::path n(name);
    if (n.is_absolute()) {
      candidates.push_back(normal(n));
    } else {
      if (!angled && !includer_dir.empty()) candidates.push_back(normal(includer_dir / n));
      for (const auto& d : search.user_dirs) candidates.push_back(normal(d / n));
    }
    for (const auto& c : candidates) {
      if (failed()) return std::nullopt;
      if (probe(c).kind == IncludeProbe::file) return c;
    }
    return std::nullopt;
  }

  // Resolves every directive of `text` (read from `includer_dir`) and returns
  // the text with the resolved ones naming their headers' paths.
  std::string follow(std::string_view text, const fs::path& includer_dir, const std::string& what) {
    IncludeScan scan = scan_includes(text);
    if (!scan.unfollowable.empty()) {
      fail(what + ": " + scan.unfollowable);
      return {};
    }
    std::vector<std::optional<std::string>> names;
    names.reserve(scan.directives.size());
    for (const auto& d : scan.directives) {
      auto path = resolve(d.name, d.angled, includer_dir);
      if (failed()) return {};
      // A name with a character that cannot stand in a header name is left
      // alone; NVRTC would look for it along the same path and find the same.
      if (path && path->find_first_of(d.angled ? ">\n" : "\"\n") != std::string::npos) {
        fail(what + ": the path " + *path + " cannot be written in an #include");
        return {};
      }
      names.push_back(d.has_include ? std::nullopt : path);
    }
    return rewrite_includes(text, scan.directives, names);
  }
};

}  // namespace

IncludeSearch IncludeSearch::of(const ProgramOptions& options) {
  IncludeSearch s;
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  auto absolute = [&](const fs::path& p) { return (p.is_absolute() ? p : cwd / p).lexically_normal(); };
  if (options.use_toolkit_headers) {
    if (auto d = pathfinder::cccl_include_dir()) s.toolkit_dirs.push_back(fs::path(*d).lexically_normal());
    if (auto d = pathfinder::cuda_include_dir()) s.toolkit_dirs.push_back(fs::path(*d).lexically_normal());
  }
  if (!options.no_source_include.value_or(false)) s.source_dir = absolute(fs::path(options.name).parent_path());
  for (const auto& p : options.include_path) {
    fs::path d = absolute(p);
    // The toolkit's own directories named again are still the toolkit's.
    if (std::find(s.toolkit_dirs.begin(), s.toolkit_dirs.end(), d) == s.toolkit_dirs.end()) s.user_dirs.push_back(d);
  }
  return s;
}

IncludeProbe stat_probe(const std::string& path) {
  IncludeProbe p;
  p.path = path;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return p;
  if (S_ISDIR(st.st_mode)) {
    p.kind = IncludeProbe::directory;
  } else if (S_ISREG(st.st_mode)) {
    p.kind = IncludeProbe::file;
    stamp(p, st);
  } else {
    p.kind = IncludeProbe::other;
  }
  return p;
}

std::optional<std::string> header_digest(const std::string& path, std::string* contents) {
  struct stat st;
  std::string why;
  bool refused = false;
  auto text = read_header(path, st, why, refused);
  if (!text) return std::nullopt;
  std::string digest = sha256(*text);
  if (contents) *contents = std::move(*text);
  return digest;
}

ResolvedIncludes resolve_includes(std::string_view source, const ProgramOptions& options) {
  const IncludeSearch search = IncludeSearch::of(options);
  Resolver r{search, {}, {}, {}, {}, 0};
  for (const auto& p : options.pre_include) {
    auto path = r.resolve(p, false, search.source_dir);
    r.out.pre_include.push_back(path.value_or(p));
  }
  r.out.source = r.follow(source, search.source_dir, options.name);
  while (!r.failed() && !r.pending.empty()) {
    const std::size_t k = r.pending.front();
    r.pending.pop_front();
    const std::string path = r.out.headers[k].first;
    std::string rewritten = r.follow(r.out.headers[k].second, fs::path(path).parent_path(), path);
    r.out.headers[k].second = std::move(rewritten);
  }
  if (r.failed()) {
    r.out.source.clear();
    r.out.headers.clear();
  }
  return std::move(r.out);
}

}  // namespace cucore::detail
