// The strided layout (cucore/strided_layout.hpp) on random shapes and strides,
// each function against an independent brute force: every element's offset
// enumerated (in 128-bit arithmetic) in C order, F order and every order of
// the axes; the overflow rules against a 128-bit model; every refusal's type
// and text; and StridedMemoryView computing through the same functions.
#include <cucore/strided_layout.hpp>
#include <cucore/strided_memory_view.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/message_of.hpp"

namespace {

using namespace cucore;
using Ints = std::vector<std::int64_t>;
__extension__ typedef __int128 wide;

constexpr wide kMax = std::numeric_limits<std::int64_t>::max();
constexpr wide kMin = std::numeric_limits<std::int64_t>::min();
bool fits(wide v) { return v >= kMin && v <= kMax; }

std::string invalid_message(const std::function<void()>& fn) { return test::message_of<std::invalid_argument>(fn); }
std::string overflow_message(const std::function<void()>& fn) { return test::message_of<std::overflow_error>(fn); }
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string describe(const Ints& shape, const Ints& strides) {
  std::string s = "shape (";
  for (auto e : shape) s += std::to_string(e) + ",";
  s += ") strides (";
  for (auto e : strides) s += std::to_string(e) + ",";
  return s + ")";
}

// ---- the brute force ------------------------------------------------------------------
// Every index of `shape`, the axes of `axes` counting with its last axis
// fastest (C order: 0, 1, ..., n-1), as `visit(index)`.
void for_each_index(const Ints& shape, const Ints& axes, const std::function<void(const Ints&)>& visit) {
  for (auto e : shape)
    if (e == 0) return;
  Ints idx(shape.size(), 0);
  while (true) {
    visit(idx);
    std::size_t k = axes.size();
    while (k > 0) {
      const auto a = static_cast<std::size_t>(axes[k - 1]);
      if (++idx[a] < shape[a]) break;
      idx[a] = 0;
      --k;
    }
    if (k == 0) return;
  }
}

Ints identity(std::size_t n) {
  Ints p(n);
  std::iota(p.begin(), p.end(), 0);
  return p;
}

// The offset of an index: sum of index * stride, or with no strides its rank
// in C order (what "C-contiguous" means, computed by counting, not by strides).
wide offset_of(const Ints& shape, const Ints& strides, const Ints& idx) {
  wide off = 0;
  if (strides.empty()) {
    for (std::size_t i = 0; i < shape.size(); ++i) off = off * shape[i] + idx[i];
    return off;
  }
  for (std::size_t i = 0; i < shape.size(); ++i) off += static_cast<wide>(idx[i]) * strides[i];
  return off;
}

// Enumerated in the order of `axes`, the elements sit at 0, 1, 2, ...
bool counts_up(const Ints& shape, const Ints& strides, const Ints& axes) {
  wide k = 0;
  bool ok = true;
  for_each_index(shape, axes, [&](const Ints& idx) { ok = ok && offset_of(shape, strides, idx) == k++; });
  return ok;
}

std::int64_t count_of(const Ints& shape) {  // small shapes only
  std::int64_t n = 0;
  for_each_index(shape, identity(shape.size()), [&](const Ints&) { ++n; });
  return n;
}

struct Bounds {  // small layouts only
  std::int64_t min = 0, max = -1;
};
Bounds bounds_of(const Ints& shape, const Ints& strides) {
  Bounds b;
  bool first = true;
  for_each_index(shape, identity(shape.size()), [&](const Ints& idx) {
    const auto off = static_cast<std::int64_t>(offset_of(shape, strides, idx));
    if (first || off < b.min) b.min = off;
    if (first || off > b.max) b.max = off;
    first = false;
  });
  return b;
}

bool any_order_counts_up(const Ints& shape, const Ints& strides) {
  Ints p = identity(shape.size());
  do {
    if (counts_up(shape, strides, p)) return true;
  } while (std::next_permutation(p.begin(), p.end()));
  return false;
}

// ---- random layouts --------------------------------------------------------------------
struct Layout {
  Ints shape, strides;  // strides empty: C-contiguous
};

Layout random_layout(std::mt19937& rng) {
  std::uniform_int_distribution<int> ndim_d(0, 5), pick(0, 9), ext(0, 4), stride_d(-7, 7);
  Layout l;
  const int n = ndim_d(rng);
  for (int i = 0; i < n; ++i) {
    const int p = pick(rng);
    l.shape.push_back(p == 0 ? 0 : p <= 2 ? 1 : ext(rng) % 3 + 2);  // 0 rarely, 1 often, else 2..4
  }
  switch (pick(rng) % 5) {
    case 0:
      break;   // C-contiguous, no strides
    case 1: {  // dense in a random order, maybe with one stride nudged
      Ints order = identity(l.shape.size());
      std::shuffle(order.begin(), order.end(), rng);
      l.strides.assign(l.shape.size(), 0);
      std::int64_t step = 1;
      for (std::size_t k = order.size(); k-- > 0;) {
        l.strides[static_cast<std::size_t>(order[k])] = step;
        step *= l.shape[static_cast<std::size_t>(order[k])];
      }
      if (!l.strides.empty() && pick(rng) < 4) l.strides[static_cast<std::size_t>(pick(rng)) % l.strides.size()] += 1;
      break;
    }
    default:
      for (std::size_t i = 0; i < l.shape.size(); ++i) l.strides.push_back(stride_d(rng));
  }
  return l;
}

constexpr int kCases = 3000;

}  // namespace

