// Typed buffers (device_span.hpp, buffer.hpp): DeviceSpan's arithmetic and
// bounds, Buffer::as<T>'s checks, allocate<T>, range and initializer-list
// copies, typed fills and Iterator::pointer(span), on machines without a GPU.
// Spans over host memory need no driver; copies and fills run against the
// fake driver, whose "device memory" is host memory, so every byte moved can
// be checked. The type rules that must not compile are tests/compile_fail.
#include <cucore/buffer.hpp>
#include <cucore/compute/iterator.hpp>
#include <cucore/device.hpp>
#include <cucore/device_span.hpp>
#include <cucore/errors.hpp>
#include <cucore/memory.hpp>
#include <cucore/stream.hpp>

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <random>
#include <ranges>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/fake_driver.hpp"
#include "common/message_of.hpp"
#include "common/random.hpp"

using namespace cucore;
using cucore::test::FakeDriver;
using cucore::test::message_of;
using cucore::test::random_floats;

namespace {

template <typename T>
std::vector<T> random_values(std::size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(n);
  for (auto& x : v) {
    if constexpr (std::is_floating_point_v<T>)
      x = static_cast<T>(std::uniform_real_distribution<double>(-100, 100)(rng));
    else
      x = static_cast<T>(rng());
    if (x == T{}) x = T{1};  // never zero: a zero would hide a missing write
  }
  return v;
}

// The fake implements 8-bit memset; 16 and 32 bits are these.
void install_wide_memsets(FakeDriver& fake) {
  fake.table.cuMemsetD16Async = [](CUdeviceptr d, unsigned short v, size_t n, CUstream) {
    auto* p = reinterpret_cast<unsigned short*>(d);
    for (size_t i = 0; i < n; ++i) p[i] = v;
    return CUDA_SUCCESS;
  };
  fake.table.cuMemsetD32Async = [](CUdeviceptr d, unsigned v, size_t n, CUstream) {
    auto* p = reinterpret_cast<unsigned*>(d);
    for (size_t i = 0; i < n; ++i) p[i] = v;
    return CUDA_SUCCESS;
  };
}

std::atomic<int> g_syncs{0};
void count_syncs(FakeDriver& fake) {
  g_syncs = 0;
  fake.table.cuStreamSynchronize = [](CUstream) {
    ++g_syncs;
    return CUDA_SUCCESS;
  };
}

}  // namespace

// ---- compile-time facts ----
static_assert(sizeof(DeviceSpan<float>) == sizeof(void*) + sizeof(std::size_t), "a pointer and a count");
static_assert(std::is_trivially_copyable_v<DeviceSpan<float>>);
static_assert(!std::ranges::range<DeviceSpan<float>>, "device memory is not a host range");
static_assert(std::is_convertible_v<DeviceSpan<float>, DeviceSpan<const float>>);
static_assert(!std::is_convertible_v<DeviceSpan<const float>, DeviceSpan<float>>, "const is never dropped");
static_assert(!std::is_convertible_v<DeviceSpan<float>, DeviceSpan<double>>);
static_assert(!std::is_convertible_v<DeviceSpan<float>, DeviceSpan<int>>);
static_assert(std::is_same_v<decltype(std::declval<Buffer&>().as<float>()), DeviceSpan<float>>);
static_assert(std::is_same_v<decltype(std::declval<const Buffer&>().as<float>()), DeviceSpan<const float>>,
              "a const Buffer gives a const span");
static_assert(std::is_same_v<decltype(std::declval<Buffer&>().as<const float>()), DeviceSpan<const float>>);
static_assert(std::is_same_v<decltype(DeviceSpan(static_cast<const int*>(nullptr), 3)), DeviceSpan<const int>>);

