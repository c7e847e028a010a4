// EXPECT: compiles
// What the rules accept (the harness's proof that a snippet can pass): the
// compile-fail snippets next to this file are each one change away from it.
#include <cucore/buffer.hpp>
#include <cucore/compute/iterator.hpp>
#include <cucore/device_span.hpp>
#include <cucore/graph.hpp>
#include <cucore/launch.hpp>
#include <cucore/memory.hpp>

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

using namespace cucore;

void typed_launches(StreamRef s, const TypedKernel<void(float, const float*, float*, int)>& saxpy, Buffer& x,
                    const Buffer& cx, const graph::GraphBuilder& builder) {
  const LaunchConfig c{.grid = 1, .block = 1};
  DeviceSpan<float> out = x.as<float>();
  DeviceSpan<const float> in = cx.as<float>();
  launch(s, c, saxpy, 2.0f, in, out, 4);              // spans, const kept
  launch(s, c, saxpy, 2.0f, out, out, 4);             // a DeviceSpan<float> to const float* too
  launch(s, c, saxpy, 2.0f, cx, x, 4);                // a const Buffer to const float*, a Buffer to float*
  launch(s, c, saxpy, 2.0f, x.as<float>().subspan(1), out.first(3), int{3});
  const float* raw_in = in.data();
  float* raw_out = out.data();
  launch(s, c, saxpy, 2.0f, raw_in, raw_out, static_cast<short>(4));  // short -> int keeps every value
  launch(builder, c, saxpy, 2.0f, in, out, 4);        // into a graph, the same rules
  TypedKernel<void(double, std::int64_t, const void*, void*)> widening(saxpy.kernel());
  launch(s, c, widening, 2.0f, 7, in, out);           // float -> double, int -> int64, spans to void pointers
}

void untyped_launches(StreamRef s, const Kernel& k, const Buffer& cx, DeviceSpan<const float> in) {
  // The untyped form does not know the kernel's types: a const Buffer and a
  // span go as pointers, checked for size at run time.
  launch(s, {.grid = 1, .block = 1}, k, 2.0f, cx, in, 4);
  KernelArgs args;
  args.push(in).push(cx);
}

void copies(StreamRef s, const MemoryResource& mr, const std::vector<float>& host) {
  Buffer b = mr.allocate<float>(host.size(), s);
  b.copy_from(host, s);
  b.copy_from(std::span<const float>(host), s);
  std::array<float, 4> a{};
  b.copy_from(a, s);
  b.copy_from({1.f, 2.f, 3.f}, s);
  float c_array[4] = {};
  b.copy_from(c_array, s);
  b.copy_from(std::vector<float>(4), s);  // a temporary source: the copy waits
  std::vector<float> back(host.size());
  b.copy_to(back, s);
  b.copy_to(std::span<float>(back), s);
  b.copy_to(a, s);
  std::vector<std::byte> bytes(16);
  b.copy_to(std::span<std::byte>(bytes), s);
  b.copy_from(std::span<const std::byte>(bytes), s);
  Buffer other = mr.allocate<float>(host.size(), s);
  other.copy_from(b, s);
  b.copy_to(other, s);
  DeviceSpan<float> d = b.as<float>();
  d.copy_from(host, s);
  d.copy_from({1.f, 2.f}, s);
  d.copy_to(back, s);
  d.first(2).copy_from(other.as<float>().last(2), s);
  std::as_const(other).as<float>().copy_to(d, s);
  b.fill(0, s);
  b.fill(1.5f, s);
  b.fill<std::uint16_t>(7, s);
  b.fill(std::uint8_t{1}, s);
  d.fill(2.5f, s);
  compute::Iterator it = compute::Iterator::pointer(std::as_const(b).as<float>());
  (void)it;
}
