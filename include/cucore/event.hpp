#pragma once
// Events: markers recorded on streams, for ordering and for timing. Event is a
// thin value over a shared event box that holds its context: copies share the
// event, which is destroyed when the last share goes. A closed or moved-from
// Event throws ClosedError from every operation.
#include <cuda.h>

#include <memory>

#include <cucore/context.hpp>

namespace cucore {

class Device;

struct IPCEventDescriptor;

namespace detail {
struct EventBox;
struct ContextBox;
}  // namespace detail

struct EventOptions {
  bool timing_enabled = false;  // needed to take elapsed times
  // sync() puts the waiting thread to sleep until the event completes
  // (CU_EVENT_BLOCKING_SYNC) instead of spin-waiting; cuda.core's name.
  bool busy_waited_sync = false;
  bool ipc_enabled = false;  // shareable with other processes (implies no timing)
};

class Event {
 public:
  // A new event in the current context (device 0's primary context when none is current).
  explicit Event(const EventOptions& options = {});
  Event(const Context& ctx, const EventOptions& options);

  // Copies share the event; a moved-from Event is closed.
  Event(const Event& other) noexcept = default;
  Event& operator=(const Event& other) noexcept = default;
  Event(Event&& other) noexcept = default;
  Event& operator=(Event&& other) noexcept = default;
  ~Event() = default;

  CUevent handle() const noexcept;  // nullptr once closed
  bool is_closed() const noexcept { return box_ == nullptr; }
  void sync() const;
  bool is_done() const;
  bool is_timing_enabled() const;
  bool is_sync_busy_waited() const;
  bool is_ipc_enabled() const;
  Context context() const;
  Device device() const;
  // Releases this Event's share (idempotent); the event is destroyed once none is left.
  void close() noexcept;

  // Sharing with other processes (ipc.hpp): the descriptor of an ipc_enabled
  // Event (IpcError otherwise), and the event another process described,
  // opened in the current context (device 0's primary when none is current).
  // Work recorded on it in either process orders work in the other.
  IPCEventDescriptor ipc_descriptor() const;
  // The same descriptor as the one object the event keeps: made by the first
  // call, the same on every later one, from any thread and any copy of this
  // Event (as cuda.core keeps it on the object); a closed Event still throws.
  // The reference is this Event's while it is open: copy it to keep the
  // descriptor longer.
  const std::shared_ptr<const IPCEventDescriptor>& shared_ipc_descriptor() const;
  static Event from_ipc_descriptor(const IPCEventDescriptor& descriptor);

  // Internal: an event in the context `ctx`'s box.
  Event(const std::shared_ptr<const detail::ContextBox>& ctx, const EventOptions& options);

 private:
  explicit Event(std::shared_ptr<const detail::EventBox> box) noexcept : box_(std::move(box)) {}
  const detail::EventBox& open_box(const char* operation) const;
  std::shared_ptr<const detail::EventBox> box_;
};

// Milliseconds from `start` to `end`; both must be recorded, complete, and made
// with timing_enabled (std::invalid_argument names the one that is not).
float elapsed_time_ms(const Event& start, const Event& end);
inline float operator-(const Event& end, const Event& start) { return elapsed_time_ms(start, end); }

}  // namespace cucore
