// DeviceResources, SMResource's accessors and WorkqueueResource: reading a
// device's (or a green context's) resources from the driver.
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/resources.hpp>
#include <cucore/stream.hpp>

#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>

#include "green/green.hpp"
#include "handles/handles.hpp"
#include "loader/driver.hpp"

namespace cucore {
namespace detail {

namespace {

// CUDA 13.1's workqueue configuration (CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG,
// 1000), which 13.0's cuda.h lacks: {int device; unsigned wqConcurrencyLimit;
// CUdevWorkqueueConfigScope sharingScope} where 13.0 has the SM fields. 1000 is
// no value of 13.0's CUdevResourceType (its values are 0 and 1), so resource
// types travel as the int the C ABI passes them as, never as that enum.
constexpr int kWorkqueueConfigType = 1000;
constexpr int kWorkqueueDriver = 13010;
using DeviceGetResource = CUresult (*)(CUdevice, CUdevResource*, int);
using GreenGetResource = CUresult (*)(CUgreenCtx, CUdevResource*, int);
struct WorkqueueConfig {
  int device;
  unsigned concurrency_limit;
  int sharing_scope;
};
constexpr std::size_t kPayload = offsetof(CUdevResource, sm);
static_assert(kPayload + sizeof(WorkqueueConfig) <= sizeof(CUdevResource));

WorkqueueConfig read_wq(const CUdevResource& r) noexcept {
  WorkqueueConfig c;
  std::memcpy(&c, reinterpret_cast<const unsigned char*>(&r) + kPayload, sizeof c);
  return c;
}
void write_wq(CUdevResource& r, const WorkqueueConfig& c) noexcept {
  std::memcpy(reinterpret_cast<unsigned char*>(&r) + kPayload, &c, sizeof c);
}

// The driver's answer for a GPU it does not run green contexts on.
[[noreturn]] void unsupported_gpu(int ordinal, CUresult r) {
  throw FeatureUnavailableError("green contexts and SM resources on " + describe_device(ordinal),
                                std::string("a GPU on which this CUDA driver supports green contexts (it reports ") +
                                    result_name(r) + ")");
}

bool unsupported(CUresult r) { return r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_INVALID_RESOURCE_TYPE; }

// The resource of `type` of a green context (`ctx`), else of the device.
CUdevResource read_resource(int ordinal, const ContextHandle& ctx, int type, int min_version, const char* feature) {
  const DriverTable& d = driver();
  CUdevResource r{};
  if (ctx && ctx->green) {
    require(reinterpret_cast<const void*>(d.cuGreenCtxGetDevResource), min_version, feature);
    auto get = reinterpret_cast<GreenGetResource>(d.cuGreenCtxGetDevResource);
    check(get(ctx->green, &r, type), "cuGreenCtxGetDevResource");
  } else {
    require(reinterpret_cast<const void*>(d.cuDeviceGetDevResource), min_version, feature);
    auto get = reinterpret_cast<DeviceGetResource>(d.cuDeviceGetDevResource);
    CUresult res = get(Device(ordinal).handle(), &r, type);
    if (unsupported(res)) unsupported_gpu(ordinal, res);
    check(res, "cuDeviceGetDevResource");
  }
  return r;
}

}  // namespace

unsigned sm_flags(const CUdevResource& r) noexcept {
  unsigned flags = 0;
  std::memcpy(&flags, reinterpret_cast<const unsigned char*>(&r) + kPayload + sizeof(CUdevSmResource), sizeof flags);
  return flags;
}

std::string describe_device(int ordinal) {
  std::string s = "device " + std::to_string(ordinal);
  try {
    Device dev(ordinal);
    s += " (" + dev.name() + ", sm_" + dev.arch() + ")";
  } catch (const std::exception&) {
    // the ordinal alone
  }
  return s;
}

std::shared_ptr<SMResourceState> make_sm_state(int ordinal, const CUdevResource& r, const SMResourceState* parent) {
  auto s = std::make_shared<SMResourceState>();
  s->device = ordinal;
  s->parts.push_back(r);
  s->sm_count = r.sm.smCount;
  s->min_partition = r.sm.minSmPartitionSize;
  s->alignment = r.sm.smCoscheduledAlignment;
  s->flags = sm_flags(r);
  if (parent) {
    if (!s->min_partition) s->min_partition = parent->min_partition;
    if (!s->alignment) s->alignment = parent->alignment;
    s->source = parent->source;
  }
  if (!s->min_partition || !s->alignment) {
    // Drivers before 12.5 leave the fields zero: cuda.h's guideline per architecture.
    int major = 9;
    try {
      major = Device(ordinal).compute_capability().major;
    } catch (const std::exception&) {
    }
    if (!s->min_partition) s->min_partition = major >= 9 ? 8 : major == 8 ? 4 : 2;
    if (!s->alignment) s->alignment = major >= 9 ? 8 : 2;
  }
  s->requested = s->sm_count;
  return s;
}

}  // namespace detail

// ---- DeviceResources ----

SMResource DeviceResources::sm() const {
  CUdevResource r = detail::read_resource(ordinal_, ctx_, static_cast<int>(CU_DEV_RESOURCE_TYPE_SM), 12040,
                                          "SM resources and green contexts (cuDeviceGetDevResource)");
  auto state = detail::make_sm_state(ordinal_, r, nullptr);
  if (ctx_ && ctx_->green) state->source = ctx_;
  return SMResource(std::move(state));
}

WorkqueueResource DeviceResources::workqueue() const {
  CUdevResource r =
      detail::read_resource(ordinal_, ctx_, detail::kWorkqueueConfigType, detail::kWorkqueueDriver,
                            "WorkqueueResource (workqueue configurations, CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG)");
  return WorkqueueResource(ordinal_, r);
}

// ---- SMResource ----

const detail::SMResourceState& SMResource::open(const char* operation) const {
  if (!state_) [[unlikely]]
    throw LogicError(std::string("SMResource::") + operation +
                           ": the SMResource is empty; get one from Device::resources().sm() or a split");
  return *state_;
}

unsigned SMResource::sm_count() const { return open("sm_count").sm_count; }
unsigned SMResource::min_partition_size() const { return open("min_partition_size").min_partition; }
unsigned SMResource::coscheduled_alignment() const { return open("coscheduled_alignment").alignment; }
unsigned SMResource::flags() const { return open("flags").flags; }
int SMResource::device_id() const { return open("device_id").device; }
unsigned SMResource::requested_sm_count() const { return open("requested_sm_count").requested; }
bool SMResource::is_usable() const { return state_ && state_->usable; }
const CUdevResource* SMResource::handle() const { return open("handle").parts.data(); }
std::span<const CUdevResource> SMResource::handles() const { return open("handles").parts; }

// ---- WorkqueueResource ----

void WorkqueueResource::require_open(const char* operation) const {
  if (device_ < 0) [[unlikely]]
    throw LogicError(std::string("WorkqueueResource::") + operation +
                           ": the WorkqueueResource is empty; get one from Device::resources().workqueue()");
}

WorkqueueSharingScope WorkqueueResource::sharing_scope() const {
  require_open("sharing_scope");
  return detail::read_wq(config_).sharing_scope == 1 ? WorkqueueSharingScope::green_ctx_balanced
                                                     : WorkqueueSharingScope::device_ctx;
}

unsigned WorkqueueResource::concurrency_limit() const {
  require_open("concurrency_limit");
  return detail::read_wq(config_).concurrency_limit;
}

int WorkqueueResource::device_id() const {
  require_open("device_id");
  return device_;
}

const CUdevResource* WorkqueueResource::handle() const {
  require_open("handle");
  return &config_;
}

void WorkqueueResource::configure(const WorkqueueResourceOptions& options) {
  require_open("configure");
  if (options.concurrency_limit && *options.concurrency_limit < 1)
    throw InvalidArgumentError("WorkqueueResourceOptions.concurrency_limit = " +
                                std::to_string(*options.concurrency_limit) + ": must be at least 1");
  detail::WorkqueueConfig c = detail::read_wq(config_);
  if (options.sharing_scope)
    c.sharing_scope = *options.sharing_scope == WorkqueueSharingScope::green_ctx_balanced ? 1 : 0;
  if (options.concurrency_limit) c.concurrency_limit = static_cast<unsigned>(*options.concurrency_limit);
  detail::write_wq(config_, c);
}

// The runtime's members that answer with resources or make green contexts
// live here, above the runtime, so the runtime includes nothing of green/.
Context Device::create_context(const ContextOptions& options) const {
  return detail::create_green_context(ordinal(), options);
}

DeviceResources Context::resources() const {
  if (!box()) detail::throw_closed("Context", "resources");
  return DeviceResources(device_id(), box()->green ? box() : nullptr);
}

DeviceResources StreamRef::resources() const { return context().resources(); }
DeviceResources Stream::resources() const { return context().resources(); }

}  // namespace cucore
