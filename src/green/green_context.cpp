// Device::create_context: a green context from SM groups (and a workqueue
// configuration). Its box (handles/) owns the CUgreenCtx; streams and events
// made in it hold the box, so the context lives until the last of them goes.
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/resources.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "green/green.hpp"
#include "loader/driver.hpp"
#include "runtime/device_state.hpp"

namespace cucore::detail {

namespace {
[[noreturn]] void bad(const std::string& what) { throw InvalidArgumentError("ContextOptions.resources: " + what); }
}  // namespace

Context create_green_context(int ordinal, const ContextOptions& options) {
  if (options.resources.empty())
    bad("empty; give one or more SMResource groups (Device::resources().sm().split(...))");
  std::vector<CUdevResource> parts;
  std::uint64_t split = 0;
  int sm_resources = 0, workqueues = 0;
  for (std::size_t i = 0; i < options.resources.size(); ++i) {
    std::string at = "[";  // built in steps: GCC 12 warns falsely (-Wrestrict) on "[" + std::to_string(i)
    at += std::to_string(i);
    at += ']';
    std::visit(
        [&](const auto& r) {
          if constexpr (std::is_same_v<std::decay_t<decltype(r)>, SMResource>) {
            if (!r) bad(at + " is an empty SMResource");
            if (!r.is_usable())
              bad(at + " comes from a dry-run split (dry_run=true), which describes groups without making them; "
                       "split again without dry_run");
            if (r.device_id() != ordinal)
              bad(at + " is an SMResource of device " + std::to_string(r.device_id()) + ", not of device " +
                  std::to_string(ordinal));
            if (r.sm_count() == 0) bad(at + " has no SMs (an empty remainder)");
            // The driver takes several SM resources only from one split.
            const std::uint64_t id = r.state()->split;
            if (sm_resources++ && (id == 0 || id != split))
              bad(at + " is not from the same split as the SMResource before it; one context takes several groups "
                       "only from one split (or a single SMResource)");
            split = id;
            for (const CUdevResource& p : r.handles()) parts.push_back(p);
          } else {
            if (!r) bad(at + " is an empty WorkqueueResource");
            if (r.device_id() != ordinal)
              bad(at + " is a WorkqueueResource of device " + std::to_string(r.device_id()) + ", not of device " +
                  std::to_string(ordinal));
            if (workqueues++) bad(at + " is a second WorkqueueResource; a context takes at most one");
            parts.push_back(*r.handle());
          }
        },
        options.resources[i]);
  }
  if (!sm_resources) bad("no SMResource; a green context needs the SMs it runs on");

  const DriverTable& d = driver();
  for (auto [fn, name] : {std::pair{reinterpret_cast<const void*>(d.cuDevResourceGenerateDesc), "cuDevResourceGenerateDesc"},
                          std::pair{reinterpret_cast<const void*>(d.cuGreenCtxCreate), "cuGreenCtxCreate"},
                          std::pair{reinterpret_cast<const void*>(d.cuCtxFromGreenCtx), "cuCtxFromGreenCtx"}})
    require(fn, 12040, (std::string("green contexts (") + name + ")").c_str());

  // The driver advises having the primary context up first (the green context
  // retains it); cucore keeps it for the process anyway.
  DeviceState& state = *device_state(ordinal);
  primary_context(state);
  CUdevResourceDesc desc = nullptr;
  check(d.cuDevResourceGenerateDesc(&desc, parts.data(), static_cast<unsigned>(parts.size())),
        "cuDevResourceGenerateDesc");
  CUgreenCtx green = nullptr;
  CUresult r = d.cuGreenCtxCreate(&green, desc, state.device, CU_GREEN_CTX_DEFAULT_STREAM);
  if (r == CUDA_ERROR_NOT_SUPPORTED)
    throw FeatureUnavailableError("green contexts on " + describe_device(ordinal),
                                  "a GPU on which this CUDA driver supports green contexts (cuGreenCtxCreate reports "
                                  "CUDA_ERROR_NOT_SUPPORTED)");
  check(r, "cuGreenCtxCreate");
  return Context(make_green_context(green, ordinal));
}

}  // namespace cucore::detail
