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

// ---- slicing and repacking ---------------------------------------------------------------
namespace {

// The indices start:stop:step selects from 0..n-1, written from the rule
// Python documents (ends past the axis clamp to it, negative ends count from
// the end, open ends are the axis' ends in the step's direction), walking the
// indices one by one.
Ints selected(std::int64_t n, const AxisSlice& s) {
  const bool up = s.step > 0;
  // The open ends (INT64_MIN, INT64_MAX) clamp to the axis' ends like any far end.
  const auto end = [&](std::int64_t v) {
    if (v < 0) v += n;
    return up ? std::clamp<std::int64_t>(v, 0, n) : std::clamp<std::int64_t>(v, -1, n - 1);
  };
  const std::int64_t from = end(s.start), to = end(s.stop);
  Ints out;
  for (std::int64_t x = from; up ? x < to : x > to; x += s.step) out.push_back(x);
  return out;
}

AxisSlice random_slice(std::mt19937& rng, std::int64_t n) {
  std::uniform_int_distribution<int> pick(0, 9), end(-6, 6), step(-3, 3);
  if (pick(rng) < 3) return AxisSlice::index(std::uniform_int_distribution<std::int64_t>(-n - 1, n)(rng));
  std::int64_t st = 0;
  while (st == 0) st = step(rng);
  AxisSlice s = AxisSlice::all(st);
  if (pick(rng) < 6) s.start = end(rng);
  if (pick(rng) < 6) s.stop = end(rng);
  return s;
}

}  // namespace

TEST(StridedLayoutTest, SlicingSelectsWhatPythonSlicingSelects) {
  std::mt19937 rng(21);
  int indexed = 0, empty = 0, moved = 0;
  for (int c = 0; c < kCases; ++c) {
    const Layout l = random_layout(rng);
    const std::int64_t offset = std::uniform_int_distribution<std::int64_t>(0, 5)(rng);
    const Ints full = l.strides.empty() ? dense_strides(l.shape) : l.strides;
    std::vector<AxisSlice> slices;
    const auto count = std::uniform_int_distribution<std::size_t>(0, l.shape.size())(rng);
    for (std::size_t i = 0; i < count; ++i) slices.push_back(random_slice(rng, l.shape[i]));
    // The indices each original axis runs over; an index keeps one and drops the axis.
    std::vector<Ints> picks;
    Ints kept;  // the original axis of each result axis
    bool bad = false;
    for (std::size_t i = 0; i < l.shape.size(); ++i) {
      const std::int64_t n = l.shape[i];
      if (i >= slices.size()) {
        picks.push_back(Ints(static_cast<std::size_t>(n)));
        std::iota(picks.back().begin(), picks.back().end(), 0);
        kept.push_back(static_cast<std::int64_t>(i));
      } else if (slices[i].is_index) {
        const std::int64_t x = slices[i].start;
        bad = bad || x < -n || x >= n;
        picks.push_back({x < 0 ? x + n : x});
      } else {
        picks.push_back(selected(n, slices[i]));
        kept.push_back(static_cast<std::int64_t>(i));
      }
    }
    if (bad) {
      ++indexed;
      ASSERT_TRUE(contains(invalid_message([&] { sliced(l.shape, l.strides, offset, slices); }), "Invalid index: "));
      continue;
    }
    const OffsetStrided got = sliced(l.shape, l.strides, offset, slices);
    ASSERT_EQ(got.layout.shape.size(), kept.size());
    bool any_empty = false;
    for (std::size_t k = 0; k < kept.size(); ++k) {
      ASSERT_EQ(got.layout.shape[k], static_cast<std::int64_t>(picks[static_cast<std::size_t>(kept[k])].size()));
      any_empty = any_empty || got.layout.shape[k] == 0;
    }
    if (any_empty) {
      // A slice that selects nothing zeroes every stride (cuda.core's); an
      // axis already empty and not sliced keeps the given strides.
      bool by_slice = l.strides.empty();
      for (std::size_t i = 0; i < slices.size(); ++i) by_slice = by_slice || (!slices[i].is_index && picks[i].empty());
      empty += by_slice;
      if (by_slice) {
        ASSERT_EQ(got.layout.strides, Ints(kept.size(), 0)) << describe(l.shape, l.strides);
      }
      continue;
    }
    // Element by element: each result index lands where its original index does.
    moved += got.offset != offset;
    for_each_index(got.layout.shape, identity(kept.size()), [&](const Ints& idx) {
      Ints orig(l.shape.size());
      std::size_t k = 0;
      for (std::size_t i = 0; i < l.shape.size(); ++i)
        orig[i] = i < slices.size() && slices[i].is_index ? picks[i][0] : picks[i][static_cast<std::size_t>(idx[k++])];
      ASSERT_EQ(got.offset + offset_of(got.layout.shape, got.layout.strides, idx),
                offset + offset_of(l.shape, full, orig))
          << describe(l.shape, l.strides);
    });
    if (count == 0) {
      ASSERT_EQ(got, (OffsetStrided{{l.shape, full}, offset}));
    }
  }
  EXPECT_GT(indexed, 30);
  EXPECT_GT(empty, 30);
  EXPECT_GT(moved, 200);
}

