// cucore::compute on a GPU: every algorithm against a host reference on random
// data at sizes 0, 1, 31, 2^20+1 and 2^28; user operators (source and LTO-IR)
// and structs; iterators; radix sort's stability; caller-provided temporary
// storage; the one-shot cache's single flight; and a fresh process that finds
// the kernels in the disk cache without compiling.
#include <cucore/buffer.hpp>
#include <cucore/compute.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/memory.hpp>
#include <cucore/program.hpp>
#include <cucore/program_cache.hpp>
#include <cucore/stream.hpp>

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "common/gpu.hpp"
#include "common/run_command.hpp"
#include "loader/driver.hpp"

using namespace cucore;
using namespace cucore::compute;

namespace {

constexpr std::uint64_t kSizes[] = {0, 1, 31, (1u << 20) + 1};
constexpr std::uint64_t kHuge = 1ull << 28;

class Compute : public ::testing::Test {
 protected:
  void SetUp() override {
    CUCORE_REQUIRE_GPU();
    Device(0).set_current();
    stream_ = std::make_unique<Stream>();
    mr_ = std::make_unique<DeviceMemoryResource>(Device(0));
  }
  template <typename T>
  Buffer upload(const std::vector<T>& v) {
    Buffer b = mr_->allocate(std::max<std::size_t>(v.size(), 1) * sizeof(T), *stream_);
    if (!v.empty()) b.copy_from(std::span<const T>(v), *stream_);
    return b;
  }
  template <typename T>
  Buffer alloc(std::size_t n) {
    return mr_->allocate(std::max<std::size_t>(n, 1) * sizeof(T), *stream_);
  }
  template <typename T>
  std::vector<T> download(const Buffer& b, std::size_t n) {
    std::vector<T> v(n);
    if (n) b.copy_to(std::span<T>(v), *stream_);
    stream_->sync();
    return v;
  }
  // Enough free device memory for `bytes` (2^28 cases need a few GiB)?
  // The 2^28-item cases run when the device has room for them, except under
  // compute-sanitizer (gpu-check sets CUCORE_SMALL_GPU_TESTS=1 there), where
  // the smaller sizes already cover every kernel.
  static bool fits(std::size_t bytes) {
    if (const char* small = std::getenv("CUCORE_SMALL_GPU_TESTS"); small && *small && *small != '0') return false;
    std::size_t free_b = 0, total = 0;
    if (cucore::detail::driver().cuMemGetInfo(&free_b, &total) != CUDA_SUCCESS) return false;
    return bytes + (std::size_t(1) << 30) < free_b;
  }
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<DeviceMemoryResource> mr_;
};

template <typename T>
std::vector<T> random_ints(std::size_t n, unsigned seed, T lo, T hi) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<long long> d(static_cast<long long>(lo), static_cast<long long>(hi));
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(d(rng));
  return v;
}

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-100.f, 100.f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

template <typename T>
Iterator it(const Buffer& b) {
  return Iterator::pointer(Type::of<T>(), b.handle());
}

struct Pair {
  int key;
  float weight;
};
Type pair_type() { return Type::user<Pair>("Pair", "struct Pair { int key; float weight; };"); }

}  // namespace

TEST_F(Compute, ReduceSumMatchesHostAtEverySize) {
  Reduce sum(it<std::uint32_t>(Buffer()), it<std::uint32_t>(Buffer()), OpKind::plus, Type::uint32());
  std::vector<std::uint64_t> sizes(std::begin(kSizes), std::end(kSizes));
  if (fits(kHuge * 4)) sizes.push_back(kHuge);
  for (std::uint64_t n : sizes) {
    auto h = random_ints<std::uint32_t>(n, 1 + n, 0, 0xffffffffu);
    Buffer in = upload(h), out = alloc<std::uint32_t>(1);
    const std::uint32_t init = 12345;
    sum(it<std::uint32_t>(in), it<std::uint32_t>(out), n, Value(init), *stream_);
    std::uint32_t expect = init;  // unsigned: wraps exactly as the device does
    for (auto x : h) expect += x;
    EXPECT_EQ(download<std::uint32_t>(out, 1)[0], expect) << "n = " << n;
  }
}

