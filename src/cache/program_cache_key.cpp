// make_program_cache_key and the helpers the caches share: SHA-256, the entry
// checksum, structural checks, and the compiler identity (with its memo).
#include <dlfcn.h>
#include <fcntl.h>
// SHA256_* are deprecated in OpenSSL 3 (see sha256() below for why they are used).
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/evp.h>
#include <openssl/opensslv.h>
#include <openssl/sha.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cucore/linker.hpp>
#include <cucore/pathfinder.hpp>
#include <cucore/program_cache.hpp>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "loader/driver.hpp"
#include "loader/library.hpp"
#include "loader/toolkit.hpp"
#include "cache/program_cache_internal.hpp"

namespace fs = std::filesystem;

namespace cucore {
namespace detail {

// ---------------------------------------------------------------- digests

// OpenSSL's SHA-256. EVP's first use in a process sets up its provider (~1 ms
// here, twice the whole budget of a warm start), so where OpenSSL 3.x still has
// the direct SHA256_* functions (deprecated in 3.0, not removed; the same
// SHA-NI/AVX code behind EVP), they are used; else EVP. Both give the same
// digest; the tests check known SHA-256 vectors.
#if OPENSSL_VERSION_MAJOR < 4 && !defined(OPENSSL_NO_DEPRECATED_3_0)
std::string sha256(std::string_view data) {
  unsigned char out[SHA256_DIGEST_LENGTH];
  SHA256_CTX ctx;
  if (SHA256_Init(&ctx) != 1 || SHA256_Update(&ctx, data.data(), data.size()) != 1 || SHA256_Final(out, &ctx) != 1)
    throw std::runtime_error("OpenSSL: SHA-256 failed");
  return std::string(reinterpret_cast<const char*>(out), sizeof out);
}
#else
namespace {
const EVP_MD* sha256_md() {
  // Fetched once: implicit fetches by name cost more than the hash of a small key.
  static EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  if (!md) throw std::runtime_error("OpenSSL: SHA-256 is unavailable");
  return md;
}
struct CtxFree {
  void operator()(EVP_MD_CTX* c) const noexcept { EVP_MD_CTX_free(c); }
};
}  // namespace

std::string sha256(std::string_view data) {
  // One context per thread, reused: creating one per key would cost more than hashing.
  thread_local std::unique_ptr<EVP_MD_CTX, CtxFree> ctx{EVP_MD_CTX_new()};
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (!ctx || EVP_DigestInit_ex2(ctx.get(), sha256_md(), nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), data.data(), data.size()) != 1 || EVP_DigestFinal_ex(ctx.get(), out, &n) != 1 ||
      n != kProgramCacheKeySize)
    throw std::runtime_error("OpenSSL: SHA-256 failed");
  return std::string(reinterpret_cast<const char*>(out), n);
}
#endif

std::string to_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(bytes.size() * 2, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    auto b = static_cast<unsigned char>(bytes[i]);
    out[2 * i] = kDigits[b >> 4];
    out[2 * i + 1] = kDigits[b & 15];
  }
  return out;
}

