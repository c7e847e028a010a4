#pragma once
// Internal entry points of the green-context feature (src/green/).
#include <cucore/context.hpp>
#include <cucore/resources.hpp>

#include <memory>
#include <string>

#include "green/resource_state.hpp"

namespace cucore::detail {

// Device::create_context.
Context create_green_context(int ordinal, const ContextOptions& options);

// An SMResource's state for a descriptor the driver filled in; fields the
// driver left zero come from `parent` (a split's input), else from the
// architecture's documented granularity.
std::shared_ptr<SMResourceState> make_sm_state(int ordinal, const CUdevResource& r, const SMResourceState* parent);

// "device 0 (NVIDIA H200, sm_90)", for messages.
std::string describe_device(int ordinal);

}  // namespace cucore::detail