TEST_F(Compute, ReduceFloatMaxHalfAndDeterminism) {
  const std::uint64_t n = (1u << 20) + 1;
  auto h = random_floats(n, 7);
  Buffer in = upload(h), out = alloc<float>(1);
  reduce(*stream_, static_cast<const float*>(in.data()), static_cast<float*>(out.data()), n, OpKind::maximum, -1e30f);
  EXPECT_EQ(download<float>(out, 1)[0], *std::max_element(h.begin(), h.end()));
  // gpu_to_gpu: a fixed reduction tree; the same result on every run.
  Reduce det(it<float>(in), it<float>(out), OpKind::plus, Type::float32(), {.determinism = Determinism::gpu_to_gpu});
  det(it<float>(in), it<float>(out), n, Value(0.0f), *stream_);
  const float first = download<float>(out, 1)[0];
  double expect = 0;
  for (float x : h) expect += x;
  EXPECT_NEAR(first, expect, 1e-3 * std::abs(expect) + 1.0);
  for (int i = 0; i < 3; ++i) {
    det(it<float>(in), it<float>(out), n, Value(0.0f), *stream_);
    EXPECT_EQ(download<float>(out, 1)[0], first);
  }
}

TEST_F(Compute, ReduceUserStructWithSourceOperator) {
  const std::uint64_t n = 100003;
  std::vector<Pair> h(n);
  auto w = random_floats(n, 3);
  for (std::size_t i = 0; i < n; ++i) h[i] = {static_cast<int>(i), w[i]};
  Buffer in = upload(h), out = alloc<Pair>(1);
  const Type pair = pair_type();
  Reduce heaviest(Iterator::pointer(pair, in), Iterator::pointer(pair, out),
                  Op::source("[](Pair a, Pair b) { return a.weight < b.weight || (a.weight == b.weight && b.key < a.key) ? b : a; }"),
                  pair);
  heaviest(Iterator::pointer(pair, in), Iterator::pointer(pair, out), n, Value::of(pair, Pair{-1, -1e30f}), *stream_);
  const Pair got = download<Pair>(out, 1)[0];
  const auto best = std::max_element(h.begin(), h.end(), [](const Pair& a, const Pair& b) { return a.weight < b.weight; });
  EXPECT_EQ(got.key, best->key);
  EXPECT_EQ(got.weight, best->weight);
}

TEST_F(Compute, ReduceWithLtoIrOperator) {
  const Device d(0);
  const std::string arch = "sm_" + d.arch();
  const std::string src = R"(extern "C" __device__ void absmax(void* a, void* b, void* out) {
    int x = *static_cast<int*>(a), y = *static_cast<int*>(b);
    x = x < 0 ? -x : x; y = y < 0 ? -y : y;
    *static_cast<int*>(out) = x < y ? y : x;
  })";
  ObjectCode lto = Program(src, "c++", {.arch = arch, .relocatable_device_code = true}).compile(CodeType::ltoir);
  const Op op = Op::ltoir("absmax", std::vector<std::byte>(lto.code().begin(), lto.code().end()));
  auto h = random_ints<int>(5000, 11, -1000000, 1000000);
  Buffer in = upload(h), out = alloc<int>(1);
  reduce(*stream_, it<int>(in), it<int>(out), h.size(), op, Value(0));
  int expect = 0;
  for (int x : h) expect = std::max(expect, std::abs(x));
  EXPECT_EQ(download<int>(out, 1)[0], expect);
}

TEST_F(Compute, ScansMatchHostAtEverySize) {
  std::vector<std::uint64_t> sizes(std::begin(kSizes), std::end(kSizes));
  if (fits(kHuge * 8)) sizes.push_back(kHuge);
  InclusiveScan inc(it<std::uint32_t>(Buffer()), it<std::uint32_t>(Buffer()), OpKind::plus);
  ExclusiveScan exc(it<std::uint32_t>(Buffer()), it<std::uint32_t>(Buffer()), OpKind::plus, Type::uint32());
  for (std::uint64_t n : sizes) {
    auto h = random_ints<std::uint32_t>(n, 5 + n, 0, 1000);
    Buffer in = upload(h), out = alloc<std::uint32_t>(n);
    inc(it<std::uint32_t>(in), it<std::uint32_t>(out), n, std::nullopt, *stream_);
    auto got = download<std::uint32_t>(out, n);
    std::uint32_t acc = 0;
    for (std::size_t i = 0; i < n; ++i) {
      acc += h[i];
      ASSERT_EQ(got[i], acc) << "inclusive, n = " << n << ", i = " << i;
    }
    exc(it<std::uint32_t>(in), it<std::uint32_t>(out), n, Value(7u), *stream_);
    got = download<std::uint32_t>(out, n);
    acc = 7;
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(got[i], acc) << "exclusive, n = " << n << ", i = " << i;
      acc += h[i];
    }
  }
}

