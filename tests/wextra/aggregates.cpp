// Compiled with -Wall -Wextra -Werror and nothing turned off (tests/CMakeLists.txt):
// user code that fills cucore's public aggregates with designated initializers,
// naming only the fields it sets, builds without a warning. Every field of a
// public aggregate has a default member initializer (tools/check_aggregates.py
// checks the headers); this is the proof on GCC's -Wmissing-field-initializers.
#include <cucore/cucore.hpp>

namespace {

// The green-context snippet of docs/green-contexts.md, as written there.
[[maybe_unused]] void green_contexts_snippet() {
  cucore::Device dev(0);
  dev.set_current();
  cucore::SMResource sm = dev.resources().sm();
  auto [groups, rest] = sm.split({.count = 16});
  cucore::Context latency = dev.create_context({.resources = {groups[0]}});
  cucore::Context throughput = dev.create_context({.resources = {rest}});
  cucore::Stream fast = latency.create_stream();
  cucore::Stream bulk = throughput.create_stream();
}

[[maybe_unused]] void one_field_each(const cucore::Device& dev, cucore::StreamRef s) {
  cucore::StreamOptions so{.nonblocking = true};
  cucore::LaunchConfig lc{.grid = 4, .block = 128};
  cucore::EventOptions eo{.timing_enabled = true};
  cucore::ProgramOptions po{.arch = "sm_90"};
  cucore::graph::GraphCompleteOptions gco{.upload_stream = s};
  cucore::CopyOptions co{.src_location_hint = std::nullopt};
  cucore::WorkqueueResourceOptions wo{.concurrency_limit = 2};
  cucore::VirtualMemoryResourceOptions vo{.peers = {}};
  cucore::texture::MipmappedArrayOptions mo{.num_levels = 2};
  cucore::texture::TextureObjectOptions to{.normalized_coords = true};
  (void)so, (void)lc, (void)eo, (void)po, (void)gco, (void)co, (void)wo, (void)vo, (void)mo, (void)to;
  (void)dev;
}

}  // namespace
