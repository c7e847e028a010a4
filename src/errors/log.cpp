#include <cucore/errors.hpp>
#include <cucore/log.hpp>

#include "errors/release.hpp"

#include <cstdio>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>

namespace cucore {
namespace {

std::mutex g_mutex;
std::shared_ptr<const LogHandler> g_handler;  // null: the default

// stderr, each distinct warning once per process (a loop that repeats a
// rounded request says so once).
void default_handler(LogLevel level, std::string_view message) {
  static std::mutex seen_mutex;
  static std::set<std::string, std::less<>> seen;
  {
    std::lock_guard lock(seen_mutex);
    if (seen.count(message)) return;
    if (seen.size() < 1024) seen.emplace(message);
  }
  std::fprintf(stderr, "cucore: %s%.*s\n", level == LogLevel::info ? "" : "warning: ",
               static_cast<int>(message.size()), message.data());
}

}  // namespace

LogHandler set_log_handler(LogHandler handler) {
  auto next = handler ? std::make_shared<const LogHandler>(std::move(handler)) : nullptr;
  std::lock_guard lock(g_mutex);
  std::shared_ptr<const LogHandler> previous = std::exchange(g_handler, std::move(next));
  return previous ? *previous : LogHandler{};
}

namespace detail {
void report_release(CUresult code, const char* call) noexcept {
  if (code == CUDA_SUCCESS || code == CUDA_ERROR_DEINITIALIZED) return;
  report_release(std::string(call) + " failed: " + result_name(code) + " (" + result_description(code) + ")");
}

void report_release(const std::string& message) noexcept {
  try {
    log(LogLevel::release_failure, message);
  } catch (...) {
    // A destructor's report: the handler's exception has nowhere to go.
  }
}

void log(LogLevel level, std::string_view message) {
  std::shared_ptr<const LogHandler> h;
  {
    std::lock_guard lock(g_mutex);
    h = g_handler;
  }
  // Called outside the lock: a handler may log or replace itself.
  if (h) (*h)(level, message);
  else default_handler(level, message);
}
}  // namespace detail

}  // namespace cucore
