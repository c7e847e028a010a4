// Typed buffers on a real GPU (device_span.hpp): allocate<T> with copies from
// std::vector, std::array and initializer lists read back element by
// element; SAXPY through a TypedKernel taking DeviceSpan<const float> in and
// DeviceSpan<float> out (and the untyped launch, and a KernelArgs pack);
// typed fills of 1-, 2- and 4-byte types; compute::reduce over
// Iterator::pointer(span). Random data throughout, never zeros.
#include <cucore/buffer.hpp>
#include <cucore/compute.hpp>
#include <cucore/device.hpp>
#include <cucore/device_span.hpp>
#include <cucore/kernel.hpp>
#include <cucore/launch.hpp>
#include <cucore/memory.hpp>
#include <cucore/object_code.hpp>
#include <cucore/program.hpp>
#include <cucore/stream.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "common/gpu.hpp"
#include "common/random.hpp"

using namespace cucore;
using test::random_floats;

namespace {

constexpr const char* kSaxpy = R"(
extern "C" __global__ void saxpy(float a, const float* x, const float* y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}
)";

template <typename T>
std::vector<T> random_words(std::size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(n);
  for (auto& x : v) {
    x = static_cast<T>(rng());
    if (x == T{}) x = T{1};
  }
  return v;
}

// The device computes a * x + y as one fused multiply-add (NVRTC contracts by
// default) or as a product and a sum: either, exactly.
void expect_saxpy(float a, const std::vector<float>& x, const std::vector<float>& y, const std::vector<float>& out) {
  ASSERT_EQ(out.size(), x.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float fused = std::fma(a, x[i], y[i]);
    const float product = a * x[i];
    const float separate = product + y[i];
    if (out[i] != fused && out[i] != separate && ++bad <= 5)
      ADD_FAILURE() << "out[" << i << "] = " << out[i] << ", want " << fused << " (or " << separate << ")";
  }
  EXPECT_EQ(bad, 0u);
}

class TypedBuffers : public ::testing::Test {
 protected:
  void SetUp() override {
    CUCORE_REQUIRE_GPU();
    Device(0).set_current();
    stream_ = std::make_unique<Stream>(Device(0).create_stream());
    mr_ = std::make_unique<MemoryResource>(Device(0).memory_resource());
  }
  Stream& stream() { return *stream_; }
  const MemoryResource& mr() { return *mr_; }

 private:
  std::unique_ptr<Stream> stream_;  // made once a GPU is known to be there
  std::unique_ptr<MemoryResource> mr_;
};

}  // namespace

TEST_F(TypedBuffers, CopiesFromVectorsArraysAndInitializerLists) {
  const std::size_t n = (1u << 20) + 3;
  const std::vector<float> xs = random_floats(n, 1);
  Buffer b = mr().allocate<float>(n, stream());
  ASSERT_EQ(b.size(), n * sizeof(float));
  b.copy_from(xs, stream());
  std::vector<float> back(n, 0.f);
  b.copy_to(back, stream());
  stream().sync();
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], xs[i]) << "element " << i;

  // std::array through the span: element counts, the span's own type.
  const std::vector<float> r = random_floats(37, 2);
  std::array<float, 37> arr{};
  std::copy(r.begin(), r.end(), arr.begin());
  DeviceSpan<float> span = b.as<float>();
  span.subspan(1000, 37).copy_from(arr, stream());
  std::array<float, 39> around{};
  std::as_const(b).as<float>().subspan(999, 39).copy_to(around, stream());
  stream().sync();
  EXPECT_EQ(around[0], xs[999]) << "before the subspan: untouched";
  for (std::size_t i = 0; i < 37; ++i) ASSERT_EQ(around[1 + i], arr[i]) << "element " << i;
  EXPECT_EQ(around[38], xs[1037]) << "after the subspan: untouched";

  // Initializer lists (the copy waits: the list is gone when it returns).
  const std::vector<float> l = random_floats(5, 3);
  Buffer five = mr().allocate<float>(5, stream());
  five.copy_from({l[0], l[1], l[2], l[3], l[4]}, stream());
  std::vector<float> got(5);
  five.copy_to(got, stream());
  stream().sync();
  for (std::size_t i = 0; i < 5; ++i) ASSERT_EQ(got[i], l[i]) << "element " << i;
  const std::vector<std::int64_t> w = random_words<std::int64_t>(3, 4);
  Buffer words = mr().allocate<std::int64_t>(8, stream());
  words.as<std::int64_t>().last(3).copy_from({w[0], w[1], w[2]}, stream());
  std::vector<std::int64_t> wback(3);
  words.as<std::int64_t>().last(3).copy_to(wback, stream());
  stream().sync();
  for (std::size_t i = 0; i < 3; ++i) ASSERT_EQ(wback[i], w[i]) << "element " << i;

  // Span to span, device to device, between two allocations.
  Buffer copy = mr().allocate<float>(n, stream());
  copy.as<float>().first(n / 2).copy_from(std::as_const(b).as<float>().last(n / 2), stream());
  copy.as<float>().last(n - n / 2).copy_from(span.first(n - n / 2), stream());
  std::vector<float> cback(n);
  copy.copy_to(cback, stream());
  stream().sync();
  std::vector<float> want(n);
  b.copy_to(want, stream());  // b as it is now (with the array in it)
  stream().sync();
  for (std::size_t i = 0; i < n / 2; ++i) ASSERT_EQ(cback[i], want[n - n / 2 + i]) << "element " << i;
  for (std::size_t i = n / 2; i < n; ++i) ASSERT_EQ(cback[i], want[i - n / 2]) << "element " << i;
}

