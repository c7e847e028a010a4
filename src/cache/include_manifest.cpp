// Include manifests: memo, disk, and the check of their probes.
#include "cache/include_manifest.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <ctime>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "cache/cache_dir.hpp"
#include "hashing/hashing.hpp"

namespace fs = std::filesystem;

namespace cucore::detail {
namespace {

constexpr std::string_view kMagic = "cucore-include-manifest 1";
constexpr std::size_t kMaxManifestBytes = 4 << 20;
constexpr std::size_t kMaxMemo = 4096;
// Manifests not written for this long are swept (a sweep at most once a process).
constexpr std::time_t kManifestLifetimeSeconds = 30 * 24 * 3600;

std::mutex g_memo_mutex;
std::unordered_map<std::string, std::shared_ptr<const std::vector<IncludeProbe>>> g_memo;

void remember(std::string_view key, std::vector<IncludeProbe> probes) {
  auto shared = std::make_shared<const std::vector<IncludeProbe>>(std::move(probes));
  std::lock_guard lock(g_memo_mutex);
  if (g_memo.size() >= kMaxMemo) g_memo.clear();
  g_memo.insert_or_assign(std::string(key), std::move(shared));
}

fs::path manifest_dir() { return cucore_cache_root() / "includes"; }

void sweep_old_manifests(int dfd) {
  const std::time_t now = std::time(nullptr);
  for_each_entry(dfd, [&](const char* name) {
    struct stat st;
    if (name[0] != '.' && ::fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        now - st.st_mtim.tv_sec > kManifestLifetimeSeconds)
      ::unlinkat(dfd, name, 0);
  });
}

template <typename T>
bool number(std::string_view& rest, T& out) {
  auto r = std::from_chars(rest.data(), rest.data() + rest.size(), out);
  if (r.ec != std::errc() || r.ptr == rest.data() + rest.size() || *r.ptr != ' ') return false;
  rest.remove_prefix(static_cast<std::size_t>(r.ptr - rest.data()) + 1);
  return true;
}

bool from_hex(std::string_view hex, std::string& out) {
  if (hex.size() != 2 * kSha256Size) return false;
  out.clear();
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    unsigned v = 0;
    auto r = std::from_chars(hex.data() + i, hex.data() + i + 2, v, 16);
    if (r.ec != std::errc() || r.ptr != hex.data() + i + 2) return false;
    out.push_back(static_cast<char>(v));
  }
  return true;
}

}  // namespace

bool probes_hold(const std::vector<IncludeProbe>& probes) {
  for (const auto& p : probes) {
    const IncludeProbe now = stat_probe(p.path);
    if (now.kind != p.kind) return false;
    if (p.kind != IncludeProbe::file) continue;
    if (p.stamp_trusted && now.ino == p.ino && now.size == p.size && now.mtime_ns == p.mtime_ns &&
        now.ctime_ns == p.ctime_ns)
      continue;
    auto digest = header_digest(p.path);  // touched, or too recent to trust: compare the contents
    if (!digest || *digest != p.digest) return false;
  }
  return true;
}

std::optional<std::vector<IncludeProbe>> load_include_manifest(std::string_view key) {
  {
    std::lock_guard lock(g_memo_mutex);
    if (auto it = g_memo.find(std::string(key)); it != g_memo.end()) return *it->second;
  }
  std::string why;
  const int dfd = open_private_dir(manifest_dir(), false, why);
  if (dfd < 0) return std::nullopt;
  auto text = read_file_safely(dfd, to_hex(key).c_str(), kMaxManifestBytes);
  ::close(dfd);
  if (!text) return std::nullopt;
  auto probes = parse_include_manifest(*text);
  if (probes) remember(key, *probes);
  return probes;
}

void store_include_manifest(std::string_view key, const std::vector<IncludeProbe>& probes) {
  remember(key, probes);
  const std::string text = format_include_manifest(probes);
  if (text.empty()) return;
  std::string why;
  const int dfd = open_private_dir(manifest_dir(), true, why);
  if (dfd < 0) return;  // best effort: without it the next process reads the headers
  replace_file(dfd, to_hex(key), text);
  static std::once_flag swept;
  std::call_once(swept, [dfd] { sweep_old_manifests(dfd); });
  ::close(dfd);
}

std::string format_include_manifest(const std::vector<IncludeProbe>& probes) {
  std::string out = std::string(kMagic) + "\n";
  for (const auto& p : probes) {
    if (p.path.empty() || p.path.find('\n') != std::string::npos) return {};
    switch (p.kind) {
      case IncludeProbe::file:
        if (p.digest.size() != kSha256Size) return {};
        out += "F " + std::to_string(p.ino) + " " + std::to_string(p.size) + " " + std::to_string(p.mtime_ns) + " " +
               std::to_string(p.ctime_ns) + " " + (p.stamp_trusted ? "1 " : "0 ") + to_hex(p.digest) + " ";
        break;
      case IncludeProbe::directory:
        out += "D ";
        break;
      case IncludeProbe::absent:
        out += "A ";
        break;
      case IncludeProbe::other:
        return {};  // never followed, so never recorded
    }
    out += p.path + "\n";
  }
  return out;
}

std::optional<std::vector<IncludeProbe>> parse_include_manifest(std::string_view text) noexcept {
  try {
    auto nl = text.find('\n');
    if (nl == std::string_view::npos || text.substr(0, nl) != kMagic) return std::nullopt;
    text.remove_prefix(nl + 1);
    std::vector<IncludeProbe> probes;
    while (!text.empty()) {
      nl = text.find('\n');
      if (nl == std::string_view::npos) return std::nullopt;
      std::string_view line = text.substr(0, nl);
      text.remove_prefix(nl + 1);
      if (line.size() < 3 || line[1] != ' ') return std::nullopt;
      IncludeProbe p;
      const char kind = line[0];
      line.remove_prefix(2);
      if (kind == 'F') {
        p.kind = IncludeProbe::file;
        int trusted = 0;
        if (!number(line, p.ino) || !number(line, p.size) || !number(line, p.mtime_ns) || !number(line, p.ctime_ns) ||
            !number(line, trusted) || trusted < 0 || trusted > 1)
          return std::nullopt;
        p.stamp_trusted = trusted == 1;
        const auto sp = line.find(' ');
        if (sp == std::string_view::npos || !from_hex(line.substr(0, sp), p.digest)) return std::nullopt;
        line.remove_prefix(sp + 1);
      } else if (kind == 'D') {
        p.kind = IncludeProbe::directory;
      } else if (kind != 'A') {
        return std::nullopt;
      }
      if (line.empty() || line.front() != '/') return std::nullopt;  // recorded paths are absolute
      p.path = line;
      probes.push_back(std::move(p));
    }
    return probes;
  } catch (...) {  // std::bad_alloc
    return std::nullopt;
  }
}

}  // namespace cucore::detail