namespace {
constexpr std::uint64_t P1 = 11400714785074694791ULL, P2 = 14029467366897019727ULL, P3 = 1609587929392839161ULL,
                        P4 = 9650029242287828579ULL, P5 = 2870177450012600261ULL;
inline std::uint64_t rotl(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline std::uint64_t load64(const unsigned char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;  // little-endian hosts only (x86-64, aarch64), as the rest of cucore
}
inline std::uint32_t load32(const unsigned char* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline std::uint64_t round64(std::uint64_t acc, std::uint64_t in) { return rotl(acc + in * P2, 31) * P1; }
inline std::uint64_t merge64(std::uint64_t acc, std::uint64_t v) { return (acc ^ round64(0, v)) * P1 + P4; }
}  // namespace

std::uint64_t checksum64(const void* data, std::size_t size, std::uint64_t seed) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  const unsigned char* end = p + size;
  std::uint64_t h;
  if (size >= 32) {
    std::uint64_t v1 = seed + P1 + P2, v2 = seed + P2, v3 = seed, v4 = seed - P1;
    const unsigned char* limit = end - 32;
    do {
      v1 = round64(v1, load64(p));
      v2 = round64(v2, load64(p + 8));
      v3 = round64(v3, load64(p + 16));
      v4 = round64(v4, load64(p + 24));
      p += 32;
    } while (p <= limit);
    h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
    h = merge64(h, v1);
    h = merge64(h, v2);
    h = merge64(h, v3);
    h = merge64(h, v4);
  } else {
    h = seed + P5;
  }
  h += size;
  for (; p + 8 <= end; p += 8) h = rotl(h ^ round64(0, load64(p)), 27) * P1 + P4;
  if (p + 4 <= end) {
    h = rotl(h ^ (std::uint64_t(load32(p)) * P1), 23) * P2 + P3;
    p += 4;
  }
  for (; p < end; ++p) h = rotl(h ^ (*p * P5), 11) * P1;
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}

fs::path cucore_cache_root() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x == '/') return fs::path(x) / "cucore";
  const char* home = std::getenv("HOME");
  if (!home || !*home) {
    if (const passwd* pw = getpwuid(getuid()); pw && pw->pw_dir) home = pw->pw_dir;
  }
  if (home && *home) return fs::path(home) / ".cache" / "cucore";
  return fs::temp_directory_path() / ("cucore-" + std::to_string(getuid()));
}

// ---------------------------------------------------------------- structure

namespace {
template <typename T>
T read_le(std::span<const std::byte> b, std::size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}

bool valid_elf64(std::span<const std::byte> b, int machine) {
  if (b.size() < 64) return false;
  const auto* u = reinterpret_cast<const unsigned char*>(b.data());
  if (u[0] != 0x7f || u[1] != 'E' || u[2] != 'L' || u[3] != 'F' || u[4] != 2 /*64-bit*/ || u[5] != 1 /*LE*/)
    return false;
  if (machine >= 0 && read_le<std::uint16_t>(b, 18) != machine) return false;
  const std::uint64_t n = b.size();
  const auto phoff = read_le<std::uint64_t>(b, 32), shoff = read_le<std::uint64_t>(b, 40);
  const auto phentsize = read_le<std::uint16_t>(b, 54), phnum = read_le<std::uint16_t>(b, 56);
  const auto shentsize = read_le<std::uint16_t>(b, 58), shnum = read_le<std::uint16_t>(b, 60);
  if (phnum && (phoff > n || std::uint64_t(phentsize) * phnum > n - phoff)) return false;
  if (shnum) {
    if (shentsize < 64 || shoff > n || std::uint64_t(shentsize) * shnum > n - shoff) return false;
    // Every section's bytes must be there: truncation anywhere cuts one off.
    for (std::uint64_t i = 0; i < shnum; ++i) {
      const std::uint64_t sh = shoff + i * shentsize;
      const auto type = read_le<std::uint32_t>(b, sh + 4);
      const auto off = read_le<std::uint64_t>(b, sh + 24), size = read_le<std::uint64_t>(b, sh + 32);
      if (type != 8 /*SHT_NOBITS*/ && type != 0 /*SHT_NULL*/ && (off > n || size > n - off)) return false;
    }
  }
  return true;
}

bool valid_fatbin(std::span<const std::byte> b) {
  if (b.size() < 16 || read_le<std::uint32_t>(b, 0) != 0xBA55ED50u) return false;
  const auto header = read_le<std::uint16_t>(b, 6);
  const auto payload = read_le<std::uint64_t>(b, 8);
  return header >= 16 && header <= b.size() && payload <= b.size() - header;
}

bool valid_ptx(std::span<const std::byte> b) {
  std::size_t n = b.size();
  while (n && b[n - 1] == std::byte{0}) --n;  // NVRTC's PTX ends with a NUL
  if (n == 0) return false;
  std::string_view text(reinterpret_cast<const char*>(b.data()), n);
  return text.find('\0') == std::string_view::npos && text.find(".target") != std::string_view::npos;
}

bool valid_ltoir(std::span<const std::byte> b) { return b.size() >= 8 && read_le<std::uint32_t>(b, 0) == 0x7F4E43EDu; }

bool valid_archive(std::span<const std::byte> b) { return b.size() >= 8 && std::memcmp(b.data(), "!<arch>\n", 8) == 0; }
}  // namespace

