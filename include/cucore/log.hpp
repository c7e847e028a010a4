#pragma once
// Where cucore's messages go. cucore reports what it adjusted on the caller's
// behalf (an SM split rounded to the hardware's granularity, for one) as a
// warning, and a release that failed where nothing can throw (a destructor's
// cuStreamDestroy, cuMemFreeAsync, ...) as a release failure, through one
// process-wide hook. By default both go to stderr, each distinct message once
// per process; set_log_handler routes them elsewhere (the Python module turns
// warnings into UserWarning and release failures into cucore.CUDAWarning).
#include <functional>
#include <string_view>

namespace cucore {

// release_failure: a resource's release failed in a destructor (the resource
// may have leaked); the message names the call and the error. Never reported:
// CUDA_ERROR_DEINITIALIZED (the driver is shutting down, taking its resources).
// The handler is called from the destructor: what it throws is dropped.
enum class LogLevel { info, warning, release_failure };

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