TEST(StridedLayoutTest, SliceEndsClampAsPythons) {
  struct Case {
    std::int64_t extent, start, stop, step, first, count;
  };
  constexpr std::int64_t lo = AxisSlice::kOpenLow, hi = AxisSlice::kOpenHigh;
  // list(range(n))[start:stop:step] in Python: its first element and its length.
  for (const Case& k : {Case{5, hi, lo, -1, 4, 5}, Case{5, 10, -10, -2, 4, 3}, Case{5, -10, 10, 1, 0, 5},
                        Case{5, 3, 1, 1, 3, 0}, Case{5, -2, hi, 1, 3, 2}, Case{5, 1, -1, 2, 1, 2},
                        Case{0, 0, hi, 1, 0, 0}, Case{7, 6, 0, -3, 6, 2}, Case{3, lo, hi, INT64_MAX, 0, 1},
                        Case{3, hi, lo, INT64_MIN, 2, 1}}) {
    std::int64_t start = k.start, stop = k.stop;
    EXPECT_EQ(adjust_slice(k.extent, start, stop, k.step), k.count) << k.extent << " " << k.start << ":" << k.stop;
    if (k.count > 0) {
      EXPECT_EQ(start, k.first);
    }
  }
  std::int64_t a = 0, b = 3;
  EXPECT_EQ(invalid_message([&] { adjust_slice(3, a, b, 0); }), "slice step cannot be zero");
  EXPECT_EQ(invalid_message([] { sliced(Ints{2, 3}, {}, 0, std::vector<AxisSlice>(3, AxisSlice::all())); }),
            "The number of slices (3) is greater than the number of dimensions (2).");
  EXPECT_EQ(invalid_message([] { sliced(Ints{2, 3}, {}, 0, std::vector<AxisSlice>{AxisSlice::all(), AxisSlice::index(-4)}); }),
            "Invalid index: -4 out of range for axis 1 with extent 3");
  // A range that selects nothing moves no offset (its start may lie past the axis).
  EXPECT_EQ(sliced(Ints{4, 3}, {}, 2, std::vector<AxisSlice>{AxisSlice::range(1, 3), AxisSlice::range(5, 7)}),
            (OffsetStrided{{{2, 0}, {0, 0}}, 5}));
  EXPECT_EQ(sliced(Ints{4}, Ints{3}, 0, std::vector<AxisSlice>{AxisSlice::range(5, AxisSlice::kOpenHigh)}),
            (OffsetStrided{{{0}, {0}}, 0}));
  // cuda.core's example: dropping the last column leaves a gap, not contiguous.
  const OffsetStrided gap = sliced(Ints{5, 3, 7}, {}, 0,
                                   std::vector<AxisSlice>{AxisSlice::all(), AxisSlice::all(), AxisSlice::range(0, -1)});
  EXPECT_EQ(gap.layout, (Strided{{5, 3, 6}, {21, 7, 1}}));
  EXPECT_FALSE(is_contiguous_any(gap.layout.shape, gap.layout.strides));
  // Reversed: the offset moves to the last element; the bounds stay the memory's.
  const OffsetStrided rev = sliced(Ints{4}, {}, 0, std::vector<AxisSlice>{AxisSlice::all(-1)});
  EXPECT_EQ(rev, (OffsetStrided{{{4}, {-1}}, 3}));
  EXPECT_EQ(offset_bounds(rev.layout.shape, rev.layout.strides, rev.offset), (OffsetBounds{0, 3}));
  EXPECT_EQ(required_size_in_bytes(rev.layout.shape, rev.layout.strides, 4, rev.offset), 16);
  EXPECT_TRUE(contains(invalid_message([&] { required_span(rev.layout.shape, rev.layout.strides, 2); }),
                       "negative strides reach offset -1"));
  EXPECT_TRUE(contains(overflow_message([] { sliced(Ints{2}, Ints{INT64_MAX / 2 + 1}, 0,
                                                    std::vector<AxisSlice>{AxisSlice::all(2)}); }),
                       "times the step"));
  EXPECT_TRUE(contains(overflow_message([] { sliced(Ints{3}, Ints{INT64_MAX / 2 + 1}, 0,
                                                    std::vector<AxisSlice>{AxisSlice::index(2)}); }),
                       "slice offset overflows"));
  EXPECT_TRUE(contains(overflow_message([] { offset_in_bytes(INT64_MAX / 4 + 1, 4); }), "slice offset"));
}