bool structurally_valid(std::string_view type, std::span<const std::byte> code) noexcept {
  if (type == "cubin") return valid_elf64(code, 190 /*EM_CUDA*/);
  if (type == "object") return valid_elf64(code, -1);
  if (type == "fatbin") return valid_fatbin(code);
  if (type == "ptx") return valid_ptx(code);
  if (type == "ltoir") return valid_ltoir(code);
  if (type == "library") return valid_archive(code);
  return !code.empty();
}

std::string detect_code_type(std::span<const std::byte> code) noexcept {
  if (valid_elf64(code, 190)) return "cubin";
  if (valid_fatbin(code)) return "fatbin";
  if (valid_ltoir(code)) return "ltoir";
  if (valid_elf64(code, -1)) return "object";
  if (valid_archive(code)) return "library";
  if (valid_ptx(code)) return "ptx";
  return {};
}

// ---------------------------------------------------------------- compiler identity
//
// The key must name the compiler, but loading NVRTC just to ask its version
// costs ~8 ms: more than a whole warm-cache start of a fresh process. So the
// identity found once (by loading it) is kept in a small memo file together with
// the stamps (inode, size, mtime) of the files it came from, under a name
// derived from everything that steers the library search (environment, the
// loader's cache, the executable). A later process whose stamps still match uses
// the memo without loading NVRTC; any mismatch loads it and rewrites the memo.
// Should the search ever pick another NVRTC than the memo names, the first
// compile notices (refresh_nvrtc_identity) and stores under the corrected key.