TEST(DeviceSpan, ArithmeticOverElements) {
  float host[10] = {};
  DeviceSpan<float> s(host, 10);
  EXPECT_EQ(s.data(), host);
  EXPECT_EQ(s.handle(), reinterpret_cast<CUdeviceptr>(host));
  EXPECT_EQ(s.size(), 10u);
  EXPECT_EQ(s.size_bytes(), 40u);
  EXPECT_FALSE(s.empty());

  DeviceSpan<float> mid = s.subspan(3, 4);
  EXPECT_EQ(mid.data(), host + 3);
  EXPECT_EQ(mid.size(), 4u);
  EXPECT_EQ(mid.size_bytes(), 16u);
  DeviceSpan<float> tail = s.subspan(7);
  EXPECT_EQ(tail.data(), host + 7);
  EXPECT_EQ(tail.size(), 3u);
  EXPECT_EQ(s.first(2).data(), host);
  EXPECT_EQ(s.first(2).size(), 2u);
  EXPECT_EQ(s.last(2).data(), host + 8);
  EXPECT_EQ(s.last(2).size(), 2u);
  EXPECT_EQ(mid.subspan(1, 2).data(), host + 4) << "a subspan of a subspan counts from its own start";
  EXPECT_EQ(mid.last(1).data(), host + 6);
  // The edges are in range: an empty span at the end, the whole span.
  EXPECT_TRUE(s.subspan(10).empty());
  EXPECT_EQ(s.subspan(10).data(), host + 10);
  EXPECT_TRUE(s.subspan(4, 0).empty());
  EXPECT_EQ(s.first(10).size(), 10u);
  EXPECT_EQ(s.last(0).data(), host + 10);

  DeviceSpan<const float> c = mid;  // const added, never removed
  EXPECT_EQ(c.data(), host + 3);
  EXPECT_EQ(c.size(), 4u);
  DeviceSpan<const std::byte> bytes = mid.as_bytes();
  EXPECT_EQ(bytes.size(), 16u);
  EXPECT_EQ(bytes.handle(), mid.handle());
  EXPECT_EQ(mid.as_writable_bytes().size(), 16u);
  DeviceSpan<double> fromh = DeviceSpan<double>::from_handle(CUdeviceptr(0x1000), 5);
  EXPECT_EQ(fromh.size_bytes(), 40u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(fromh.subspan(2).data()), 0x1010u);

  DeviceSpan<int> none;
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.data(), nullptr);
  EXPECT_EQ(none.subspan(0).size(), 0u);
}

TEST(DeviceSpan, OutOfBoundsIsOutOfRangeNamingTheNumbers) {
  float host[10] = {};
  DeviceSpan<float> s(host, 10);
  EXPECT_THROW(s.subspan(11), std::out_of_range);
  EXPECT_EQ(message_of<std::out_of_range>([&] { s.subspan(11); }),
            "DeviceSpan<float>::subspan: offset 11 is beyond a span of 10 elements");
  EXPECT_EQ(message_of<std::out_of_range>([&] { s.subspan(3, 8); }),
            "DeviceSpan<float>::subspan: 8 elements from offset 3 run beyond a span of 10 elements");
  EXPECT_EQ(message_of<std::out_of_range>([&] { s.subspan(11, 0); }),
            "DeviceSpan<float>::subspan: offset 11 is beyond a span of 10 elements");
  // A count near SIZE_MAX does not wrap around the check.
  EXPECT_THROW(s.subspan(1, std::size_t(-2)), std::out_of_range);
  EXPECT_EQ(message_of<std::out_of_range>([&] { s.first(11); }),
            "DeviceSpan<float>::first: 11 elements asked of a span of 10 elements");
  EXPECT_EQ(message_of<std::out_of_range>([&] { s.last(12); }),
            "DeviceSpan<float>::last: 12 elements asked of a span of 10 elements");
  DeviceSpan<const std::uint16_t> one(reinterpret_cast<const std::uint16_t*>(host), 1);
  EXPECT_EQ(message_of<std::out_of_range>([&] { one.subspan(0, 2); }),
            "DeviceSpan<unsigned short>::subspan: 2 elements from offset 0 run beyond a span of 1 element");
}

TEST(DeviceSpan, BufferAsChecksSizeAlignmentAndClosed) {
  alignas(16) std::array<std::byte, 64> host{};
  Buffer b = Buffer::from_handle(host.data(), 40);
  DeviceSpan<float> f = b.as<float>();
  EXPECT_EQ(f.handle(), b.handle());
  EXPECT_EQ(f.size(), 10u);
  DeviceSpan<const double> d = std::as_const(b).as<double>();
  EXPECT_EQ(d.size(), 5u);
  EXPECT_EQ(b.as<std::uint8_t>().size(), 40u);

  Buffer ten = Buffer::from_handle(host.data(), 10);
  EXPECT_EQ(ten.as<std::uint16_t>().size(), 5u);
  EXPECT_THROW(ten.as<float>(), std::invalid_argument);
  EXPECT_EQ(message_of<std::invalid_argument>([&] { ten.as<float>(); }),
            "Buffer::as<float>: the buffer's 10 bytes are not a multiple of sizeof(float) = 4");
  EXPECT_EQ(message_of<std::invalid_argument>([&] { std::as_const(ten).as<double>(); }),
            "Buffer::as<double>: the buffer's 10 bytes are not a multiple of sizeof(double) = 8");

  Buffer odd = Buffer::from_handle(host.data() + 2, 8);  // 8 bytes, 2 past a 16-byte boundary
  EXPECT_EQ(odd.as<std::uint16_t>().size(), 4u);
  const std::string what = message_of<std::invalid_argument>([&] { odd.as<float>(); });
  EXPECT_NE(what.find("Buffer::as<float>: the buffer's address "), std::string::npos) << what;
  EXPECT_NE(what.find("is not a multiple of alignof(float) = 4"), std::string::npos) << what;

  Buffer empty = Buffer::from_handle(host.data(), 0);
  EXPECT_TRUE(empty.as<double>().empty());

  b.close();
  EXPECT_THROW(b.as<float>(), ClosedError);
  EXPECT_EQ(message_of<ClosedError>([&] { std::as_const(b).as<float>(); }), "Buffer has been closed (as)");
  Buffer never;
  EXPECT_THROW(never.as<int>(), ClosedError);
}

