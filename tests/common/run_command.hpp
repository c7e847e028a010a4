#pragma once
// Runs a shell command and collects its standard output and exit status
// (tests of the CLI, and of nvidia-smi's view on the GPU machine).
#include <sys/wait.h>

#include <array>
#include <cstdio>
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

}  // namespace cucore::test