namespace {
// The bytes of every element, the axes of `axes` counting with its last
// fastest: what a repacked layout must cover in the same order.
std::vector<wide> bytes_in_order(const Ints& shape, const Ints& strides, std::int64_t offset, std::int64_t itemsize,
                                 const Ints& axes) {
  std::vector<wide> out;
  for_each_index(shape, axes, [&](const Ints& idx) {
    const wide first = (offset + offset_of(shape, strides, idx)) * itemsize;
    for (std::int64_t b = 0; b < itemsize; ++b) out.push_back(first + b);
  });
  return out;
}
}  // namespace

TEST(StridedLayoutTest, RepackingCoversTheSameBytesInTheSameOrder) {
  std::mt19937 rng(22);
  int packed = 0, unpacked = 0, refused = 0;
  for (int c = 0; c < kCases; ++c) {
    Layout l = random_layout(rng);
    if (l.shape.empty()) continue;
    const std::size_t n = l.shape.size();
    const auto axis = std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
    Ints full = l.strides.empty() ? dense_strides(l.shape) : l.strides;
    if (rng() % 4 != 0) {  // mostly a stride-1 axis, with the others scaled to allow packing
      const std::int64_t scale = std::int64_t(1) << (rng() % 3);
      for (std::size_t i = 0; i < n; ++i) full[i] = i == axis ? 1 : full[i] * scale;
      l.shape[axis] *= scale;
    }
    const std::int64_t itemsize = std::int64_t(1) << (rng() % 4), new_itemsize = std::int64_t(1) << (rng() % 5);
    const std::int64_t offset = std::uniform_int_distribution<std::int64_t>(0, 2)(rng) * (rng() % 2 ? 4 : 1);
    const std::int64_t data_ptr = rng() % 4 == 0 ? 4 : 0;
    const bool keep = rng() % 2;
    const std::int64_t factor = new_itemsize > itemsize ? new_itemsize / itemsize : itemsize / new_itemsize;
    const bool pack = new_itemsize > itemsize;
    bool ok = full[axis] == 1 && l.shape[axis] != 0;
    if (pack) {
      ok = ok && data_ptr % new_itemsize == 0 && l.shape[axis] % factor == 0 && offset % factor == 0;
      for (std::size_t i = 0; i < n; ++i) ok = ok && (i == axis || full[i] % factor == 0);
    }
    if (new_itemsize == itemsize) ok = true;
    const auto call = [&] {
      return repacked(l.shape, full, offset, itemsize, new_itemsize, data_ptr, static_cast<std::int64_t>(axis), keep);
    };
    if (!ok) {
      ++refused;
      ASSERT_FALSE(invalid_message(call).empty()) << describe(l.shape, full);
      continue;
    }
    const Repacked r = call();
    ASSERT_EQ(r.itemsize, new_itemsize);
    packed += pack;
    unpacked += new_itemsize < itemsize;
    // The packed axis innermost: each new item spans consecutive old ones along it.
    Ints axes;
    for (std::size_t i = 0; i < n; ++i)
      if (i != axis) axes.push_back(static_cast<std::int64_t>(i));
    const Ints old_axes = [&] { Ints a = axes; a.push_back(static_cast<std::int64_t>(axis)); return a; }();
    const bool dropped = r.layout.layout.shape.size() < n;
    ASSERT_EQ(dropped, pack && !keep && l.shape[axis] == factor);
    Ints new_axes;
    for (std::size_t i = 0; i < r.layout.layout.shape.size(); ++i)
      if (dropped || i != axis) new_axes.push_back(static_cast<std::int64_t>(i));
    if (!dropped) new_axes.push_back(static_cast<std::int64_t>(axis));
    ASSERT_EQ(bytes_in_order(r.layout.layout.shape, r.layout.layout.strides, r.layout.offset, r.itemsize, new_axes),
              bytes_in_order(l.shape, full, offset, itemsize, old_axes))
        << describe(l.shape, full) << " " << itemsize << " -> " << new_itemsize;
  }
  EXPECT_GT(packed, 100);
  EXPECT_GT(unpacked, 100);
  EXPECT_GT(refused, 100);
}