TEST(DeviceSpan, IteratorPointerTakesTheSpansElementType) {
  float host[4] = {};
  DeviceSpan<const float> s(host, 4);
  compute::Iterator it = compute::Iterator::pointer(s);
  EXPECT_TRUE(it.is_pointer());
  EXPECT_EQ(it.value_type(), compute::Type::float32());
  EXPECT_EQ(it.pointer_value(), s.handle());
  std::int64_t words[3] = {};
  compute::Iterator it64 = compute::Iterator::pointer(DeviceSpan<std::int64_t>(words, 3).subspan(1));
  EXPECT_EQ(it64.value_type(), compute::Type::int64());
  EXPECT_EQ(it64.pointer_value(), reinterpret_cast<CUdeviceptr>(words + 1));
}

TEST(TypedBuffersFake, AllocateCountsElements) {
  FakeDriver fake;
  Stream s = Device(0).create_stream();
  DeviceMemoryResource mr(0);
  Buffer a = mr.allocate<float>(1000, s);
  EXPECT_EQ(a.size(), 4000u);
  EXPECT_EQ(a.as<float>().size(), 1000u);
  Buffer b = mr.allocate<std::uint16_t>(7, StreamRef(s));
  EXPECT_EQ(b.size(), 14u);
  const int before = FakeDriver::pool_allocs.load();
  EXPECT_THROW(mr.allocate<double>(std::size_t(1) << 61, s), std::overflow_error);
  EXPECT_EQ(message_of<std::overflow_error>([&] { mr.allocate<std::uint32_t>(std::size_t(-1) / 2, s); }),
            "MemoryResource::allocate<unsigned int>: 9223372036854775807 elements of 4 bytes are more bytes than "
            "size_t holds");
  EXPECT_EQ(FakeDriver::pool_allocs.load(), before) << "nothing allocated";
}