TEST(StridedLayoutTest, VolumeAndSizeAreTheElementCount) {
  std::mt19937 rng(11);
  for (int c = 0; c < kCases; ++c) {
    const Layout l = random_layout(rng);
    const std::int64_t itemsize = std::int64_t(1) << (rng() % 5);
    ASSERT_EQ(volume(l.shape), count_of(l.shape)) << describe(l.shape, l.strides);
    ASSERT_EQ(size_in_bytes(l.shape, itemsize), count_of(l.shape) * itemsize);
    ASSERT_EQ(size_in_bytes(l.shape, 12), count_of(l.shape) * 12) << "any positive item size";
  }
  EXPECT_EQ(volume({}), 1) << "a scalar is one element";
}

TEST(StridedLayoutTest, ContiguityIsWhatEnumeratingTheOffsetsShows) {
  std::mt19937 rng(12);
  int seen_c = 0, seen_f = 0, seen_any_only = 0, seen_none = 0;
  for (int c = 0; c < kCases; ++c) {
    const Layout l = random_layout(rng);
    const Ints& sh = l.shape;
    const Ints& st = l.strides;
    Ints f_order = identity(sh.size());
    std::reverse(f_order.begin(), f_order.end());
    const bool c_bf = counts_up(sh, st, identity(sh.size()));  // an empty shape counts up vacuously
    const bool f_bf = counts_up(sh, st, f_order);
    const bool any_bf = any_order_counts_up(sh, st);
    ASSERT_EQ(is_contiguous_c(sh, st), c_bf) << describe(sh, st);
    ASSERT_EQ(is_contiguous_f(sh, st), f_bf) << describe(sh, st);
    ASSERT_EQ(is_contiguous_any(sh, st), any_bf) << describe(sh, st);
    // The strides a view reports as None: the C ones exactly (extents of 1
    // aside), also for an empty shape, whose offsets say nothing.
    bool c_strides = true;
    wide expect = 1;
    for (std::size_t i = sh.size(); i-- > 0 && !st.empty();) {
      if (sh[i] != 1 && st[i] != expect) c_strides = false;
      expect *= sh[i];
    }
    ASSERT_EQ(has_dense_c_strides(sh, st), c_strides) << describe(sh, st);
    if (count_of(sh) > 0) {
      ASSERT_EQ(c_strides, c_bf) << "with elements, the same as C-contiguous";
    }
    seen_c += c_bf;
    seen_f += f_bf;
    seen_any_only += any_bf && !c_bf && !f_bf;
    seen_none += !any_bf;
  }
  // The random layouts reach every case.
  EXPECT_GT(seen_c, 100);
  EXPECT_GT(seen_f, 100);
  EXPECT_GT(seen_any_only, 50);
  EXPECT_GT(seen_none, 100);
  // Empty shapes are contiguous whatever their strides, in any position.
  const Ints empty_first[] = {{0, 3}, {5, 7}}, empty_last[] = {{3, 0}, {7, 5}};
  for (const auto& [sh, st] : {std::pair(empty_first[0], empty_first[1]), std::pair(empty_last[0], empty_last[1])}) {
    EXPECT_TRUE(is_contiguous_c(sh, st) && is_contiguous_f(sh, st) && is_contiguous_any(sh, st)) << describe(sh, st);
    EXPECT_FALSE(has_dense_c_strides(sh, st));
  }
  // Extents beyond what the offsets can count are still judged without overflow.
  const std::int64_t big = std::int64_t(1) << 62;
  EXPECT_FALSE(is_contiguous_c(Ints{4, big, big}, Ints{1, big, 1})) << "axis 0 would need stride 2^124";
  EXPECT_TRUE(is_contiguous_c(Ints{1, big, big}, Ints{7, big, 1})) << "an extent of 1 needs no stride";
  EXPECT_FALSE(is_contiguous_f(Ints{big, big, 4}, Ints{1, big, 1}));
  EXPECT_FALSE(is_contiguous_any(Ints{big, big, 4}, Ints{big, 1, 1}));
  EXPECT_FALSE(has_dense_c_strides(Ints{4, big, big}, Ints{1, big, 1}));
}