TEST(StridedLayoutTest, RepackingRefusalsNameTheValue) {
  const Ints shape = {5, 4};
  // cuda.core's example: (5, 4) of 4 bytes as 2, 8 and 16.
  EXPECT_EQ(repacked(shape, {}, 0, 4, 2).layout, (OffsetStrided{{{5, 8}, {8, 1}}, 0}));
  EXPECT_EQ(repacked(shape, {}, 0, 4, 8).layout, (OffsetStrided{{{5, 2}, {2, 1}}, 0}));
  EXPECT_EQ(repacked(shape, {}, 0, 4, 16).layout, (OffsetStrided{{{5, 1}, {1, 1}}, 0}));
  EXPECT_EQ(repacked(shape, {}, 0, 4, 16, 0, -1, false).layout, (OffsetStrided{{{5}, {1}}, 0}));
  EXPECT_EQ(repacked(shape, {}, 6, 4, 1).layout.offset, 24);
  const auto msg = [&](Ints st, std::int64_t off, std::int64_t to, std::int64_t ptr, std::int64_t axis) {
    return invalid_message([&] { repacked(shape, st, off, 4, to, ptr, axis); });
  };
  EXPECT_EQ(msg({}, 0, 16, 8, -1), "The data pointer (8) must be aligned to the packed itemsize (16).");
  EXPECT_EQ(msg({1, 5}, 0, 8, 0, -1), "The axis 1 stride must be 1, got 5.");
  EXPECT_EQ(msg({}, 0, 32, 0, -1), "The axis 1 extent (4) must be divisible by 8.");
  EXPECT_EQ(msg({}, 3, 8, 0, -1), "The slice offset (3) must be divisible by 2.");
  EXPECT_EQ(msg({5, 1}, 0, 8, 0, -1), "The 0 axis stride (5) must be divisible by 2.");
  EXPECT_EQ(msg({}, 0, 8, 0, 2), "Invalid axis: 2 out of range for 2D tensor");
  EXPECT_EQ(msg({}, 0, 12, 0, -1), "the new itemsize must be a power of two, got 12");
  EXPECT_EQ(invalid_message([] { repacked(Ints{3, 0}, {}, 0, 4, 2); }), "The axis 1 stride must be 1, got 0.");
  EXPECT_EQ(invalid_message([] { repacked(Ints{3, 0}, Ints{1, 1}, 0, 4, 2); }),
            "The axis 1 extent must be non-zero, got 0.");
  EXPECT_EQ(invalid_message([] { repacked(Ints{}, {}, 0, 4, 2); }), "Invalid axis: -1 out of range for 0D tensor");
  // Unpacking needs no alignment and scales the other strides and the offset.
  EXPECT_EQ(repacked(Ints{3, 2}, Ints{-6, 1}, 9, 8, 2, 4).layout, (OffsetStrided{{{3, 8}, {-24, 1}}, 36}));
  EXPECT_TRUE(contains(overflow_message([] { repacked(Ints{2, 2}, Ints{INT64_MAX / 2, 1}, 0, 16, 1); }),
                       "overflow"));
}

