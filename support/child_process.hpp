#pragma once
// Real child processes for the IPC and checkpoint tests (and bench_ipc): each
// runs a named role of this same executable, started by exec (a process that
// has used CUDA must not fork without exec), connected to its parent by a
// Unix-domain socket (SOCK_SEQPACKET: one send, one record), and killed if it
// outlives its deadline. Reads on the parent's end time out too, so a stuck
// child fails the test instead of hanging it.
//
//   CUCORE_CHILD_ROLE(importer) { int s = socket; ...; return 0; }   // at namespace scope
//   cucore::test::Child c("importer", {"arg"});
//   ... exchange messages on c.socket() ...
//   ASSERT_EQ(c.wait(std::chrono::seconds(60)), 0);
#include <cucore/ipc.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <vector>

extern char** environ;

namespace cucore::test {

inline constexpr const char* kChildRoleVariable = "CUCORE_TEST_CHILD_ROLE";
inline constexpr int kChildSocket = 3;  // the child's end of the socket

// Runs `fn` and exits with its status when this process was started as `role`.
// Called during static initialization (CUCORE_CHILD_ROLE), before main.
struct ChildRole {
  ChildRole(const char* role, int (*fn)(int socket, const std::vector<std::string>& args)) {
    const char* want = std::getenv(kChildRoleVariable);
    if (!want || std::strcmp(want, role) != 0) return;
    std::vector<std::string> args;
    for (int i = 0;; ++i) {
      const char* a = std::getenv(("CUCORE_TEST_CHILD_ARG" + std::to_string(i)).c_str());
      if (!a) break;
      args.emplace_back(a);
    }
    int status = 1;
    try {
      status = fn(kChildSocket, args);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child %s (pid %d) failed: %s\n", role, static_cast<int>(getpid()), e.what());
    }
    std::fflush(nullptr);
    std::_Exit(status);  // no static destructors: the role's objects are gone already
  }
};

#define CUCORE_CHILD_ROLE(name)                                                         \
  int name##_role(int socket, const std::vector<std::string>& args);                    \
  [[maybe_unused]] const ::cucore::test::ChildRole name##_registration{#name, &name##_role}; \
  int name##_role([[maybe_unused]] int socket, [[maybe_unused]] const std::vector<std::string>& args)

class Child {
 public:
  Child(const std::string& role, const std::vector<std::string>& args = {},
        std::chrono::seconds read_timeout = std::chrono::seconds(120)) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
      throw std::system_error(errno, std::generic_category(), "socketpair");
    socket_ = sv[0];
    timeval tv{static_cast<time_t>(read_timeout.count()), 0};
    setsockopt(socket_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::vector<std::string> env_strings;
    for (char** e = environ; *e; ++e)
      if (std::strncmp(*e, "CUCORE_TEST_CHILD_", 18) != 0) env_strings.emplace_back(*e);
    env_strings.push_back(std::string(kChildRoleVariable) + "=" + role);
    for (std::size_t i = 0; i < args.size(); ++i)
      env_strings.push_back("CUCORE_TEST_CHILD_ARG" + std::to_string(i) + "=" + args[i]);
    std::vector<char*> env;
    for (auto& s : env_strings) env.push_back(s.data());
    env.push_back(nullptr);
    std::string exe = "/proc/self/exe";
    char* argv[] = {exe.data(), nullptr};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], kChildSocket);  // dup2 clears close-on-exec
    int rc = posix_spawn(&pid_, exe.c_str(), &fa, nullptr, argv, env.data());
    posix_spawn_file_actions_destroy(&fa);
    ::close(sv[1]);
    if (rc != 0) {
      ::close(socket_);
      throw std::system_error(rc, std::generic_category(), "posix_spawn of role " + role);
    }
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (socket_ >= 0) ::close(socket_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  int socket() const noexcept { return socket_; }
  pid_t pid() const noexcept { return pid_; }

  // The exit status, or nullopt when the child was still running at the
  // deadline (it is killed then) or died of a signal.
  std::optional<int> wait(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      int status = 0;
      pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        if (WIFEXITED(status)) return WEXITSTATUS(status);
        std::fprintf(stderr, "child died of signal %d\n", WIFSIGNALED(status) ? WTERMSIG(status) : -1);
        return std::nullopt;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        std::fprintf(stderr, "child %d still running after %lld ms: killed\n", static_cast<int>(pid_),
                     static_cast<long long>(timeout.count()));
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        pid_ = -1;
        return std::nullopt;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

 private:
  int socket_ = -1;
  pid_t pid_ = -1;
};

// Fixed-size messages (trivially copyable structs), one record each.
template <typename T>
void send_value(int socket, const T& value) {
  static_assert(std::is_trivially_copyable_v<T>);
  ipc::send_fds(socket, {}, std::as_bytes(std::span(&value, 1)));
}
template <typename T>
T recv_value(int socket) {
  static_assert(std::is_trivially_copyable_v<T>);
  ipc::Received r = ipc::recv_fds(socket, 0, sizeof(T));
  T v;
  std::memcpy(&v, r.data.data(), sizeof(T));
  return v;
}

}  // namespace cucore::test