TEST(StridedLayoutTest, DenseStridesCountUpInTheirOrder) {
  std::mt19937 rng(13);
  for (int c = 0; c < kCases; ++c) {
    const Ints shape = random_layout(rng).shape;
    const std::size_t n = shape.size();
    Ints order = identity(n);
    std::shuffle(order.begin(), order.end(), rng);
    Ints spelled = order;  // the same permutation, some axes counted from the end
    for (auto& a : spelled)
      if (rng() % 2) a -= static_cast<std::int64_t>(n);
    Ints f_order = identity(n);
    std::reverse(f_order.begin(), f_order.end());
    const Ints cases[][2] = {{dense_strides(shape, order), order},
                             {dense_strides(shape, spelled), order},
                             {dense_strides(shape, LayoutOrder::c), identity(n)},
                             {dense_strides(shape, LayoutOrder::f), f_order}};
    for (const auto& [strides, axes] : cases) {
      ASSERT_EQ(strides.size(), n);
      ASSERT_TRUE(counts_up(shape, strides, axes)) << describe(shape, strides);
      // Each stride is the product of the extents after its axis in the
      // order (zeros included): what an empty shape's strides are too.
      for (std::size_t k = 0; k < n; ++k) {
        wide p = 1;
        for (std::size_t j = k + 1; j < n; ++j) p *= shape[static_cast<std::size_t>(axes[j])];
        ASSERT_EQ(strides[static_cast<std::size_t>(axes[k])], p) << describe(shape, strides);
      }
    }
    // The span form writes the same into the caller's storage.
    Ints out(n, -99);
    dense_strides(shape, LayoutOrder::f, out);
    ASSERT_EQ(out, dense_strides(shape, LayoutOrder::f));
  }
  EXPECT_TRUE(dense_strides(Ints{}).empty());
  EXPECT_EQ(dense_strides(Ints{5, 3, 7}, Ints{2, 0, 1}), (Ints{3, 1, 15}));  // cuda.core's documented example
  EXPECT_EQ(dense_strides(Ints{5, 3, 7}, LayoutOrder::f), (Ints{1, 5, 15}));
}

TEST(StridedLayoutTest, StrideOrderSortsTheStridesAndUndoesDenseStrides) {
  std::mt19937 rng(14);
  for (int c = 0; c < kCases; ++c) {
    const Layout l = random_layout(rng);
    Ints order(l.shape.size());
    stride_order(l.shape, l.strides, order);
    Ints sorted = order;
    std::sort(sorted.begin(), sorted.end());
    ASSERT_EQ(sorted, identity(l.shape.size())) << "a permutation";
    if (l.strides.empty()) {
      ASSERT_EQ(order, identity(l.shape.size()));
      continue;
    }
    for (std::size_t k = 0; k + 1 < order.size(); ++k) {
      const auto a = static_cast<std::size_t>(order[k]), b = static_cast<std::size_t>(order[k + 1]);
      const wide sa = l.strides[a] < 0 ? -wide(l.strides[a]) : wide(l.strides[a]);
      const wide sb = l.strides[b] < 0 ? -wide(l.strides[b]) : wide(l.strides[b]);
      ASSERT_TRUE(sa > sb || (sa == sb && (l.shape[a] > l.shape[b] || (l.shape[a] == l.shape[b] && a < b))))
          << describe(l.shape, l.strides);
    }
    // Dense strides of a shape with no extent below 2 give their order back.
    Ints shape = l.shape;
    for (auto& e : shape) e += 2;
    Ints perm = identity(shape.size());
    std::shuffle(perm.begin(), perm.end(), rng);
    stride_order(shape, dense_strides(shape, perm), order);
    ASSERT_EQ(order, perm);
  }
  const Ints sh = {2, 3}, st = {std::numeric_limits<std::int64_t>::min(), 1};
  Ints order(2);
  stride_order(sh, st, order);
  EXPECT_EQ(order, (Ints{0, 1})) << "the magnitude of INT64_MIN, without overflow";
}