TEST(TypedBuffersFake, BufferCopiesAnyContiguousRange) {
  FakeDriver fake;
  count_syncs(fake);
  Stream s = Device(0).create_stream();
  DeviceMemoryResource mr(0);
  const std::size_t n = 257;
  const std::vector<float> xs = random_floats(n, 11);
  Buffer b = mr.allocate<float>(n, s);

  b.copy_from(xs, s);  // a std::vector
  std::vector<float> back(n, 0.f);
  b.copy_to(back, s);
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], xs[i]) << "element " << i;
  EXPECT_EQ(g_syncs.load(), 0) << "copies between lvalue ranges are asynchronous";

  // std::array, a C array, a std::span, std::string: any contiguous range of
  // trivially copyable elements, its size compared in bytes.
  std::array<std::uint32_t, 8> words{};
  for (std::size_t i = 0; i < words.size(); ++i) words[i] = static_cast<std::uint32_t>(0x9e3779b9u * (i + 1));
  Buffer w = mr.allocate<std::uint32_t>(8, s);
  w.copy_from(words, s);
  std::uint32_t raw[8] = {};
  w.copy_to(raw, s);
  for (std::size_t i = 0; i < 8; ++i) ASSERT_EQ(raw[i], words[i]) << "element " << i;
  std::array<std::uint16_t, 16> halves{};  // the same 32 bytes read as another type: the buffer has none
  w.copy_to(halves, s);
  EXPECT_EQ(std::memcmp(halves.data(), words.data(), 32), 0);
  std::vector<std::uint32_t> part(8, 0);
  w.copy_to(std::span<std::uint32_t>(part), s);  // a span temporary is a view: fine to copy into
  EXPECT_EQ(part[7], words[7]);
  std::string text = "typed buffers!!!";
  Buffer t = mr.allocate(text.size(), s);
  t.copy_from(text, s);
  std::string text_back(text.size(), '\0');
  t.copy_to(text_back, s);
  EXPECT_EQ(text_back, text);
  EXPECT_EQ(g_syncs.load(), 0);

  // An initializer list is a temporary: the copy waits for the stream.
  Buffer three = mr.allocate<float>(3, s);
  three.copy_from({xs[0], xs[1], xs[2]}, s);
  EXPECT_EQ(g_syncs.load(), 1);
  std::array<float, 3> got{};
  three.copy_to(got, s);
  EXPECT_EQ(got[0], xs[0]);
  EXPECT_EQ(got[1], xs[1]);
  EXPECT_EQ(got[2], xs[2]);
  // So does an rvalue container (its elements die with it); a span does not.
  three.copy_from(std::vector<float>{xs[5], xs[6], xs[7]}, s);
  EXPECT_EQ(g_syncs.load(), 2);
  three.copy_from(std::span<const float>(xs).subspan(9, 3), s);
  EXPECT_EQ(g_syncs.load(), 2);
  three.copy_to(got, s);
  EXPECT_EQ(got[0], xs[9]);
  EXPECT_EQ(got[2], xs[11]);

  // The pre-existing byte overloads keep their meaning.
  std::vector<std::byte> bytes(12);
  three.copy_to(std::span<std::byte>(bytes), s);
  EXPECT_EQ(std::memcmp(bytes.data(), &xs[9], 12), 0);
}

TEST(TypedBuffersFake, SizeMismatchesNameBothAndCopyNothing) {
  FakeDriver fake;
  Stream s = Device(0).create_stream();
  DeviceMemoryResource mr(0);
  Buffer b = mr.allocate<float>(4, s);
  const std::vector<float> four = random_floats(4, 3);
  b.copy_from(four, s);
  const std::vector<float> three = random_floats(3, 4);
  EXPECT_EQ(message_of<std::invalid_argument>([&] { b.copy_from(three, s); }),
            "Buffer::copy_from: size mismatch: the buffer has 16 bytes, the host range has 12 (3 elements of float)");
  std::vector<double> two(2);
  EXPECT_EQ(message_of<std::invalid_argument>([&] { b.copy_to(two, s); }), "(no exception of the expected type)")
      << "16 bytes either way: a Buffer has no element type";
  std::vector<double> one(1);
  EXPECT_EQ(message_of<std::invalid_argument>([&] { b.copy_to(one, s); }),
            "Buffer::copy_to: size mismatch: the buffer has 16 bytes, the host range has 8 (1 element of double)");
  EXPECT_THROW(b.copy_from({1.f, 2.f}, s), std::invalid_argument);

  DeviceSpan<float> span = b.as<float>();
  EXPECT_EQ(message_of<std::invalid_argument>([&] { span.copy_from(three, s); }),
            "DeviceSpan<float>::copy_from: size mismatch: the span has 4 elements, the host range has 3");
  std::vector<float> five(5);
  EXPECT_EQ(message_of<std::invalid_argument>([&] { span.copy_to(five, s); }),
            "DeviceSpan<float>::copy_to: size mismatch: the span has 4 elements, the host range has 5");
  EXPECT_EQ(message_of<std::invalid_argument>([&] { span.first(3).copy_from(span, s); }),
            "DeviceSpan<float> copy: size mismatch: the destination has 3 elements, the source has 4");
  // Nothing was written by the refused copies.
  std::vector<float> back(4);
  b.copy_to(back, s);
  for (std::size_t i = 0; i < 4; ++i) ASSERT_EQ(back[i], four[i]) << "element " << i;

  b.close();
  EXPECT_THROW(b.copy_from(four, s), ClosedError);
  EXPECT_THROW(b.copy_to(back, s), ClosedError);
  EXPECT_THROW(b.copy_from({1.f, 2.f, 3.f, 4.f}, s), ClosedError);
}