TEST_F(Compute, ScanMaxOfFloatsWithInitAndNonPrimitiveAccumulator) {
  const std::uint64_t n = 31 + (1u << 16);
  auto h = random_floats(n, 9);
  Buffer in = upload(h), out = alloc<float>(n);
  inclusive_scan(*stream_, it<float>(in), it<float>(out), n, OpKind::maximum, Value(0.0f));
  auto got = download<float>(out, n);
  float acc = 0.0f;
  for (std::size_t i = 0; i < n; ++i) {
    acc = std::max(acc, h[i]);
    ASSERT_EQ(got[i], acc) << i;
  }
  // A struct accumulator takes CUB's three-array tile state.
  std::vector<Pair> p(n);
  for (std::size_t i = 0; i < n; ++i) p[i] = {1, h[i]};
  Buffer pin = upload(p), pout = alloc<Pair>(n);
  const Type pair = pair_type();
  inclusive_scan(*stream_, Iterator::pointer(pair, pin), Iterator::pointer(pair, pout), n,
                 Op::source("[](Pair a, Pair b) { return Pair{a.key + b.key, a.weight + b.weight}; }"));
  auto gp = download<Pair>(pout, n);
  for (std::size_t i = 0; i < n; i += 997) EXPECT_EQ(gp[i].key, static_cast<int>(i + 1)) << i;
}

TEST_F(Compute, TransformsAndIterators) {
  std::vector<std::uint64_t> sizes(std::begin(kSizes), std::end(kSizes));
  if (fits(kHuge * 12)) sizes.push_back(kHuge);
  BinaryTransform saxpy(it<float>(Buffer()), it<float>(Buffer()), it<float>(Buffer()),
                        Op::source("[](float x, float y) { return 2.0f * x + y; }"));
  for (std::uint64_t n : sizes) {
    auto x = random_floats(n, 1), y = random_floats(n, 2);
    Buffer bx = upload(x), by = upload(y), out = alloc<float>(n);
    saxpy(it<float>(bx), it<float>(by), it<float>(out), n, *stream_);
    auto got = download<float>(out, n);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], 2.0f * x[i] + y[i]) << "n = " << n << ", i = " << i;
  }
  // out[i] = (x[n-1-i] * (i % 3)) as double, from a zip of a reverse and a transformed counting iterator.
  const std::uint64_t n = 1001;
  auto x = random_floats(n, 4);
  Buffer bx = upload(x), out = alloc<double>(n);
  const Iterator zipped = Iterator::zip(
      {Iterator::reverse(it<float>(bx), n),
       Iterator::transform(Iterator::counting(Value(std::int64_t{0})), Op::source("[](long long i) { return int(i % 3); }"),
                           Type::int32())});
  unary_transform(*stream_, zipped, it<double>(out), n, Op::source("[](auto z) { return double(z.f0) * z.f1; }"));
  auto got = download<double>(out, n);
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], double(x[n - 1 - i]) * int(i % 3)) << i;
  // Reduce over a constant iterator, output through a reverse iterator.
  Buffer r = alloc<std::int64_t>(1);
  reduce(*stream_, Iterator::constant(Value(std::int64_t{3})), Iterator::reverse(it<std::int64_t>(r), 1), 1000,
         OpKind::plus, Value(std::int64_t{1}));
  EXPECT_EQ(download<std::int64_t>(r, 1)[0], 3001);
  // A discard output runs and writes nothing.
  unary_transform(*stream_, Iterator::counting(Value(1)), Iterator::discard(Type::int32()), 100, OpKind::negate);
  stream_->sync();
}