TEST(StridedLayoutTest, BoundsAndRequiredSizesAreTheOffsetsReached) {
  std::mt19937 rng(15);
  int negative = 0;
  for (int c = 0; c < kCases; ++c) {
    const Layout l = random_layout(rng);
    const std::int64_t itemsize = std::int64_t(1) << (rng() % 5);
    const Bounds bf = bounds_of(l.shape, l.strides);
    const OffsetBounds b = offset_bounds(l.shape, l.strides);
    ASSERT_EQ(b.min, bf.min) << describe(l.shape, l.strides);
    ASSERT_EQ(b.max, bf.max) << describe(l.shape, l.strides);
    const ByteBounds bytes = byte_bounds(l.shape, l.strides, itemsize);
    if (bf.max < bf.min) {
      ASSERT_EQ(bytes, (ByteBounds{0, 0}));
    } else {
      ASSERT_EQ(bytes.begin, bf.min * itemsize);
      ASSERT_EQ(bytes.end, (bf.max + 1) * itemsize);
    }
    if (bf.min < 0) {
      ++negative;
      ASSERT_TRUE(contains(invalid_message([&] { required_span(l.shape, l.strides); }),
                           "negative strides reach offset " + std::to_string(bf.min)));
      ASSERT_TRUE(
          contains(invalid_message([&] { required_size_in_bytes(l.shape, l.strides, itemsize); }), "negative strides"));
    } else {
      ASSERT_EQ(required_span(l.shape, l.strides), bf.max + 1) << describe(l.shape, l.strides);
      ASSERT_EQ(required_size_in_bytes(l.shape, l.strides, itemsize), (bf.max + 1) * itemsize);
    }
  }
  EXPECT_GT(negative, 100);
  // A negative stride on an extent of 1 reaches nothing.
  EXPECT_EQ(required_span(Ints{1, 4}, Ints{-9, 2}), 7);
}

TEST(StridedLayoutTest, StridesConvertToAndFromBytes) {
  std::mt19937 rng(16);
  std::uniform_int_distribution<std::int64_t> d(-1000, 1000);
  for (int c = 0; c < kCases; ++c) {
    const std::int64_t itemsize = std::int64_t(1) << (rng() % 5);
    Ints strides(rng() % 6);
    for (auto& s : strides) s = d(rng);
    Ints bytes(strides.size()), back(strides.size());
    strides_to_bytes(strides, itemsize, bytes);
    for (std::size_t i = 0; i < strides.size(); ++i) ASSERT_EQ(bytes[i], strides[i] * itemsize);
    strides_from_bytes(bytes, itemsize, back);
    ASSERT_EQ(back, strides);
    // A byte stride that is not a whole number of items is refused, naming it.
    if (itemsize > 1 && !bytes.empty()) {
      Ints off = bytes;
      off.back() += 1 + static_cast<std::int64_t>(rng() % static_cast<unsigned>(itemsize - 1));
      ASSERT_TRUE(contains(invalid_message([&] { strides_from_bytes(off, itemsize, back); }),
                           "stride " + std::to_string(off.back()) + " bytes is not a multiple of the itemsize (" +
                               std::to_string(itemsize) + ")"));
    }
  }
  Ints out(1);
  strides_from_bytes(Ints{36}, 12, out);
  EXPECT_EQ(out[0], 3) << "a 12-byte struct";
}