namespace {

struct Stamp {
  std::string path;
  std::uint64_t ino = 0, size = 0;
  std::int64_t mtime_ns = 0;
  bool operator==(const Stamp&) const = default;
};

std::optional<Stamp> stamp_of(const std::string& path) {
  struct stat st;
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return std::nullopt;
  return Stamp{path, std::uint64_t(st.st_ino), std::uint64_t(st.st_size),
               std::int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

struct Identity {
  std::string text;
  std::vector<Stamp> stamps;
};

// POSIX reads, not iostreams: a process's first ifstream costs ~0.1 ms of
// locale set-up, which a warm start cannot afford.
std::string read_prefix(const fs::path& file, std::size_t limit) {
  std::string s;
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return s;
  s.resize(limit);
  std::size_t got = 0;
  while (got < limit) {
    ssize_t n = ::read(fd, s.data() + got, limit - got);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  s.resize(got);
  return s;
}

// "#define NAME 13000" -> "13000"
std::string define_value(const std::string& text, std::string_view name) {
  std::string needle = "#define " + std::string(name) + " ";
  auto at = text.find(needle);
  if (at == std::string::npos) return "unknown";
  auto begin = at + needle.size();
  auto end = text.find_first_of("\r\n", begin);
  std::string v = text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.pop_back();
  return v;
}

// Loads NVRTC (if not yet) and reads the versions of NVRTC and the headers it compiles with.
Identity identity_from_loaded() {
  Identity id;
  const NvrtcTable& t = nvrtc();
  id.text = "nvrtc " + std::to_string(t.major) + "." + std::to_string(t.minor);
  if (auto s = stamp_of(nvrtc_component_info().path)) id.stamps.push_back(*s);
  if (auto inc = pathfinder::cuda_include_dir()) {
    fs::path h = fs::path(*inc) / "cuda.h";
    id.text += "; cuda.h " + define_value(read_prefix(h, 256 * 1024), "CUDA_VERSION");
    if (auto s = stamp_of(h.string())) id.stamps.push_back(*s);
  } else {
    id.text += "; cuda.h none";
  }
  if (auto cccl = pathfinder::cccl_include_dir()) {
    fs::path h = fs::path(*cccl) / "cuda" / "std" / "__cccl" / "version.h";
    id.text += "; cccl " + define_value(read_prefix(h, 16 * 1024), "CCCL_VERSION");
    if (auto s = stamp_of(h.string())) id.stamps.push_back(*s);
  } else {
    id.text += "; cccl none";
  }
  return id;
}

std::string search_fingerprint() {
  std::string fp = "cucore-nvrtc-search-v1\n";
  for (const char* var : {"CUCORE_NVRTC_PATH", "LD_LIBRARY_PATH", "CONDA_PREFIX", "CUDA_PATH", "CUDA_HOME"}) {
    const char* v = std::getenv(var);
    fp += std::string(var) + "=" + (v ? v : "") + "\n";
  }
  for (const auto& s : python_site_packages()) fp += "site=" + s + "\n";
  // ldconfig rewrites its cache when system libraries come or go.
  if (auto s = stamp_of("/etc/ld.so.cache"))
    fp += "ld.so.cache=" + std::to_string(s->ino) + "," + std::to_string(s->size) + "," + std::to_string(s->mtime_ns) +
          "\n";
  // The executable's RPATH steers the OS loader too.
  char exe[4096];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe);
  fp += "exe=" + std::string(exe, n > 0 ? static_cast<std::size_t>(n) : 0) + "\n";
  return fp;
}

fs::path memo_path() {
  return cucore_cache_root() / "toolchain" / ("nvrtc-" + to_hex(sha256(search_fingerprint())).substr(0, 32));
}

std::optional<Identity> read_memo(const fs::path& path) {
  const std::string text = read_prefix(path, 4096);  // a memo is a few hundred bytes
  std::string_view rest = text;
  auto next_line = [&](std::string_view& line) {
    auto nl = rest.find('\n');
    if (nl == std::string_view::npos) return false;
    line = rest.substr(0, nl);
    rest.remove_prefix(nl + 1);
    return true;
  };
  std::string_view line;
  if (!next_line(line) || line != "cucore-nvrtc-memo 1") return std::nullopt;
  Identity id;
  if (!next_line(line) || line.empty()) return std::nullopt;
  id.text = line;
  while (next_line(line)) {
    // "<ino> <size> <mtime_ns> <path>"
    Stamp s;
    const char* p = line.data();
    const char* end = line.data() + line.size();
    auto number = [&](auto& out) {
      auto r = std::from_chars(p, end, out);
      if (r.ec != std::errc() || r.ptr == end || *r.ptr != ' ') return false;
      p = r.ptr + 1;
      return true;
    };
    if (!number(s.ino) || !number(s.size) || !number(s.mtime_ns) || p == end) return std::nullopt;
    s.path.assign(p, end);
    id.stamps.push_back(std::move(s));
  }
  if (id.stamps.empty()) return std::nullopt;
  for (const auto& s : id.stamps) {
    auto now = stamp_of(s.path);
    if (!now || !(*now == s)) return std::nullopt;
  }
  return id;
}

void write_memo(const fs::path& path, const Identity& id) {
  // Best effort: without a memo the next process just loads NVRTC.
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  std::string body = "cucore-nvrtc-memo 1\n" + id.text + "\n";
  for (const auto& s : id.stamps) {
    if (s.path.find('\n') != std::string::npos) return;
    body +=
        std::to_string(s.ino) + " " + std::to_string(s.size) + " " + std::to_string(s.mtime_ns) + " " + s.path + "\n";
  }
  std::string tmp = path.string() + ".tmp-" + std::to_string(getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  bool ok = ::write(fd, body.data(), body.size()) == static_cast<ssize_t>(body.size());
  ok = (::close(fd) == 0) && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) ::unlink(tmp.c_str());
}

bool nvrtc_already_loaded() {
  for (const char* so : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) {
    if (void* h = dlopen(so, RTLD_LAZY | RTLD_NOLOAD)) {
      dlclose(h);
      return true;
    }
  }
  return false;
}

std::mutex g_identity_mutex;
std::string g_identity;  // empty until found
bool g_identity_from_memo = false;

}  // namespace

std::string nvrtc_identity() {
  std::lock_guard lock(g_identity_mutex);
  if (!g_identity.empty()) return g_identity;
  const fs::path memo_file = memo_path();
  std::optional<Identity> memo = read_memo(memo_file);  // its files unchanged since
  if (nvrtc_already_loaded()) {
    // Loaded already (by Program's option check, or by another library): the
    // memo still spares reading the headers, if it names this very library.
    if (memo && memo->stamps.front().path == nvrtc_component_info().path) {
      g_identity = memo->text;
      return g_identity;
    }
  } else if (memo) {
    g_identity = memo->text;
    g_identity_from_memo = true;
    return g_identity;
  }
  Identity id = identity_from_loaded();
  write_memo(memo_file, id);
  g_identity = id.text;
  return g_identity;
}

bool refresh_nvrtc_identity() {
  std::lock_guard lock(g_identity_mutex);
  if (!g_identity_from_memo) return false;
  g_identity_from_memo = false;
  Identity id = identity_from_loaded();
  if (id.text == g_identity) return false;
  write_memo(memo_path(), id);
  g_identity = id.text;
  return true;
}

namespace {

std::string linker_identity(const ProgramOptions& options) {
  // PTX is assembled by the linker Program picks: nvJitLink, or the driver's.
  std::string backend = linker_backend(options.link_time_optimization.value_or(false));
  if (backend == "driver") return "driver " + std::to_string(driver().version);
  const NvJitLinkTable& t = nvjitlink();
  return backend + " " + std::to_string(t.major) + "." + std::to_string(t.minor);
}

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

// SHA-256 of the code, remembered per thread: a cached compile keys the same
// source on every call, and hashing 2 KB with SHA-256 costs ~2 us, most of a hit.
// A remembered digest is used only after a full comparison with the stored
// copy of the code, so it can never stand for other code.
const std::string& code_digest(std::string_view code) {
  struct Slot {
    std::uint64_t hash = 0;
    std::string code, digest;
  };
  thread_local Slot slots[8];
  thread_local std::string uncached;
  if (code.size() > (256u << 10)) return uncached = sha256(code);  // big sources: not worth a copy
  const std::uint64_t h = checksum64(code.data(), code.size(), 0x636f6465);
  Slot& s = slots[h % 8];
  if (s.digest.empty() || s.hash != h || s.code != code) {
    s.digest = sha256(code);
    s.code.assign(code);
    s.hash = h;
  }
  return s.digest;
}

[[noreturn]] void refuse(const std::string& what) { throw std::invalid_argument("make_program_cache_key: " + what); }

}  // namespace
}  // namespace detail

std::string make_program_cache_key(std::string_view code, std::string_view code_type, const ProgramOptions& options,
                                   std::string_view target, std::span<const std::string> name_expressions,
                                   std::string_view extra_digest) {
  using detail::refuse;
  if (code_type != "c++" && code_type != "ptx")
    refuse("code_type must be \"c++\" or \"ptx\", got \"" + std::string(code_type) + "\"");
  if (target != "cubin" && target != "ptx" && target != "ltoir")
    refuse("target must be \"cubin\", \"ptx\" or \"ltoir\", got \"" + std::string(target) + "\"");
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
  const std::vector<std::string> flags = options.as_nvrtc_flags();
  std::vector<std::string_view> names(name_expressions.begin(), name_expressions.end());
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());

  thread_local std::string buf;  // reused: keys are computed on every cached compile
  buf.clear();
  detail::KeyWriter w{buf};
  w.field("schema", "cucore-program-cache-key-1");
  w.field("compiler", code_type == "c++" ? detail::nvrtc_identity() : detail::linker_identity(options));
  w.field("code_type", code_type);
  w.field("target", target);
  w.field("code_sha256", detail::code_digest(code));
  w.list("flags", flags);
  w.list("name_expressions", names);
  w.field("name", options.name);
  w.field("extra_digest", extra_digest);
  return detail::sha256(buf);
}

std::string program_cache_key_hex(std::string_view key) { return detail::to_hex(key); }

}  // namespace cucore