TEST_F(TypedBuffers, SaxpyThroughDeviceSpans) {
  const Device dev(0);
  ObjectCode code = Program(kSaxpy, "c++", {.arch = "sm_" + dev.arch()}).compile(CodeType::cubin);
  Kernel saxpy = code.get_kernel("saxpy");
  const int n = 1'000'003;  // not a multiple of the block
  const std::vector<float> x = random_floats(n, 11), y = random_floats(n, 12);
  Buffer bx = mr().allocate<float>(n, stream()), by = mr().allocate<float>(n, stream());
  Buffer bout = mr().allocate<float>(n, stream());
  bx.copy_from(x, stream());
  by.copy_from(y, stream());
  const Buffer& cx = bx;
  const Buffer& cy = by;
  DeviceSpan<const float> in_x = cx.as<float>(), in_y = cy.as<float>();
  DeviceSpan<float> out = bout.as<float>();
  const LaunchConfig config{.grid = (n + 255) / 256, .block = 256};
  std::vector<float> got(n);

  TypedKernel<void(float, const float*, const float*, float*, int)> typed(saxpy);
  out.fill(std::numeric_limits<float>::quiet_NaN(), stream());  // an unwritten element fails
  launch(stream(), config, typed, 2.5f, in_x, in_y, out, n);
  out.copy_to(got, stream());
  stream().sync();
  expect_saxpy(2.5f, x, y, got);

  // A subspan goes as its own start: out[i] = a * x[i + 7] + y[i] over n - 7.
  out.fill(std::numeric_limits<float>::quiet_NaN(), stream());
  const int m = n - 7;
  launch(stream(), {.grid = (m + 255) / 256, .block = 256}, typed, -1.5f, in_x.subspan(7), in_y.first(m),
         out.first(m), m);
  std::vector<float> part(m);
  out.first(m).copy_to(part, stream());
  stream().sync();
  expect_saxpy(-1.5f, std::vector<float>(x.begin() + 7, x.end()), std::vector<float>(y.begin(), y.begin() + m),
               part);

  // The untyped launch and a KernelArgs pack take spans as pointers too.
  out.fill(std::numeric_limits<float>::quiet_NaN(), stream());
  launch(stream(), config, saxpy, 0.75f, in_x, in_y, out, n);
  out.copy_to(got, stream());
  stream().sync();
  expect_saxpy(0.75f, x, y, got);
  out.fill(std::numeric_limits<float>::quiet_NaN(), stream());
  KernelArgs args;
  args.push(-3.0f).push(in_x).push(in_y).push(out).push(n);
  launch(stream(), config, saxpy, args);
  out.copy_to(got, stream());
  stream().sync();
  expect_saxpy(-3.0f, x, y, got);
}

