#pragma once
// Shared by the compilation and cache tests.
#include <cucore/program.hpp>

#include <gtest/gtest.h>

#include <functional>
#include <ostream>
#include <stdexcept>
#include <string>

namespace cucore {
// GoogleTest prints CodeType values by name.
inline void PrintTo(CodeType type, std::ostream* os) { *os << to_string(type); }
}  // namespace cucore

namespace cucore::test {

// A templated SAXPY: exercises name expressions ("saxpy<float>").
inline const std::string kSaxpyTemplate = R"(
template <typename T>
__global__ void saxpy(T a, const T* x, const T* y, T* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}
)";

inline ProgramOptions sm90() { return ProgramOptions{.arch = "sm_90"}; }

// Runs `fn`, expects std::invalid_argument whose message names `field`.
inline void expect_invalid(const std::function<void()>& fn, const std::string& field) {
  try {
    fn();
    ADD_FAILURE() << "no std::invalid_argument for " << field;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << "message does not name " << field << ": "
                                                                     << e.what();
  }
}

}  // namespace cucore::test

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace cucore::test {

// Runs `fn` in a forked child and returns its result (the child's exit code),
// or -1 when it did not finish within `seconds`: the child (and any process it
// started) is then killed, so a hang fails the test instead of stalling the suite.
inline int run_with_timeout(const std::function<int()>& fn, int seconds = 20) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);  // its own group: a timeout kills whatever it started too
    int rc = 99;
    try {
      rc = fn();
    } catch (...) {
      rc = 98;
    }
    ::_exit(rc);
  }
  if (pid < 0) return -2;
  ::setpgid(pid, pid);  // also here: whichever of the two runs first
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace cucore::test