TEST_F(Compute, RadixSortKeysAndPairsAtEverySizeAndStable) {
  std::vector<std::uint64_t> sizes(std::begin(kSizes), std::end(kSizes));
  RadixSort keys(Type::uint32(), std::nullopt, SortOrder::ascending);
  RadixSort pairs(Type::uint32(), Type::uint32(), SortOrder::descending);
  for (std::uint64_t n : sizes) {
    auto k = random_ints<std::uint32_t>(n, 21 + n, 0, n < 100 ? 0xffffffffu : 5000);  // duplicates
    std::vector<std::uint32_t> v(n);
    std::iota(v.begin(), v.end(), 0u);
    Buffer kin = upload(k), kout = alloc<std::uint32_t>(n), vin = upload(v), vout = alloc<std::uint32_t>(n);
    keys(kin.handle(), kout.handle(), 0, 0, n, *stream_);
    auto sorted = k;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(download<std::uint32_t>(kout, n), sorted) << "keys, n = " << n;
    pairs(kin.handle(), kout.handle(), vin.handle(), vout.handle(), n, *stream_);
    // Stable descending: equal keys keep their values (input order) ascending.
    std::vector<std::pair<std::uint32_t, std::uint32_t>> ref(n);
    for (std::size_t i = 0; i < n; ++i) ref[i] = {k[i], v[i]};
    std::stable_sort(ref.begin(), ref.end(), [](auto& a, auto& b) { return a.first > b.first; });
    auto gk = download<std::uint32_t>(kout, n), gv = download<std::uint32_t>(vout, n);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(gk[i], ref[i].first) << "pairs, n = " << n << ", i = " << i;
      ASSERT_EQ(gv[i], ref[i].second) << "pairs (stability), n = " << n << ", i = " << i;
    }
  }
}

TEST_F(Compute, RadixSortHugePairsFloatKeysBitRangeAndDoubleBuffer) {
  if (fits(kHuge * 20)) {
    const std::uint64_t n = kHuge;
    auto k = random_ints<std::uint32_t>(n, 99, 0, 0xffffffffu);
    Buffer kin = upload(k), kout = alloc<std::uint32_t>(n), vin = upload(k), vout = alloc<std::uint32_t>(n);
    radix_sort_pairs(*stream_, static_cast<const std::uint32_t*>(kin.data()), static_cast<std::uint32_t*>(kout.data()),
                     static_cast<const std::uint32_t*>(vin.data()), static_cast<std::uint32_t*>(vout.data()), n);
    auto gk = download<std::uint32_t>(kout, n), gv = download<std::uint32_t>(vout, n);
    std::uint64_t hin = 0, hout = 0;
    for (std::size_t i = 0; i < n; ++i) {
      hin += k[i] * 0x9E3779B97F4A7C15ull;
      hout += gk[i] * 0x9E3779B97F4A7C15ull;
      if (i) {
        ASSERT_LE(gk[i - 1], gk[i]) << i;
      }
      ASSERT_EQ(gk[i], gv[i]) << i;  // each value travelled with its key
    }
    EXPECT_EQ(hin, hout) << "the output is not a permutation of the input";
  }
  // Float keys (negative too), only bits [0, 32) of 32; then a bit range on integers.
  const std::uint64_t n = 70001;
  auto f = random_floats(n, 12);
  Buffer fin = upload(f), fout = alloc<float>(n);
  RadixSort fs(Type::float32(), std::nullopt, SortOrder::ascending);
  fs(fin.handle(), fout.handle(), 0, 0, n, *stream_);
  auto fsorted = f;
  std::sort(fsorted.begin(), fsorted.end());
  EXPECT_EQ(download<float>(fout, n), fsorted);
  auto k = random_ints<std::uint32_t>(n, 13, 0, 0xffffffffu);
  Buffer a = upload(k), b = alloc<std::uint32_t>(n);
  RadixSort ks(Type::uint32(), std::nullopt, SortOrder::ascending);
  DoubleBuffer db{{a.handle(), b.handle()}, 0};
  ks(db, nullptr, n, *stream_, 4, 20);
  auto expect = k;
  std::stable_sort(expect.begin(), expect.end(), [](auto x, auto y) { return ((x >> 4) & 0xffff) < ((y >> 4) & 0xffff); });
  const Buffer& result = db.selector == 0 ? a : b;
  EXPECT_EQ(download<std::uint32_t>(result, n), expect) << "bits [4, 20), double buffer selector " << db.selector;
}