// The overflow rules, against a 128-bit model, on extents and strides large
// enough to overflow about half the time.
TEST(StridedLayoutTest, ArithmeticBeyond64BitsIsRefusedExactly) {
  std::mt19937_64 rng(17);
  int refused[5] = {};
  for (int c = 0; c < 20000; ++c) {
    const std::size_t n = rng() % 4 + 1;
    Ints shape(n), strides(n);
    for (auto& e : shape) e = rng() % 8 == 0 ? 0 : static_cast<std::int64_t>(rng() >> (rng() % 62 + 2)) + 1;
    for (auto& s : strides) {
      s = static_cast<std::int64_t>(rng() >> (rng() % 63 + 1));
      if (rng() % 2) s = -s;
    }
    const std::int64_t itemsize = std::int64_t(1) << (rng() % 5);
    // The model: the non-zero extents' product (and its bytes); the sums of
    // the positive and of the negative reaches; one past the last in bytes.
    wide product = 1, pos = 0, neg = 0;
    bool product_fits = true;
    for (auto e : shape)
      if (e != 0) product_fits = product_fits && fits(product *= e);
    const bool empty = std::count(shape.begin(), shape.end(), 0) > 0;
    for (std::size_t i = 0; i < n; ++i) {
      const wide reach = wide(shape[i] - 1) * strides[i];
      (reach < 0 ? neg : pos) += reach;
      if (!fits(pos) || !fits(neg)) break;  // stays outside: a sum of one sign only grows
    }
    const bool reach_fits = empty || (fits(pos) && fits(neg));

    const std::string v = overflow_message([&] { volume(shape); });
    ASSERT_EQ(contains(v, "element count overflows 64 bits"), !product_fits) << describe(shape, strides);
    if (product_fits) {
      ASSERT_EQ(volume(shape), empty ? 0 : static_cast<std::int64_t>(product));
      const bool bytes_fit = fits(product * itemsize);
      ASSERT_EQ(contains(overflow_message([&] { size_in_bytes(shape, itemsize); }), "size in bytes overflows"),
                !bytes_fit);
      refused[0] += !bytes_fit;
    }
    refused[1] += !product_fits;
    const std::string r = overflow_message([&] { offset_bounds(shape, strides); });
    ASSERT_EQ(contains(r, "the strides reach beyond 64 bits (stride "), !reach_fits) << describe(shape, strides) << r;
    refused[2] += !reach_fits;
    if (reach_fits && !empty) {
      ASSERT_EQ(offset_bounds(shape, strides),
                (OffsetBounds{static_cast<std::int64_t>(neg), static_cast<std::int64_t>(pos)}));
      const bool bytes_fit = fits(neg * itemsize) && fits((pos + 1) * itemsize);
      ASSERT_EQ(contains(overflow_message([&] { byte_bounds(shape, strides, itemsize); }), "beyond 64 bits in bytes"),
                !bytes_fit);
      refused[3] += !bytes_fit;
      if (neg == 0 && pos + 1 <= kMax) {
        const bool size_fits = fits((pos + 1) * itemsize);
        ASSERT_EQ(contains(overflow_message([&] { required_size_in_bytes(shape, strides, itemsize); }), "overflows"),
                  !size_fits);
        if (size_fits) {
          ASSERT_EQ(required_size_in_bytes(shape, strides, itemsize), static_cast<std::int64_t>((pos + 1) * itemsize));
        }
      }
    }
    // Strides in bytes, and dense strides (each must fit; the volume need not).
    Ints out(n);
    bool bytes_fit = true;
    for (auto s : strides) bytes_fit = bytes_fit && fits(wide(s) * itemsize);
    ASSERT_EQ(contains(overflow_message([&] { strides_to_bytes(strides, itemsize, out); }), "overflows 64 bits"),
              !bytes_fit);
    bool dense_fit = true;
    wide step = 1;
    for (std::size_t k = n; k-- > 1;) dense_fit = dense_fit && fits(step *= shape[k]);
    ASSERT_EQ(contains(overflow_message([&] { dense_strides(shape, LayoutOrder::c, out); }), "dense strides overflow"),
              !dense_fit)
        << describe(shape, strides);
    refused[4] += !dense_fit;
  }
  for (int k : refused) EXPECT_GT(k, 200) << "each rule refuses some of the cases";
  // One past the highest offset must fit too.
  EXPECT_TRUE(contains(overflow_message([] { required_span(Ints{2}, Ints{INT64_MAX}); }), "span overflows"));
  EXPECT_EQ(volume(Ints{0, INT64_MAX}), 0);
  EXPECT_TRUE(contains(overflow_message([] {
                         volume(Ints{0, INT64_MAX, 2});
                       }),
                       "element count overflows"))
      << "even when empty: its dense strides multiply the other extents";
}