TEST(StridedLayoutTest, MaxCompatibleItemsizeIsTheLargestRepackingThatWorks) {
  std::mt19937 rng(23);
  int above = 0;
  for (int c = 0; c < kCases; ++c) {
    Layout l = random_layout(rng);
    if (l.shape.empty()) continue;
    Ints full = l.strides.empty() ? dense_strides(l.shape) : l.strides;
    const std::size_t axis = l.shape.size() - 1;
    if (rng() % 3 != 0) full[axis] = 1;
    for (std::size_t i = 0; i < axis; ++i) full[i] *= std::int64_t(1) << (rng() % 4);
    const std::int64_t itemsize = std::int64_t(1) << (rng() % 3), most = std::int64_t(1) << (rng() % 3 + 2);
    if (most < itemsize) continue;
    const std::int64_t offset = std::uniform_int_distribution<std::int64_t>(0, 8)(rng);
    const std::int64_t ptr = std::int64_t(rng() % 5) * 4 * itemsize;
    const std::int64_t best = max_compatible_itemsize(l.shape, full, offset, itemsize, most, ptr);
    if (full[axis] != 1 || l.shape[axis] == 0) {
      ASSERT_EQ(best, itemsize);
      continue;
    }
    // The largest power of two up to `most` that repacked takes.
    std::int64_t expect = itemsize;
    for (std::int64_t p = itemsize * 2; p <= most; p *= 2) {
      bool ok = true;
      try {
        repacked(l.shape, full, offset, itemsize, p, ptr);
      } catch (const std::invalid_argument&) {
        ok = false;
      }
      if (ok) expect = p;
      else break;
    }
    above += expect > itemsize;
    ASSERT_EQ(best, expect) << describe(l.shape, full) << " offset " << offset << " ptr " << ptr;
  }
  EXPECT_GT(above, 200);
  // A pointer misaligned for the itemsize itself: the gcd goes below it (unpacking works).
  EXPECT_EQ(max_compatible_itemsize(Ints{8}, {}, 0, 4, 16, 2), 2);
  EXPECT_EQ(max_compatible_itemsize(Ints{8}, {}, 0, 4), 16);
  EXPECT_EQ(max_compatible_itemsize(Ints{8}, {}, 1, 4), 4);
  EXPECT_EQ(invalid_message([] { max_compatible_itemsize(Ints{8}, {}, 0, 8, 4); }),
            "max_itemsize (4) cannot be less than itemsize (8).");
  EXPECT_EQ(invalid_message([] { max_compatible_itemsize(Ints{8}, {}, 0, 8, 16, 0, 1); }),
            "Invalid axis: 1 out of range for 1D tensor");
  EXPECT_EQ(invalid_message([] { max_compatible_itemsize(Ints{}, {}, 0, 8); }),
            "Invalid axis: -1 out of range for 0D tensor");
}

TEST(StridedLayoutTest, TransformationsAsCudaCoreDocumentsThem) {
  // reshaped: cuda.core's examples, its strides for new extents of 1, and
  // NumPy's reshape through an extent of 1 whose stride breaks a run.
  EXPECT_EQ(reshaped(Ints{5, 3, 4}, {}, Ints{20, 3}), (Strided{{20, 3}, {3, 1}}));
  EXPECT_EQ(reshaped(Ints{5, 3, 4}, {}, Ints{4, -1}), (Strided{{4, 15}, {15, 1}}));
  const Strided p = permuted(Ints{5, 3, 4}, {}, Ints{2, 0, 1});
  EXPECT_EQ(reshaped(p.shape, p.strides, Ints{4, 15}), (Strided{{4, 15}, {1, 4}}));
  EXPECT_EQ(invalid_message([&] { reshaped(p.shape, p.strides, Ints{20, 3}); }),
            "Layout strides are incompatible with the new shape");
  EXPECT_EQ(reshaped(Ints{1, 1}, Ints{5, 7}, Ints{1, 1, 1}), (Strided{{1, 1, 1}, {7, 7, 7}}));
  EXPECT_EQ(reshaped(Ints{2, 1, 3}, Ints{3, 7, 1}, Ints{6}), (Strided{{6}, {1}}));
  EXPECT_EQ(reshaped(Ints{2, 1, 3}, Ints{3, 7, 1}, Ints{2, 3}), (Strided{{2, 3}, {3, 1}}));
  // flattened: cuda.core's examples, the masks combined.
  EXPECT_EQ(flattened(Ints{3, 2}, Ints{2, 1}, ~std::uint64_t{0}), (Strided{{6}, {1}}));
  EXPECT_EQ(flattened(Ints{3, 2}, Ints{1, 3}, ~std::uint64_t{0}), (Strided{{3, 2}, {1, 3}}));
  const Ints s2 = {1, 12, 4};
  const std::uint64_t mask = flattened_axis_mask(Ints{4, 5, 3}, {}) & flattened_axis_mask(Ints{4, 5, 3}, s2);
  EXPECT_EQ(flattened(Ints{4, 5, 3}, {}, mask), (Strided{{4, 15}, {15, 1}}));
  EXPECT_EQ(flattened(Ints{4, 5, 3}, s2, mask), (Strided{{4, 15}, {1, 4}}));
  // An empty C-contiguous layout's strides are all 0, as cuda.core spells them.
  EXPECT_EQ(permuted(Ints{0, 3}, {}, Ints{1, 0}), (Strided{{3, 0}, {0, 0}}));
  EXPECT_EQ(squeezed(Ints{2, 0, 1}, {}), (Strided{{0}, {0}}));
}
