#pragma once
// Runs a shell command and collects its standard output and exit status
// (tests of the CLI, and of nvidia-smi's view on the GPU machine).
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

namespace cucore::test {

struct CommandResult {
  std::string out;
  int status = -1;  // the exit status; -1 when it did not exit normally
};

inline CommandResult run_command(const std::string& cmd) {
  CommandResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// Runs one test of this same test binary in a fresh process (`filter`, usually
// a DISABLED_ child half), with `env` ("NAME='value'") in its environment, and
// not sharded (a sharded parent's GTEST_* settings would shard its one test away).
inline CommandResult run_own_test(const std::string& filter, const std::string& env) {
  char exe[4096];
  const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len <= 0) return {};
  exe[len] = 0;
  return run_command("env -u GTEST_TOTAL_SHARDS -u GTEST_SHARD_INDEX -u GTEST_SHARD_STATUS_FILE " + env + " '" + exe +
                     "' --gtest_also_run_disabled_tests --gtest_filter=" + filter + " 2>&1");
}

// Runs the cucore tool with the environment pointing every cache at `home`
// (so the caller's own is never touched); its output, stdout and stderr
// together, and its exit status in `rc`.
inline std::string run_cli(const std::string& args, int& rc, const std::filesystem::path& home) {
  const std::string h = home.string();
  CommandResult r = run_command("HOME='" + h + "' XDG_CACHE_HOME='" + h + "/xdg' CUCORE_PROGRAM_CACHE_DIR='" + h +
                                "/default-programs' " + CUCORE_CLI_PATH + " " + args + " 2>&1");
  rc = r.status;
  return r.out;
}

}  // namespace cucore::test
