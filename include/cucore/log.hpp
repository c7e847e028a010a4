#pragma once
// Where cucore's messages go. cucore reports what it adjusted on the caller's
// behalf (an SM split rounded to the hardware's granularity, for one) as a
// warning through one process-wide hook. By default warnings go to stderr,
// each distinct message once per process; set_log_handler routes them
// elsewhere (the Python module turns them into UserWarning).
#include <functional>
#include <string_view>

namespace cucore {

enum class LogLevel { info, warning };

using LogHandler = std::function<void(LogLevel level, std::string_view message)>;

// Replaces the handler (an empty one restores the default) and returns the
// previous one. Thread-safe. A handler may throw: the exception leaves the
// cucore call that logged, as Python's warnings filter "error" does.
LogHandler set_log_handler(LogHandler handler);

namespace detail {
// Sends `message` to the current handler.
void log(LogLevel level, std::string_view message);
}  // namespace detail

}  // namespace cucore