TEST(TypedBuffersFake, SpansCopyElementsToHostAndToEachOther) {
  FakeDriver fake;
  count_syncs(fake);
  Stream s = Device(0).create_stream();
  DeviceMemoryResource mr(0);
  const std::size_t n = 100;
  const std::vector<double> xs = random_values<double>(n, 21);
  Buffer a = mr.allocate<double>(n, s), b = mr.allocate<double>(n, s);
  DeviceSpan<double> da = a.as<double>(), db = b.as<double>();
  da.copy_from(xs, s);
  // Span to span (a subrange into another place), then the rest.
  db.subspan(50, 50).copy_from(da.first(50), s);
  da.last(50).copy_to(db.first(50), s);
  std::vector<double> back(n);
  DeviceSpan<const double> cb = std::as_const(b).as<double>();
  cb.copy_to(back, s);
  for (std::size_t i = 0; i < 50; ++i) ASSERT_EQ(back[i], xs[50 + i]) << "element " << i;
  for (std::size_t i = 50; i < n; ++i) ASSERT_EQ(back[i], xs[i - 50]) << "element " << i;
  // A subspan to part of a host array, and from an initializer list (waits).
  std::array<double, 3> three{};
  cb.subspan(10, 3).copy_to(three, s);
  EXPECT_EQ(three[0], xs[60]);
  EXPECT_EQ(three[2], xs[62]);
  EXPECT_EQ(g_syncs.load(), 0);
  da.subspan(1, 2).copy_from({xs[98], xs[99]}, s);
  EXPECT_EQ(g_syncs.load(), 1);
  std::vector<double> head(3);
  da.first(3).copy_to(head, s);
  EXPECT_EQ(head[0], xs[0]) << "untouched before the subspan";
  EXPECT_EQ(head[1], xs[98]);
  EXPECT_EQ(head[2], xs[99]);
}

TEST(TypedBuffersFake, FillsOfOneTwoAndFourByteTypes) {
  FakeDriver fake;
  install_wide_memsets(fake);
  Stream s = Device(0).create_stream();
  DeviceMemoryResource mr(0);
  const std::size_t n = 64;
  Buffer b = mr.allocate<std::uint32_t>(n, s);
  std::mt19937 rng(5);

  // Buffer::fill: the value's type is the width.
  const float f = random_floats(1, 9)[0];
  b.fill(f, s);  // fill<float>, deduced
  std::vector<float> fs(n);
  b.copy_to(fs, s);
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(fs[i], f) << "element " << i;
  const int i32 = static_cast<int>(rng() | 1u);
  b.fill(i32, s);  // was ambiguous between the three unsigned overloads: now 4-byte ints
  std::vector<int> is(n);
  b.copy_to(is, s);
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(is[i], i32) << "element " << i;
  const auto i16 = static_cast<std::int16_t>(rng() | 1u);
  b.fill<std::int16_t>(i16, s);
  std::vector<std::int16_t> hs(2 * n);
  b.copy_to(hs, s);
  for (std::size_t i = 0; i < 2 * n; ++i) ASSERT_EQ(hs[i], i16) << "element " << i;
  b.fill('z', s);
  std::string zs(4 * n, '\0');
  b.copy_to(zs, s);
  EXPECT_EQ(zs, std::string(4 * n, 'z'));
  Buffer six = mr.allocate(6, s);
  EXPECT_THROW(six.fill(1.5f, s), std::invalid_argument) << "6 bytes are not a multiple of 4";

  // DeviceSpan::fill, of the span's own type, on a subspan only.
  b.fill(std::uint8_t{0x11}, s);
  const auto u16 = static_cast<std::uint16_t>(rng() | 1u);
  b.as<std::uint16_t>().subspan(4, 8).fill(u16, s);
  std::vector<std::uint16_t> us(2 * n);
  b.copy_to(us, s);
  for (std::size_t i = 0; i < 2 * n; ++i)
    ASSERT_EQ(us[i], (i >= 4 && i < 12) ? u16 : std::uint16_t{0x1111}) << "element " << i;
  const std::uint32_t u32 = rng() | 1u;
  b.as<std::uint32_t>().last(3).fill(u32, s);
  std::vector<std::uint32_t> ws(n);
  b.copy_to(ws, s);
  EXPECT_EQ(ws[n - 1], u32);
  EXPECT_EQ(ws[n - 3], u32);
  EXPECT_NE(ws[n - 4], u32);
  const auto u8 = static_cast<std::uint8_t>(rng() | 1u);
  b.as<std::uint8_t>().first(5).fill(u8, s);
  std::vector<std::uint8_t> bs(4 * n);
  b.copy_to(bs, s);
  for (std::size_t i = 0; i < 5; ++i) ASSERT_EQ(bs[i], u8) << "element " << i;
  EXPECT_NE(bs[5], u8);
}
