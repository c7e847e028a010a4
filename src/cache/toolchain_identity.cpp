// The compiler identity and its memo.
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
#include "cache/toolchain_identity.hpp"

#include <fcntl.h>
#include <link.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cucore/linker.hpp>
#include <cucore/pathfinder.hpp>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "cache/cache_dir.hpp"
#include "hashing/hashing.hpp"
#include "loader/driver.hpp"
#include "loader/library.hpp"
#include "loader/toolkit.hpp"

namespace fs = std::filesystem;

namespace cucore::detail {
namespace {

constexpr std::string_view kMemoMagic = "cucore-nvrtc-memo 1";

std::optional<ToolchainStamp> stamp_of(const std::string& path) {
  struct stat st;
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return std::nullopt;
  return ToolchainStamp{path, std::uint64_t(st.st_ino), std::uint64_t(st.st_size),
                        std::int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

// The first `limit` bytes of a toolkit header (POSIX reads, not iostreams: a
// process's first ifstream costs ~0.1 ms of locale set-up).
std::string read_prefix(const fs::path& file, std::size_t limit) {
  std::string s;
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return s;
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    s.resize(std::min<std::size_t>(limit, static_cast<std::size_t>(st.st_size)));
    std::size_t got = 0;
    while (got < s.size()) {
      const ssize_t n = ::pread(fd, s.data() + got, s.size() - got, static_cast<off_t>(got));
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    s.resize(got);
  }
  ::close(fd);
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
ToolchainMemo identity_from_loaded() {
  ToolchainMemo id;
  const NvrtcTable& t = nvrtc();
  id.identity = "nvrtc " + std::to_string(t.major) + "." + std::to_string(t.minor);
  if (auto s = stamp_of(nvrtc_component_info().path)) id.stamps.push_back(*s);
  if (auto inc = pathfinder::cuda_include_dir()) {
    fs::path h = fs::path(*inc) / "cuda.h";
    id.identity += "; cuda.h " + define_value(read_prefix(h, 256 * 1024), "CUDA_VERSION");
    if (auto s = stamp_of(h.string())) id.stamps.push_back(*s);
  } else {
    id.identity += "; cuda.h none";
  }
  if (auto cccl = pathfinder::cccl_include_dir()) {
    fs::path h = fs::path(*cccl) / "cuda" / "std" / "__cccl" / "version.h";
    id.identity += "; cccl " + define_value(read_prefix(h, 16 * 1024), "CCCL_VERSION");
    if (auto s = stamp_of(h.string())) id.stamps.push_back(*s);
  } else {
    id.identity += "; cccl none";
  }
  return id;
}

// [addr, addr + size) as a pointer when it lies inside one of the object's
// loaded segments, else nullptr.
const char* loaded(const dl_phdr_info& object, ElfW(Addr) addr, std::size_t size) {
  for (ElfW(Half) k = 0; k < object.dlpi_phnum; ++k) {
    const ElfW(Phdr)& ph = object.dlpi_phdr[k];
    const ElfW(Addr) begin = object.dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && addr >= begin && size <= ph.p_memsz && addr - begin <= ph.p_memsz - size)
      return reinterpret_cast<const char*>(addr);
  }
  return nullptr;
}

}  // namespace

std::optional<RunPaths> run_paths_of(const dl_phdr_info& object) {
  const ElfW(Dyn)* dyn = nullptr;
  std::size_t dyn_size = 0;
  for (ElfW(Half) k = 0; k < object.dlpi_phnum; ++k) {
    const ElfW(Phdr)& ph = object.dlpi_phdr[k];
    if (ph.p_type != PT_DYNAMIC) continue;
    dyn_size = ph.p_memsz;
    dyn = reinterpret_cast<const ElfW(Dyn)*>(loaded(object, object.dlpi_addr + ph.p_vaddr, dyn_size));
    if (!dyn) return std::nullopt;
  }
  RunPaths out;
  if (!dyn) return out;  // linked statically: nothing of it steers a search
  ElfW(Addr) strtab = 0;
  std::size_t strsz = 0;
  std::optional<std::size_t> rpath, runpath;
  for (std::size_t k = 0; k < dyn_size / sizeof(ElfW(Dyn)) && dyn[k].d_tag != DT_NULL; ++k) {
    switch (dyn[k].d_tag) {
      case DT_STRTAB: strtab = dyn[k].d_un.d_ptr; break;
      case DT_STRSZ: strsz = dyn[k].d_un.d_val; break;
      case DT_RPATH: rpath = dyn[k].d_un.d_val; break;
      case DT_RUNPATH: runpath = dyn[k].d_un.d_val; break;
      default: break;
    }
  }
  if (!rpath && !runpath) return out;
  // The loader relocates the table's address in place where it can (glibc on
  // x86-64 does); elsewhere it is still relative to the object's base.
  const char* table = loaded(object, strtab, strsz);
  if (!table) table = loaded(object, object.dlpi_addr + strtab, strsz);
  if (!table) return std::nullopt;
  auto string_at = [&](std::optional<std::size_t> at, std::string& s) {
    if (!at) return true;
    if (*at >= strsz) return false;
    s.assign(table + *at, ::strnlen(table + *at, strsz - *at));
    return true;
  };
  if (!string_at(rpath, out.rpath) || !string_at(runpath, out.runpath)) return std::nullopt;
  return out;
}

namespace {

// The path this process's executable was started by, from the auxiliary
// vector (no system call) when that names one file (absolute, not a /proc or
// /dev alias such as /proc/self/exe); else the kernel's (a fresh process's
// readlink of /proc/self/exe costs more than the rest of a fingerprint).
std::string executable_path() {
  const char* execfn = reinterpret_cast<const char*>(::getauxval(AT_EXECFN));
  const std::string_view fn = execfn ? execfn : "";
  if (fn.starts_with('/') && !fn.starts_with("/proc/") && !fn.starts_with("/dev/")) return std::string(fn);
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe);
  return std::string(exe, n > 0 ? static_cast<std::size_t>(n) : 0);
}

// Any object of libcucore's: its address finds libcucore among the loaded objects.
constexpr char kSelf = 0;

// The two loaded objects whose run paths steer the OS loader when libcucore
// dlopens NVRTC: the executable (the first object dl_iterate_phdr visits) and
// libcucore itself.
struct SearchingObjects {
  bool exe_seen = false;
  std::optional<RunPaths> exe, self;
  std::string self_path;
};

int visit_object(dl_phdr_info* info, size_t, void* data) {
  auto& w = *static_cast<SearchingObjects*>(data);
  if (!w.exe_seen) {
    w.exe_seen = true;
    w.exe = run_paths_of(*info);
  }
  if (!loaded(*info, reinterpret_cast<ElfW(Addr)>(&kSelf), 1)) return 0;
  w.self = run_paths_of(*info);
  w.self_path = info->dlpi_name ? info->dlpi_name : "";
  return 1;
}

}  // namespace

void append_run_paths(std::string& fp, std::string_view label, const std::optional<RunPaths>& paths,
                      const std::function<std::string()>& location) {
  const std::string l(label);
  if (paths) fp += l + " rpath=" + paths->rpath + "\n" + l + " runpath=" + paths->runpath + "\n";
  if (!paths || paths->rpath.find('$') != std::string::npos || paths->runpath.find('$') != std::string::npos)
    fp += l + "=" + location() + "\n";
}

std::string toolchain_search_fingerprint() {
  std::string fp = "cucore-nvrtc-search-v2\n";
  for (const char* var : {"CUCORE_NVRTC_PATH", "LD_LIBRARY_PATH", "CONDA_PREFIX", "CUDA_PATH", "CUDA_HOME"}) {
    const char* v = std::getenv(var);
    fp += std::string(var) + "=" + (v ? v : "") + "\n";
  }
  for (const auto& s : python_site_packages()) fp += "site=" + s + "\n";
  // ldconfig rewrites its cache when system libraries come or go.
  if (auto s = stamp_of("/etc/ld.so.cache"))
    fp += "ld.so.cache=" + std::to_string(s->ino) + "," + std::to_string(s->size) + "," + std::to_string(s->mtime_ns) +
          "\n";
  // The run paths of the executable and of libcucore steer the OS loader's
  // search too; their locations only through a token such as $ORIGIN.
  SearchingObjects w;
  dl_iterate_phdr(visit_object, &w);
  append_run_paths(fp, "exe", w.exe, executable_path);
  append_run_paths(fp, "libcucore", w.self, [&w] { return w.self_path; });
  return fp;
}

namespace {

fs::path memo_dir() { return fs::path(cucore_cache_root().native() + "/toolchain"); }
std::string memo_name() { return "nvrtc-" + to_hex(sha256(toolchain_search_fingerprint())).substr(0, 32); }

// The memo, if its files are unchanged since it was written.
std::optional<ToolchainMemo> read_memo(const std::string& name) {
  std::string why;
  const int dfd = open_private_dir(memo_dir(), false, why);
  if (dfd < 0) return std::nullopt;
  auto text = read_file_safely(dfd, name.c_str(), 4096);  // a memo is a few hundred bytes
  ::close(dfd);
  if (!text) return std::nullopt;
  auto memo = parse_toolchain_memo(*text);
  if (!memo) return std::nullopt;
  for (const auto& s : memo->stamps) {
    auto now = stamp_of(s.path);
    if (!now || !(*now == s)) return std::nullopt;
  }
  return memo;
}

void write_memo(const std::string& name, const ToolchainMemo& memo) {
  // Best effort: without a memo the next process just loads NVRTC.
  const std::string body = format_toolchain_memo(memo);
  if (body.empty()) return;
  std::string why;
  const int dfd = open_private_dir(memo_dir(), true, why);
  if (dfd < 0) return;
  replace_file(dfd, name, body);
  (void)prune_toolchain_memos(dfd, kToolchainMemosKept, name);
  ::close(dfd);
}

}  // namespace

std::size_t prune_toolchain_memos(int dirfd, std::size_t keep, std::string_view just_written) {
  struct Memo {
    std::string name;
    struct timespec written;
  };
  std::vector<Memo> memos;
  for_each_entry(dirfd, [&](const char* name) {
    const std::string_view n = name;
    if (n.rfind("nvrtc-", 0) != 0 || n == just_written) return;
    struct stat st;
    if (::fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) return;
    memos.push_back({std::string(n), st.st_mtim});
  });
  const std::size_t others = keep > 0 ? keep - 1 : 0;  // the one just written counts
  if (memos.size() <= others) return 0;
  std::sort(memos.begin(), memos.end(), [](const Memo& a, const Memo& b) {
    return a.written.tv_sec != b.written.tv_sec ? a.written.tv_sec > b.written.tv_sec
                                                : a.written.tv_nsec > b.written.tv_nsec;
  });
  std::size_t removed = 0;
  for (std::size_t i = others; i < memos.size(); ++i) removed += ::unlinkat(dirfd, memos[i].name.c_str(), 0) == 0;
  return removed;
}

namespace {

// Whether this process has loaded an NVRTC, asked of the loader's own list:
// dlopen(RTLD_NOLOAD) by soname would search the library path and open files.
bool nvrtc_already_loaded() {
  return dl_iterate_phdr(
             [](dl_phdr_info* info, size_t, void*) {
               const char* base = info->dlpi_name ? std::strrchr(info->dlpi_name, '/') : nullptr;
               return base && std::strncmp(base + 1, "libnvrtc.so", 11) == 0 ? 1 : 0;
             },
             nullptr) != 0;
}

std::mutex g_identity_mutex;
std::string g_identity;  // empty until found
bool g_identity_from_memo = false;

}  // namespace

std::optional<ToolchainMemo> parse_toolchain_memo(std::string_view rest) {
  auto next_line = [&](std::string_view& line) {
    auto nl = rest.find('\n');
    if (nl == std::string_view::npos) return false;
    line = rest.substr(0, nl);
    rest.remove_prefix(nl + 1);
    return true;
  };
  std::string_view line;
  if (!next_line(line) || line != kMemoMagic) return std::nullopt;
  ToolchainMemo memo;
  if (!next_line(line) || line.empty()) return std::nullopt;
  memo.identity = line;
  while (next_line(line)) {
    // "<ino> <size> <mtime_ns> <path>"
    ToolchainStamp s;
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
    memo.stamps.push_back(std::move(s));
  }
  if (memo.stamps.empty() || !rest.empty()) return std::nullopt;
  return memo;
}

std::string format_toolchain_memo(const ToolchainMemo& memo) {
  if (memo.identity.empty() || memo.identity.find('\n') != std::string::npos) return {};
  std::string body = std::string(kMemoMagic) + "\n" + memo.identity + "\n";
  for (const auto& s : memo.stamps) {
    if (s.path.empty() || s.path.find('\n') != std::string::npos) return {};
    body +=
        std::to_string(s.ino) + " " + std::to_string(s.size) + " " + std::to_string(s.mtime_ns) + " " + s.path + "\n";
  }
  return body;
}

std::string nvrtc_identity() {
  std::lock_guard lock(g_identity_mutex);
  if (!g_identity.empty()) return g_identity;
  const std::string name = memo_name();
  std::optional<ToolchainMemo> memo = read_memo(name);  // its files unchanged since
  if (nvrtc_already_loaded()) {
    // Loaded already (by a compile, or by another library): the memo still
    // spares reading the headers, if it names this very library.
    if (memo && memo->stamps.front().path == nvrtc_component_info().path) {
      g_identity = memo->identity;
      return g_identity;
    }
  } else if (memo) {
    g_identity = memo->identity;
    g_identity_from_memo = true;
    return g_identity;
  }
  ToolchainMemo id = identity_from_loaded();
  write_memo(name, id);
  g_identity = id.identity;
  return g_identity;
}

bool refresh_nvrtc_identity() {
  std::lock_guard lock(g_identity_mutex);
  if (!g_identity_from_memo) return false;
  g_identity_from_memo = false;
  ToolchainMemo id = identity_from_loaded();
  if (id.identity == g_identity) return false;
  write_memo(memo_name(), id);
  g_identity = id.identity;
  return true;
}

std::string linker_identity(const ProgramOptions& options) {
  // PTX is assembled by the linker Program picks: nvJitLink, or the driver's.
  std::string backend = linker_backend(options.link_time_optimization.value_or(false));
  if (backend == "driver") return "driver " + std::to_string(driver().version);
  const NvJitLinkTable& t = nvjitlink();
  return backend + " " + std::to_string(t.major) + "." + std::to_string(t.minor);
}

std::string nvvm_identity() {
  try {
    const NvvmTable& t = libnvvm();
    return "nvvm " + std::to_string(t.major) + "." + std::to_string(t.minor) + "; ir " + std::to_string(t.ir_major) +
           "." + std::to_string(t.ir_minor) + "." + std::to_string(t.dbg_major) + "." + std::to_string(t.dbg_minor);
  } catch (const std::exception&) {
    return "nvvm unavailable";
  }
}

}  // namespace cucore::detail