TEST_F(Compute, HistogramEvenMatchesHost) {
  std::vector<std::uint64_t> sizes(std::begin(kSizes), std::end(kSizes));
  if (fits(kHuge * 4)) sizes.push_back(kHuge);
  HistogramEven hist(it<int>(Buffer()), Type::int32(), Type::int32(), 257);
  for (std::uint64_t n : sizes) {
    auto h = random_ints<int>(n, 31 + n, -20, 1100);  // some outside [0, 1024)
    Buffer in = upload(h), out = alloc<int>(256);
    hist(it<int>(in), out.handle(), 257, Value(0), Value(1024), n, *stream_);
    std::vector<int> expect(256, 0);
    for (int x : h)
      if (x >= 0 && x < 1024) ++expect[static_cast<std::size_t>(x) * 256 / 1024];
    EXPECT_EQ(download<int>(out, 256), expect) << "n = " << n;
  }
  // Byte samples (CUB's byte path) and float samples.
  auto bytes = random_ints<std::uint8_t>(100000, 41, 0, 255);
  Buffer bin = upload(bytes), bout = alloc<std::uint32_t>(16);
  histogram_even(*stream_, it<std::uint8_t>(bin), Type::uint32(), bout.handle(), 17, Value(0), Value(256), bytes.size());
  std::vector<std::uint32_t> be(16, 0);
  for (auto x : bytes) ++be[x / 16];
  EXPECT_EQ(download<std::uint32_t>(bout, 16), be);
  auto f = random_floats(100000, 42);
  Buffer fin = upload(f), fout = alloc<int>(10);
  histogram_even(*stream_, it<float>(fin), Type::int32(), fout.handle(), 11, Value(-50.0f), Value(50.0f), f.size());
  auto got = download<int>(fout, 10);
  std::vector<int> fe(10, 0);
  const float scale = static_cast<float>(10) / (50.0f - -50.0f);
  for (float x : f) {
    const int b = static_cast<int>((x - -50.0f) * scale);  // the device's arithmetic
    if (x >= -50.0f && x < 50.0f && b < 10) ++fe[b];
  }
  EXPECT_EQ(got, fe);
}

// CUB's bin of an integer sample: (sample - lower) * bins / (upper - lower),
// exactly (the device takes a multiply-high shortcut when the product fits 32 bits).
template <typename T>
std::vector<std::uint64_t> histogram_reference(const std::vector<T>& samples, int bins, T lower, T upper) {
  __extension__ using u128 = unsigned __int128;
  std::vector<std::uint64_t> h(static_cast<std::size_t>(bins), 0);
  const u128 range = static_cast<u128>(static_cast<std::uint64_t>(upper) - static_cast<std::uint64_t>(lower));
  for (T x : samples)
    if (x >= lower && x < upper) {
      const u128 n = static_cast<std::uint64_t>(x) - static_cast<std::uint64_t>(lower);
      ++h[static_cast<std::size_t>(n * static_cast<u128>(bins) / range)];
    }
  return h;
}