TEST(StridedLayoutTest, BadValuesAreRefusedNamingThem) {
  EXPECT_EQ(invalid_message([] { check_extents(Ints{4, -2, 3}); }), "extent 1 is negative (-2)");
  EXPECT_NO_THROW(check_extents(Ints{0, 1, INT64_MAX}));
  for (std::int64_t bad : Ints{0, 3, 6, -4, INT64_MAX})
    EXPECT_EQ(invalid_message([=] { check_itemsize(bad); }),
              "itemsize must be a power of two, got " + std::to_string(bad));
  for (std::int64_t good : Ints{1, 2, 16, std::int64_t(1) << 62}) EXPECT_NO_THROW(check_itemsize(good));
  EXPECT_EQ(invalid_message([] { check_strides_rank(3, 2); }), "strides has 2 entries for a shape of 3");
  EXPECT_EQ(invalid_message([] { check_strides_rank(2, 0); }), "strides has 0 entries for a shape of 2");
  EXPECT_NO_THROW(check_strides_rank(0, 0));

  // Permutations: the length, the range (negative axes from the end) and each axis once.
  const Ints shape = {2, 3, 4};
  EXPECT_TRUE(contains(invalid_message([&] {
                         dense_strides(shape, Ints{0, 1});
                       }),
                       "stride order has 2 axes for a shape of 3"));
  EXPECT_TRUE(contains(invalid_message([&] {
                         dense_strides(shape, Ints{0, 1, 3});
                       }),
                       "axis 3, out of range for 3 dimensions"));
  EXPECT_TRUE(contains(invalid_message([&] { dense_strides(shape, Ints{0, 1, -4}); }), "axis -4, out of range"));
  EXPECT_TRUE(contains(invalid_message([&] { dense_strides(shape, Ints{0, 2, -1}); }), "names axis 2 twice"));
  EXPECT_EQ(dense_strides(shape, Ints{-3, -2, -1}), dense_strides(shape));

  // Every function that reads a shape checks it, and its strides' rank.
  const Ints neg = {2, -1}, st1 = {1};
  const std::vector<std::function<void()>> reads = {
      [&] { volume(neg); },
      [&] { size_in_bytes(neg, 4); },
      [&] { dense_strides(neg); },
      [&] { is_contiguous_c(neg, {}); },
      [&] { is_contiguous_f(neg, {}); },
      [&] { is_contiguous_any(neg, {}); },
      [&] { has_dense_c_strides(neg, {}); },
      [&] { offset_bounds(neg, {}); },
      [&] { required_span(neg, {}); },
  };
  for (const auto& f : reads) EXPECT_EQ(invalid_message(f), "extent 1 is negative (-1)");
  EXPECT_EQ(invalid_message([&] { is_contiguous_any(shape, st1); }), "strides has 1 entries for a shape of 3");
  EXPECT_EQ(invalid_message([&] { offset_bounds(shape, st1); }), "strides has 1 entries for a shape of 3");
  Ints out(2);
  EXPECT_TRUE(contains(invalid_message([&] { dense_strides(shape, LayoutOrder::c, out); }), "output has 2 entries"));
  EXPECT_TRUE(contains(invalid_message([] { size_in_bytes(Ints{2}, 0); }), "itemsize must be positive, got 0"));
}

// StridedMemoryView computes through the layout: its dense strides, its
// size, its span and its contiguity are these functions' answers.
TEST(StridedLayoutTest, ViewsUseTheLayout) {
  std::mt19937 rng(18);
  std::vector<float> data(4096);
  for (int c = 0; c < 1000; ++c) {
    const Layout l = random_layout(rng);
    const StridedMemoryView v(data.data() + 2048, l.shape, l.strides, DataType::of<float>(), {dlpack::kDLCPU, 0});
    const Ints strides = l.strides.empty() ? dense_strides(l.shape) : l.strides;
    ASSERT_TRUE(std::equal(v.strides().begin(), v.strides().end(), strides.begin(), strides.end()));
    ASSERT_EQ(v.size(), count_of(l.shape));
    ASSERT_EQ(v.is_contiguous_c(), counts_up(l.shape, strides, identity(l.shape.size())));
    const Bounds bf = bounds_of(l.shape, strides);
    if (bf.min >= 0) {
      ASSERT_EQ(v.span_bytes(), static_cast<std::size_t>((bf.max + 1) * 4));
    } else {
      ASSERT_TRUE(
          contains(invalid_message([&] { (void)v.span_bytes(); }), "StridedMemoryView: span_bytes: negative strides"));
    }
  }
}
