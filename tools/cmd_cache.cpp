// `cucore cache info` and `cucore cache clear`: the default program cache's
// directory ($XDG_CACHE_HOME/cucore/programs, or --dir), what it holds, and this
// run's hit/miss counts. --json for scripts.
#include <cucore/program_cache.hpp>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "command.hpp"

namespace cucore::cli {
namespace {

// JSON text of `j`. A path need not be UTF-8 (a Latin-1 directory name): bytes
// that are not are replaced by U+FFFD rather than failing the command.
std::string json_text(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

struct CacheArgs {
  std::optional<std::string> dir;
  bool json = false;
};

// The cache the command works on: the process default, or the one at --dir.
FileStreamProgramCache& disk_cache(const CacheArgs& a, std::optional<FileStreamProgramCache>& own) {
  if (!a.dir) return default_two_level_program_cache().disk();
  // An empty --dir (an unset variable in a script) must not mean the default cache.
  if (a.dir->empty()) throw std::invalid_argument("--dir is empty; name a cache directory, or leave --dir out");
  own.emplace(*a.dir);
  return *own;
}

int run_info(const CacheArgs& a) {
  std::optional<FileStreamProgramCache> own;
  FileStreamProgramCache& cache = disk_cache(a, own);
  const auto entries = cache.entries();  // throws when the directory cannot be read
  std::size_t bytes = 0;
  std::map<std::string, std::size_t> by_type;
  for (const auto& e : entries) {
    bytes += e.size_bytes;
    ++by_type[e.code_type ? std::string(to_string(*e.code_type)) : "unrecorded"];
  }
  std::error_code ec;
  const bool exists = std::filesystem::is_directory(cache.path(), ec);
  const CacheStats s = a.dir ? cache.stats() : default_program_cache().stats();
  if (a.json) {
    nlohmann::json j{
        {"directory", cache.path().string()},
        {"exists", exists},
        {"entries", entries.size()},
        {"bytes", bytes},
        {"by_type", by_type},
        {"max_size_bytes", cache.max_size_bytes() ? nlohmann::json(*cache.max_size_bytes()) : nlohmann::json()},
        {"this_run", {{"hits", s.hits}, {"misses", s.misses}, {"evictions", s.evictions}, {"errors", s.errors}}}};
    std::printf("%s\n", json_text(j).c_str());
    return 0;
  }
  std::printf("directory   %s%s\n", cache.path().c_str(), exists ? "" : " (not created yet)");
  std::printf("entries     %zu", entries.size());
  if (!by_type.empty()) {
    std::printf(" (");
    bool first = true;
    for (const auto& [t, n] : by_type) {
      std::printf("%s%zu %s", first ? "" : ", ", n, t.c_str());
      first = false;
    }
    std::printf(")");
  }
  std::printf("\nbytes       %zu", bytes);
  if (cache.max_size_bytes()) std::printf(" of %zu", *cache.max_size_bytes());
  std::printf("\nthis run    %llu hits, %llu misses, %llu evictions, %llu errors\n",
              static_cast<unsigned long long>(s.hits), static_cast<unsigned long long>(s.misses),
              static_cast<unsigned long long>(s.evictions), static_cast<unsigned long long>(s.errors));
  return 0;
}

int run_clear(const CacheArgs& a) {
  std::optional<FileStreamProgramCache> own;
  FileStreamProgramCache& cache = disk_cache(a, own);
  const std::size_t n = cache.entries().size();
  cache.clear();
  const std::size_t left = cache.entries().size();
  if (a.json)
    std::printf("%s\n",
                json_text({{"directory", cache.path().string()}, {"removed", n - left}, {"left", left}}).c_str());
  else
    std::printf("removed %zu entries from %s\n", n - left, cache.path().c_str());
  if (left) {
    std::fprintf(stderr, "cucore cache clear: %zu entries could not be removed\n", left);
    return 1;
  }
  return 0;
}

const RegisterCommand cache{[](CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("cache", "The program cache: where it is, what it holds; clear it");
  cmd->require_subcommand(1);
  static CacheArgs args;
  auto* info = cmd->add_subcommand("info", "Directory, entries, bytes, and this run's hits and misses");
  auto* clear = cmd->add_subcommand("clear", "Remove every entry");
  for (auto* sub : {info, clear}) {
    sub->add_option("--dir", args.dir, "A cache directory other than the default");
    sub->add_flag("--json", args.json, "Print JSON");
  }
  info->callback([&exit_code] {
    try {
      exit_code = run_info(args);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "cucore cache info: %s\n", e.what());
      exit_code = 1;
    }
  });
  clear->callback([&exit_code] {
    try {
      exit_code = run_clear(args);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "cucore cache clear: %s\n", e.what());
      exit_code = 1;
    }
  });
}};

}  // namespace
}  // namespace cucore::cli