// Integer levels over both of the device's bin computations (the multiply-high
// form when (upper - lower) * bins fits 32 bits, CUB's division otherwise), at
// their boundary, with signed, unsigned and 64-bit samples, ranges that are
// not powers of two and samples on both sides of the range.
TEST_F(Compute, HistogramEvenIntegerLevelsOnBothBinComputations) {
  const std::size_t n = (1u << 20) + 7;
  auto check = [&](auto lower, auto upper, int bins, auto lo, auto hi, unsigned seed, const char* what) {
    using T = decltype(lower);
    auto h = random_ints<T>(n, seed, static_cast<T>(lo), static_cast<T>(hi));
    h[0] = lower;
    h[1] = static_cast<T>(upper - 1);
    h[2] = upper;
    Buffer in = upload(h), out = alloc<std::uint64_t>(static_cast<std::size_t>(bins));
    histogram_even(*stream_, it<T>(in), Type::uint64(), out.handle(), bins + 1, Value(lower), Value(upper), n);
    const auto expect = histogram_reference<T>(h, bins, lower, upper);
    const auto got = download<std::uint64_t>(out, static_cast<std::size_t>(bins));
    std::uint64_t counted = 0;
    for (auto c : expect) counted += c;
    EXPECT_GT(counted, n / 8) << what;
    EXPECT_EQ(got, expect) << what;
  };
  check(std::int32_t{-1000}, std::int32_t{999983}, 256, -1100000, 1100000, 1, "int32, negative lower, prime-ish range");
  check(std::int32_t{-7}, std::int32_t{-6}, 1, -9, -5, 2, "int32, a range of 1");
  // (upper - lower - 1) * bins == 2^32 - 1: the largest range of the fast form ...
  check(std::uint32_t{5}, std::uint32_t{5 + 16843010u}, 255, 0u, 16843100u, 3, "uint32, largest fast range");
  // ... and one more: CUB's 64-bit division.
  check(std::uint32_t{5}, std::uint32_t{5 + 16843011u}, 255, 0u, 16843100u, 4, "uint32, smallest slow range");
  check(std::int64_t{-(1ll << 40)}, std::int64_t{(1ll << 40) + 12345}, 1000, -(1ll << 41), 1ll << 41, 5,
        "int64, range beyond 32 bits");
  check(std::int64_t{-3000000000ll}, std::int64_t{-2999000001ll}, 97, -3000100000ll, -2998900000ll, 6,
        "int64 levels below -2^31, fast range");
  check(std::uint64_t{1ull << 60}, std::uint64_t{(1ull << 60) + 4095}, 64, (1ull << 60) - 500, (1ull << 60) + 5000,
        7, "uint64 near 2^60");
}

// Calls run back to back on one stream (launched programmatically on compute
// capability 9.0+): a histogram of samples a kernel has just written, then a
// second one into the same counters, must each see the work before them.
TEST_F(Compute, HistogramEvenBackToBackOnOneStream) {
  const std::uint64_t n = (1u << 22) + 3;
  Buffer samples = alloc<int>(n), counts = alloc<int>(256), first = alloc<int>(256);
  HistogramEven hist(it<int>(samples), Type::int32(), Type::int32(), 257);
  for (int round = 0; round < 3; ++round) {
    const unsigned mul = 2654435761u + 2u * round;
    // Samples made on the device immediately before the histogram reads them.
    unary_transform(*stream_, Iterator::counting(Value(0u)), it<int>(samples), n,
                    Op::source("[](unsigned i) { unsigned h = i * " + std::to_string(mul) +
                               "u; h ^= h >> 15; return int(h % 70000u) - 3000; }"));
    hist(it<int>(samples), first.handle(), 257, Value(0), Value(65536), n, *stream_);
    hist(it<int>(samples), counts.handle(), 257, Value(-3000), Value(64000), n, *stream_);
    hist(it<int>(samples), counts.handle(), 257, Value(0), Value(65536), n, *stream_);  // the same counters again
    std::vector<int> h(n);
    for (std::uint64_t i = 0; i < n; ++i) {
      unsigned x = static_cast<unsigned>(i) * mul;
      x ^= x >> 15;
      h[i] = static_cast<int>(x % 70000u) - 3000;
    }
    const auto r = histogram_reference<int>(h, 256, 0, 65536);
    const std::vector<int> expect(r.begin(), r.end());
    EXPECT_EQ(download<int>(first, 256), expect) << "round " << round << ": the histogram after the producer";
    EXPECT_EQ(download<int>(counts, 256), expect) << "round " << round << ": the second call into the same counters";
  }
}