TEST_F(TypedBuffers, FillsOfEveryWidth) {
  const std::size_t n = 4099;  // elements of the widest type
  Buffer b = mr().allocate<std::uint32_t>(n, stream());
  std::mt19937 rng(21);

  const auto u8 = static_cast<std::uint8_t>(rng() | 1u);
  b.fill<std::uint8_t>(u8, stream());
  std::vector<std::uint8_t> bytes(4 * n);
  b.copy_to(bytes, stream());
  stream().sync();
  for (std::size_t i = 0; i < bytes.size(); ++i) ASSERT_EQ(bytes[i], u8) << "element " << i;

  const auto u16 = static_cast<std::uint16_t>(rng() | 1u);
  b.fill<std::uint16_t>(u16, stream());
  std::vector<std::uint16_t> halves(2 * n);
  b.copy_to(halves, stream());
  stream().sync();
  for (std::size_t i = 0; i < halves.size(); ++i) ASSERT_EQ(halves[i], u16) << "element " << i;

  const std::uint32_t u32 = rng() | 1u;
  b.fill<std::uint32_t>(u32, stream());
  std::vector<std::uint32_t> words(n);
  b.copy_to(words, stream());
  stream().sync();
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(words[i], u32) << "element " << i;

  const float f = random_floats(1, 22)[0];
  b.fill(f, stream());  // fill<float>, deduced
  std::vector<float> floats(n);
  b.copy_to(floats, stream());
  stream().sync();
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(std::bit_cast<std::uint32_t>(floats[i]), std::bit_cast<std::uint32_t>(f))
      << "element " << i;

  // A span's fill covers the span only.
  const auto g = random_floats(1, 23)[0];
  b.as<float>().subspan(100, 1000).fill(g, stream());
  const auto v16 = static_cast<std::uint16_t>(rng() | 1u);
  b.as<std::uint16_t>().last(3).fill(v16, stream());
  const auto v8 = static_cast<std::uint8_t>(rng() | 1u);
  b.as<std::uint8_t>().first(3).fill(v8, stream());
  b.copy_to(floats, stream());
  b.copy_to(bytes, stream());
  b.copy_to(halves, stream());
  stream().sync();
  for (std::size_t i = 1; i < n - 2; ++i)
    ASSERT_EQ(floats[i], (i >= 100 && i < 1100) ? g : f) << "element " << i;
  for (std::size_t i = 0; i < 3; ++i) ASSERT_EQ(bytes[i], v8) << "byte " << i;
  const auto f_bytes = std::bit_cast<std::array<std::uint8_t, 4>>(f);
  EXPECT_EQ(bytes[3], f_bytes[3]) << "the fourth byte is the float's";
  for (std::size_t i = 2 * n - 3; i < 2 * n; ++i) ASSERT_EQ(halves[i], v16) << "half " << i;
}

TEST_F(TypedBuffers, ReduceOverIteratorPointerOfSpans) {
  using namespace cucore::compute;
  const std::size_t n = (1u << 20) + 5;
  const std::vector<std::uint32_t> h = random_words<std::uint32_t>(n, 31);
  Buffer in = mr().allocate<std::uint32_t>(n, stream()), out = mr().allocate<std::uint32_t>(2, stream());
  in.copy_from(h, stream());
  const DeviceSpan<const std::uint32_t> span = std::as_const(in).as<std::uint32_t>();
  DeviceSpan<std::uint32_t> result = out.as<std::uint32_t>();
  const std::uint32_t init = 0x9e3779b9u;
  reduce(stream(), Iterator::pointer(span), Iterator::pointer(result.first(1)), span.size(), OpKind::plus,
         Value(init));
  // Over a subspan: its own start and size.
  const DeviceSpan<const std::uint32_t> tail = span.subspan(1234);
  reduce(stream(), Iterator::pointer(tail), Iterator::pointer(result.last(1)), tail.size(), OpKind::plus, Value(init));
  std::array<std::uint32_t, 2> got{};
  result.copy_to(got, stream());
  stream().sync();
  std::uint32_t all = init, part = init;  // unsigned: wraps as the device does
  for (std::size_t i = 0; i < n; ++i) {
    all += h[i];
    if (i >= 1234) part += h[i];
  }
  EXPECT_EQ(got[0], all);
  EXPECT_EQ(got[1], part);

  const std::vector<float> fs = random_floats(n, 32);
  Buffer fin = mr().allocate<float>(n, stream()), fout = mr().allocate<float>(1, stream());
  fin.copy_from(fs, stream());
  reduce(stream(), Iterator::pointer(std::as_const(fin).as<float>()), Iterator::pointer(fout.as<float>()), n,
         OpKind::maximum, Value(-1e30f));
  std::array<float, 1> m{};
  fout.copy_to(m, stream());
  stream().sync();
  EXPECT_EQ(m[0], *std::max_element(fs.begin(), fs.end()));
}
