#pragma once
// Events: markers recorded on streams, for ordering and for timing.
#include <cuda.h>

#include <cucore/context.hpp>

namespace cucore {

class Device;

struct EventOptions {
  bool timing_enabled = false;    // needed to take elapsed times
  bool busy_waited_sync = false;  // sync() spins instead of yielding the thread
  bool ipc_enabled = false;       // shareable with other processes (implies no timing)
};

class Event {
 public:
  // A new event in the current context (device 0's primary context when none is current).
  explicit Event(const EventOptions& options = {});
  Event(const Context& ctx, const EventOptions& options);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  CUevent handle() const noexcept { return handle_; }
  void sync() const;
  bool is_done() const;
  bool is_timing_enabled() const noexcept { return options_.timing_enabled; }
  bool is_sync_busy_waited() const noexcept { return options_.busy_waited_sync; }
  bool is_ipc_enabled() const noexcept { return options_.ipc_enabled; }
  const Context& context() const noexcept { return ctx_; }
  Device device() const;
  void close() noexcept;

 private:
  CUevent handle_ = nullptr;
  EventOptions options_;
  Context ctx_;
};

// Milliseconds from `start` to `end`; both must be recorded, complete, and made
// with timing_enabled (std::invalid_argument names the one that is not).
float elapsed_time_ms(const Event& start, const Event& end);
inline float operator-(const Event& end, const Event& start) { return elapsed_time_ms(start, end); }

}  // namespace cucore