TEST_F(Compute, CallerProvidedTemporaryStorage) {
  const std::uint64_t n = (1u << 20) + 1;
  auto h = random_ints<std::uint32_t>(n, 3, 0, 100);
  Buffer in = upload(h), out = alloc<std::uint32_t>(1);
  Reduce sum(it<std::uint32_t>(in), it<std::uint32_t>(out), OpKind::plus, Type::uint32());
  const std::size_t bytes = sum(nullptr, 0, it<std::uint32_t>(in), it<std::uint32_t>(out), n, Value(0u), *stream_);
  ASSERT_GT(bytes, 1u);
  Buffer temp = mr_->allocate(bytes, *stream_);
  EXPECT_THROW(sum(temp.data(), bytes - 1, it<std::uint32_t>(in), it<std::uint32_t>(out), n, Value(0u), *stream_),
               std::invalid_argument);
  sum(temp.data(), bytes, it<std::uint32_t>(in), it<std::uint32_t>(out), n, Value(0u), *stream_);
  EXPECT_EQ(download<std::uint32_t>(out, 1)[0], std::accumulate(h.begin(), h.end(), 0u));
  // Calls must match what the object was built for.
  EXPECT_THROW(sum(it<std::uint32_t>(in), it<std::uint32_t>(out), n, Value(0), *stream_), std::invalid_argument);
  EXPECT_THROW(sum(Iterator::counting(Value(0u)), it<std::uint32_t>(out), n, Value(0u), *stream_), std::invalid_argument);
}

TEST_F(Compute, OneShotBuildsOnceForSixteenThreads) {
  clear_build_cache();
  const BuildCacheStats before = build_cache_stats();
  auto h = random_ints<std::int16_t>(4096, 5, -100, 100);
  Buffer in = upload(h);
  stream_->sync();
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 16; ++t)
    threads.emplace_back([&, t] {
      Stream s;
      Buffer out = mr_->allocate(sizeof(std::int64_t), s);
      reduce(s, it<std::int16_t>(in), Iterator::pointer(Type::int64(), out), h.size(), OpKind::plus,
             Value(std::int64_t{t}));
      std::int64_t got = 0;
      out.copy_to(std::span<std::int64_t>(&got, 1), s);
      s.sync();
      std::int64_t expect = t;
      for (auto x : h) expect += x;
      if (got != expect) ++wrong;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  const BuildCacheStats after = build_cache_stats();
  EXPECT_EQ(after.builds - before.builds, 1u) << "16 threads asking for one build must build it once";
  EXPECT_EQ((after.hits + after.waits) - (before.hits + before.waits), 15u);
}

// The child half of DiskCacheHitInFreshProcess (disabled: only the parent runs it).
TEST_F(Compute, DISABLED_DiskCacheChild) {
  const char* dir = std::getenv("CUCORE_COMPUTE_TEST_CACHE");
  if (!dir) GTEST_SKIP() << "runs as the child of DiskCacheHitInFreshProcess";
  FileStreamProgramCache cache(dir);
  Reduce sum(it<int>(Buffer()), it<int>(Buffer()), OpKind::plus, Type::int32(), {.build = {.cache = &cache}});
  auto h = random_ints<int>(1000, 77, -50, 50);
  Buffer in = upload(h), out = alloc<int>(1);
  sum(it<int>(in), it<int>(out), h.size(), Value(0), *stream_);
  EXPECT_EQ(download<int>(out, 1)[0], std::accumulate(h.begin(), h.end(), 0));
  EXPECT_GE(cache.stats().hits, 1u);
  EXPECT_EQ(cache.stats().misses, 0u);
  for (const char* so : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", "libnvJitLink.so.13", "libnvJitLink.so"})
    EXPECT_EQ(dlopen(so, RTLD_LAZY | RTLD_NOLOAD), nullptr) << so << " was loaded: something compiled or linked";
}

TEST_F(Compute, DiskCacheHitInFreshProcess) {
  const auto dir = std::filesystem::temp_directory_path() / ("cucore-compute-test-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  {
    FileStreamProgramCache cache(dir);
    Reduce sum(it<int>(Buffer()), it<int>(Buffer()), OpKind::plus, Type::int32(), {.build = {.cache = &cache}});
    ASSERT_EQ(cache.stats().misses, 1u);
  }
  const auto child = cucore::test::run_own_test("Compute.DISABLED_DiskCacheChild",
                                                "CUCORE_COMPUTE_TEST_CACHE='" + dir.string() + "'");
  EXPECT_EQ(child.status, 0) << child.out;
  EXPECT_NE(child.out.find("[  PASSED  ] 1 test"), std::string::npos) << child.out;
  std::filesystem::remove_all(dir);
}
