#pragma once
// Device resources and green contexts (cuda.core's DeviceResources,
// SMResource, WorkqueueResource and their options; docs/green-contexts.md).
//
// A GPU's SMs can be split into groups; a green context made from a group
// (Device::create_context) runs the kernels launched on its streams on that
// group's SMs only, so latency-sensitive work can be isolated from throughput
// work in one process. Memory from any resource of the device is usable from
// every context of the device.
//
//   SMResource sm = dev.resources().sm();                       // 132 SMs on an H200
//   auto [groups, rest] = sm.split({.count = {66, 66}});        // 64 + 64 (rounded), 4 left
//   Context a = dev.create_context({.resources = {groups[0]}});
//   Stream s = a.create_stream();                               // kernels on s use group 0
//
// Never fewer groups than asked: each requested count is rounded down to the
// hardware's granularity (multiples of 8 SMs on sm_90), the groups report the
// counts really made, and the rounding is reported once through the log hook
// (log.hpp). A request that cannot be met even so (more SMs than exist, a count
// below the minimum partition) throws std::invalid_argument naming the
// granularity, the minimum and a split that would work.
#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <variant>
#include <vector>

namespace cucore {

namespace detail {
struct SMResourceState;
struct ContextBox;
}  // namespace detail

// One value for every group, or one value per group: cuda.core's "a scalar or
// a Sequence". `.count = 64` asks for one group, `.count = {64, 64}` for two.
template <typename T>
class PerGroup {
 public:
  PerGroup() = default;                                                     // unset
  PerGroup(T value) : values_{value}, state_(State::single) {}              // NOLINT(google-explicit-constructor)
  PerGroup(std::initializer_list<T> values) : values_(values), state_(State::per_group) {}
  PerGroup(std::vector<T> values) : values_(std::move(values)), state_(State::per_group) {}  // NOLINT

  bool is_set() const noexcept { return state_ != State::unset; }
  bool is_single() const noexcept { return state_ == State::single; }
  bool is_per_group() const noexcept { return state_ == State::per_group; }
  // The values given: one for a single value, one per group otherwise.
  const std::vector<T>& values() const noexcept { return values_; }
  // The value for group `i` (a single value serves every group); `fallback` when unset.
  T at(std::size_t i, T fallback = T{}) const {
    if (state_ == State::unset) return fallback;
    return state_ == State::single ? values_[0] : values_.at(i);
  }

 private:
  enum class State : unsigned char { unset, single, per_group };
  std::vector<T> values_;
  State state_ = State::unset;
};

// SMResource::split's request. `count` sets the number of groups; the other
// fields, when given per group, must have as many values. The co-scheduling
// fields and backfill need CUDA 13.1's cuDevSmResourceSplit; this build of
// cucore (CUDA 13.0 headers) splits with cuDevSmResourceSplitByCount and
// throws FeatureUnavailableError when one of them is set.
struct SMResourceOptions {
  PerGroup<int> count{};                           // SMs per group; unset or 0: the smallest group the GPU makes
  PerGroup<int> coscheduled_sm_count{};            // SMs guaranteed to be co-scheduled (CUDA 13.1)
  PerGroup<int> preferred_coscheduled_sm_count{};  // preferred co-scheduled SMs (CUDA 13.1)
  PerGroup<bool> backfill{};                       // relax co-scheduling to fill the count (CUDA 13.1)
};

// A set of SMs: a whole device's, a green context's, or a group (or the
// remainder) of a split. An immutable value; copies share it.
class SMResource {
 public:
  SMResource() = default;  // empty: every accessor throws std::logic_error
  explicit operator bool() const noexcept { return state_ != nullptr; }

  unsigned sm_count() const;
  unsigned min_partition_size() const;     // the fewest SMs a partition of this resource can have
  unsigned coscheduled_alignment() const;  // SMs guaranteed to be co-scheduled (the driver's smCoscheduledAlignment)
  unsigned flags() const;                  // the driver's raw flags (0 before CUDA 13.1)
  int device_id() const;
  // The count the split asked for this group: sm_count() unless it was rounded.
  unsigned requested_sm_count() const;
  // False for a dry run's results (they describe a split; they make no context).
  bool is_usable() const;
  // The driver's descriptor; a group built from several equal units (a split
  // with different counts per group) has one per unit (handles()).
  const CUdevResource* handle() const;
  std::span<const CUdevResource> handles() const;

  // Splits into groups (one per count) and the remainder: every SM of this
  // resource is in exactly one of them. dry_run: the same answer, but the
  // results cannot make a context. See the file comment for the rounding.
  std::pair<std::vector<SMResource>, SMResource> split(const SMResourceOptions& options, bool dry_run = false) const;

  // Internal.
  explicit SMResource(std::shared_ptr<const detail::SMResourceState> state) noexcept : state_(std::move(state)) {}
  const std::shared_ptr<const detail::SMResourceState>& state() const noexcept { return state_; }

 private:
  const detail::SMResourceState& open(const char* operation) const;
  std::shared_ptr<const detail::SMResourceState> state_;
};

enum class WorkqueueSharingScope {
  device_ctx,          // share the device's workqueues with every context (the driver's default)
  green_ctx_balanced,  // keep apart from other balanced green contexts where the driver can
};

struct WorkqueueResourceOptions {
  std::optional<WorkqueueSharingScope> sharing_scope{};  // unset: unchanged
  std::optional<int> concurrency_limit{};                // expected concurrent stream-ordered workloads, >= 1
};

// A workqueue configuration (CUDA 13.1 drivers): put in ContextOptions next to
// an SMResource. On older drivers DeviceResources::workqueue() throws
// FeatureUnavailableError naming the version.
class WorkqueueResource {
 public:
  WorkqueueResource() = default;  // empty
  explicit operator bool() const noexcept { return device_ >= 0; }

  WorkqueueSharingScope sharing_scope() const;
  unsigned concurrency_limit() const;
  int device_id() const;
  const CUdevResource* handle() const;
  // Changes this configuration in place (std::invalid_argument for a limit < 1).
  void configure(const WorkqueueResourceOptions& options);

  // Internal: a configuration the driver filled in.
  WorkqueueResource(int device, const CUdevResource& config) noexcept : device_(device), config_(config) {}

 private:
  void require_open(const char* operation) const;
  int device_ = -1;
  CUdevResource config_{};
};

// The resources of a device (Device::resources()), or those a context was
// made with (Context::resources(), Stream::resources()).
class DeviceResources {
 public:
  // Throws FeatureUnavailableError when the driver is older than CUDA 12.4 or
  // does not support green contexts on this GPU.
  SMResource sm() const;
  WorkqueueResource workqueue() const;
  int device_id() const noexcept { return ordinal_; }

  // Internal: `ctx` is a green context's box, or null for the whole device.
  DeviceResources(int ordinal, std::shared_ptr<const detail::ContextBox> ctx) noexcept
      : ordinal_(ordinal), ctx_(std::move(ctx)) {}

 private:
  int ordinal_ = 0;
  std::shared_ptr<const detail::ContextBox> ctx_;
};

using ContextResource = std::variant<SMResource, WorkqueueResource>;

// Device::create_context's request: one or more SM groups of one split (or one
// whole SMResource) and at most one workqueue configuration.
struct ContextOptions {
  std::vector<ContextResource> resources{};
};

}  // namespace cucore
