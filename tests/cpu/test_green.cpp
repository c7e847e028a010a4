// Green contexts and device resources against the fake driver: request
// validation, the rounding that never makes fewer groups than asked, error
// texts, old drivers, the ownership of green contexts (every destruction
// order), foreign green streams, workqueue configurations.
//
// The fake GPU is H200-like: 132 SMs reported with minSmPartitionSize 8 and
// smCoscheduledAlignment 2; the driver makes groups of multiples of 8 SMs from
// 8 GPCs of 16 usable SMs each (a group of more than 16 SMs takes whole GPCs),
// so [72] fits once (cuda.core's single group for [66, 66]) and [64, 64] twice.
#include <cucore/context.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/event.hpp>
#include <cucore/log.hpp>
#include <cucore/resources.hpp>
#include <cucore/stream.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/fake_driver.hpp"
#include "green/resource_state.hpp"

using namespace cucore;
using cucore::test::FakeDriver;

namespace {

// The installed table, for the green half's entries that call the base ones.
const cucore::detail::DriverTable* table_in_use() { return cucore::detail::g_driver.load(); }

// ---- the fake's green-context half ----------------------------------------------------------

struct Green {
  static inline unsigned gpcs = 8, sms_per_gpc = 16, limit_groups = ~0u;
  static inline std::uint64_t next_split = 0;
  static inline std::map<CUdevResourceDesc, std::vector<CUdevResource>> descs;
  static inline std::map<CUgreenCtx, unsigned> live;  // green context -> its SMs
  static inline std::map<CUstream, CUgreenCtx> stream_ctx;
  static inline std::map<CUevent, CUcontext> event_ctx;
  static inline std::vector<std::string> violations;
  static inline int created = 0, destroyed = 0, green_streams = 0, splits = 0;
  static inline PFN_cuStreamDestroy_v4000 base_stream_destroy = nullptr;
  static inline PFN_cuEventCreate_v2000 base_event_create = nullptr;
  static inline PFN_cuEventDestroy_v4000 base_event_destroy = nullptr;

  static std::uint64_t split_of(const CUdevResource& r) {
    std::uint64_t id;
    std::memcpy(&id, r._internal_padding, sizeof id);
    return id;
  }
  static CUdevResource sm(unsigned count, unsigned alignment, std::uint64_t split) {
    CUdevResource r{};
    r.type = CU_DEV_RESOURCE_TYPE_SM;
    r.sm.smCount = count;
    r.sm.minSmPartitionSize = 8;
    r.sm.smCoscheduledAlignment = alignment;
    std::memcpy(r._internal_padding, &split, sizeof split);
    return r;
  }
  // A resource type as the int it is: CUDA 13.1's 1000 (workqueue configurations)
  // is no value of 13.0's CUdevResourceType, so it is never loaded as one.
  static int type_of(const CUdevResourceType& t) {
    int v;
    std::memcpy(&v, &t, sizeof v);
    return v;
  }
  static CUcontext ctx_of(CUgreenCtx g) { return reinterpret_cast<CUcontext>(reinterpret_cast<std::uintptr_t>(g) + 1); }
  // How many groups of `size` SMs fit in `total` (whole 8-SM units, GPCs of sms_per_gpc).
  static unsigned fit(unsigned size, unsigned total) {
    unsigned usable_gpcs = std::min(gpcs, total / sms_per_gpc);
    unsigned n = size <= sms_per_gpc ? usable_gpcs * (sms_per_gpc / size) + (total % sms_per_gpc) / size
                                     : usable_gpcs / ((size + sms_per_gpc - 1) / sms_per_gpc);
    return std::min(n, limit_groups);
  }

  static void reset() {
    gpcs = 8;
    sms_per_gpc = 16;
    limit_groups = ~0u;
    for (auto& [d, r] : descs) std::free(d);
    descs.clear();
    for (auto& [g, n] : live) std::free(g);
    live.clear();
    stream_ctx.clear();
    event_ctx.clear();
    violations.clear();
    created = destroyed = green_streams = splits = 0;
  }

  static void install(FakeDriver& fake) {
    reset();
    auto& t = fake.table;
    t.cuDeviceGetDevResource = [](CUdevice, CUdevResource* r, CUdevResourceType type) {
      const int kind = type_of(type);
      if (kind == CU_DEV_RESOURCE_TYPE_SM) {
        *r = sm(132, 2, 0);
        return CUDA_SUCCESS;
      }
      if (kind == 1000 && cucore::detail::g_driver.load()->version >= 13010) {
        *r = CUdevResource{};
        std::memcpy(&r->type, &kind, sizeof kind);
        const int wq[3] = {0, 32, 0};  // device 0, 32 connections, device_ctx
        std::memcpy(reinterpret_cast<unsigned char*>(r) + 96, wq, sizeof wq);
        return CUDA_SUCCESS;
      }
      return CUDA_ERROR_INVALID_RESOURCE_TYPE;
    };
    t.cuDevSmResourceSplitByCount = [](CUdevResource* result, unsigned* nb, const CUdevResource* in,
                                       CUdevResource* rest, unsigned flags, unsigned min_count) {
      ++splits;
      if (type_of(in->type) != CU_DEV_RESOURCE_TYPE_SM || flags != 0) return CUDA_ERROR_INVALID_VALUE;
      if (split_of(*in) != 0) return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;  // outputs are not split again
      const unsigned total = in->sm.smCount;
      if (min_count > total) return CUDA_ERROR_INVALID_VALUE;
      const unsigned size = std::max(8u, (min_count + 7) / 8 * 8);
      const unsigned n_max = size <= total ? fit(size, total) : 0;
      if (!result) {
        *nb = n_max;
        return CUDA_SUCCESS;
      }
      const unsigned n = std::min(*nb, n_max);
      const std::uint64_t id = ++next_split;
      for (unsigned i = 0; i < n; ++i) result[i] = sm(size, 8, id);
      *nb = n;
      if (rest) *rest = sm(total - n * size, 2, id);
      return CUDA_SUCCESS;
    };
    t.cuDevResourceGenerateDesc = [](CUdevResourceDesc* desc, CUdevResource* resources, unsigned n) {
      std::set<std::uint64_t> splits_seen;
      for (unsigned i = 0; i < n; ++i)
        if (type_of(resources[i].type) == CU_DEV_RESOURCE_TYPE_SM) splits_seen.insert(split_of(resources[i]));
      if (splits_seen.size() > 1) return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
      *desc = static_cast<CUdevResourceDesc>(std::malloc(8));
      descs[*desc].assign(resources, resources + n);
      return CUDA_SUCCESS;
    };
    t.cuGreenCtxCreate = [](CUgreenCtx* g, CUdevResourceDesc desc, CUdevice, unsigned flags) {
      if (!(flags & CU_GREEN_CTX_DEFAULT_STREAM) || !descs.count(desc)) return CUDA_ERROR_INVALID_VALUE;
      unsigned sms = 0;
      for (const auto& r : descs[desc])
        if (type_of(r.type) == CU_DEV_RESOURCE_TYPE_SM) sms += r.sm.smCount;
      *g = static_cast<CUgreenCtx>(std::malloc(16));
      live[*g] = sms;
      ++created;
      return CUDA_SUCCESS;
    };
    t.cuGreenCtxDestroy = [](CUgreenCtx g) {
      if (!live.erase(g)) {
        violations.push_back("cuGreenCtxDestroy of a green context that is not alive");
        return CUDA_ERROR_INVALID_CONTEXT;
      }
      for (auto& [s, owner] : stream_ctx)
        if (owner == g) violations.push_back("green context destroyed before its stream");
      for (auto& [e, ctx] : event_ctx)
        if (ctx == ctx_of(g)) violations.push_back("green context destroyed before its event");
      std::free(g);
      ++destroyed;
      return CUDA_SUCCESS;
    };
    t.cuCtxFromGreenCtx = [](CUcontext* c, CUgreenCtx g) {
      if (!live.count(g)) return CUDA_ERROR_INVALID_CONTEXT;
      *c = ctx_of(g);
      return CUDA_SUCCESS;
    };
    t.cuGreenCtxGetDevResource = [](CUgreenCtx g, CUdevResource* r, CUdevResourceType type) {
      if (!live.count(g)) return CUDA_ERROR_INVALID_CONTEXT;
      if (type_of(type) != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
      *r = sm(live[g], 8, 0);
      return CUDA_SUCCESS;
    };
    t.cuGreenCtxStreamCreate = [](CUstream* s, CUgreenCtx g, unsigned flags, int) {
      if (!(flags & CU_STREAM_NON_BLOCKING) || !live.count(g)) return CUDA_ERROR_INVALID_VALUE;
      CUresult r = table_in_use()->cuStreamCreate(s, flags);
      stream_ctx[*s] = g;
      ++green_streams;
      return r;
    };
    base_stream_destroy = t.cuStreamDestroy;
    t.cuStreamDestroy = [](CUstream s) {
      auto it = stream_ctx.find(s);
      if (it != stream_ctx.end()) {
        if (!live.count(it->second)) violations.push_back("stream destroyed after its green context");
        stream_ctx.erase(it);
      }
      return base_stream_destroy(s);
    };
    base_event_create = t.cuEventCreate;
    t.cuEventCreate = [](CUevent* e, unsigned flags) {
      CUresult r = base_event_create(e, flags);
      CUcontext current = nullptr;
      table_in_use()->cuCtxGetCurrent(&current);
      event_ctx[*e] = current;
      return r;
    };
    base_event_destroy = t.cuEventDestroy;
    t.cuEventDestroy = [](CUevent e) {
      event_ctx.erase(e);
      return base_event_destroy(e);
    };
    t.cuStreamGetCtx = [](CUstream s, CUcontext* c) {
      auto it = stream_ctx.find(s);
      *c = it != stream_ctx.end() ? ctx_of(it->second) : reinterpret_cast<CUcontext>(0x1000);
      return CUDA_SUCCESS;
    };
    t.cuStreamGetGreenCtx = [](CUstream s, CUgreenCtx* g) {
      auto it = stream_ctx.find(s);
      *g = it != stream_ctx.end() ? it->second : nullptr;
      return CUDA_SUCCESS;
    };
  }

  static std::string problems() {
    std::string out = FakeDriver::ledger_problems();
    for (const auto& v : violations) out += "violation: " + v + "\n";
    for (const auto& [g, n] : live) out += "green context of " + std::to_string(n) + " SMs never destroyed\n";
    return out;
  }
};

// A FakeDriver with the green half installed, and the log hook captured.
struct GreenFake {
  FakeDriver fake;
  std::vector<std::string> warnings;
  LogHandler previous;
  GreenFake() {
    Green::install(fake);
    previous = set_log_handler([this](LogLevel level, std::string_view m) {
      if (level == LogLevel::warning) warnings.emplace_back(m);
    });
  }
  ~GreenFake() {
    set_log_handler(previous);
    Green::reset();
  }
};

std::vector<unsigned> counts_of(const std::vector<SMResource>& groups) {
  std::vector<unsigned> v;
  for (const auto& g : groups) v.push_back(g.sm_count());
  return v;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

template <typename E, typename F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "no exception of the expected type";
  return {};
}

}  // namespace

// ---- resources and splits -----------------------------------------------------------------------

TEST(GreenResources, TheDeviceReportsItsSMs) {
  GreenFake g;
  SMResource sm = Device(0).resources().sm();
  EXPECT_EQ(sm.sm_count(), 132u);
  EXPECT_EQ(sm.min_partition_size(), 8u);
  EXPECT_EQ(sm.coscheduled_alignment(), 2u);
  EXPECT_EQ(sm.device_id(), 0);
  EXPECT_EQ(sm.requested_sm_count(), 132u);
  EXPECT_TRUE(sm.is_usable());
  ASSERT_EQ(sm.handles().size(), 1u);
  EXPECT_EQ(sm.handle()->sm.smCount, 132u);
}

TEST(GreenResources, HalvesOfAn132SMDeviceAreRoundedDownNotDropped) {
  GreenFake g;
  SMResource sm = Device(0).resources().sm();
  auto [groups, rest] = sm.split({.count = {66, 66}});
  ASSERT_EQ(groups.size(), 2u) << "never fewer groups than asked";
  EXPECT_EQ(counts_of(groups), (std::vector<unsigned>{64, 64}));
  EXPECT_EQ(rest.sm_count(), 4u);
  for (const auto& grp : groups) {
    EXPECT_EQ(grp.requested_sm_count(), 66u);
    EXPECT_TRUE(grp.is_usable());
  }
  ASSERT_EQ(g.warnings.size(), 1u) << "one warning for the whole split";
  const std::string& w = g.warnings[0];
  EXPECT_TRUE(contains(w, "count = [66, 66]")) << w;
  EXPECT_TRUE(contains(w, "rounded down to [64, 64]")) << w;
  EXPECT_TRUE(contains(w, "multiples of 8 SMs")) << w;
  EXPECT_TRUE(contains(w, "4 SMs are in the remainder")) << w;
  // What the driver alone does with 66: one group of 72 (the fake rounds up as the driver does).
  CUdevResource one[2];
  unsigned n = 2;
  ASSERT_EQ(g.fake.table.cuDevSmResourceSplitByCount(one, &n, sm.handle(), nullptr, 0, 66), CUDA_SUCCESS);
  EXPECT_EQ(n, 1u);
}

TEST(GreenResources, SplitSizesAndRemainderForSeveralRequests) {
  GreenFake g;
  SMResource sm = Device(0).resources().sm();
  struct Case {
    SMResourceOptions options;
    std::vector<unsigned> sizes;
    unsigned parts_of_last;  // units the last group is built from
    bool warned;
  };
  const Case cases[] = {
      {{.count = {64, 64}}, {64, 64}, 1, false},
      {{.count = 8}, {8}, 1, false},
      {{}, {8}, 1, false},                     // unset: the smallest group
      {{.count = {0, 0}}, {8, 8}, 1, false},   // 0: the smallest group
      {{.count = {8, 8, 8}}, {8, 8, 8}, 1, false},
      {{.count = {16, 112}}, {16, 112}, 7, false},  // units of 16
      {{.count = {10, 20}}, {8, 16}, 2, true},      // units of 8
      {{.count = {24, 24, 24, 24, 24}}, {24, 24, 24, 24, 24}, 3, false},  // 5 x 24 do not fit as groups: units of 8
      {{.count = 130}, {128}, 1, true},
  };
  for (const auto& c : cases) {
    g.warnings.clear();
    auto [groups, rest] = sm.split(c.options);
    const std::string what = "sizes " + ::testing::PrintToString(c.sizes);
    EXPECT_EQ(counts_of(groups), c.sizes) << what;
    unsigned sum = std::accumulate(c.sizes.begin(), c.sizes.end(), 0u);
    EXPECT_EQ(rest.sm_count(), 132 - sum) << what;
    EXPECT_EQ(groups.back().handles().size(), c.parts_of_last) << what;
    EXPECT_EQ(g.warnings.size(), c.warned ? 1u : 0u) << what;
    for (const auto& grp : groups) {
      unsigned parts = 0;
      for (const CUdevResource& p : grp.handles()) parts += p.sm.smCount;
      EXPECT_EQ(parts, grp.sm_count()) << what;
    }
  }
}

TEST(GreenResources, RandomRequestsRoundDownAndKeepEveryGroup) {
  GreenFake g;
  SMResource sm = Device(0).resources().sm();
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const unsigned k = std::uniform_int_distribution<unsigned>(1, 6)(rng);
    std::vector<int> asked;
    unsigned budget = 128;
    for (unsigned i = 0; i < k && budget >= 8; ++i) {
      int c = std::uniform_int_distribution<int>(8, static_cast<int>(std::min(40u, budget - 8 * (k - i - 1))))(rng);
      asked.push_back(c);
      budget -= c;
    }
    if (asked.empty()) continue;
    auto [groups, rest] = sm.split({.count = asked});
    ASSERT_EQ(groups.size(), asked.size()) << ::testing::PrintToString(asked);
    unsigned sum = 0;
    for (std::size_t i = 0; i < asked.size(); ++i) {
      EXPECT_EQ(groups[i].sm_count(), static_cast<unsigned>(asked[i]) / 8 * 8) << ::testing::PrintToString(asked);
      EXPECT_EQ(groups[i].requested_sm_count(), static_cast<unsigned>(asked[i]));
      sum += groups[i].sm_count();
    }
    EXPECT_EQ(rest.sm_count(), 132 - sum);
    // Groups of one split share its id; the parts are distinct driver outputs.
    for (const auto& grp : groups) EXPECT_EQ(grp.state()->split, rest.state()->split);
  }
}

TEST(GreenResources, DryRunGivesTheSameAnswerButMakesNoContext) {
  GreenFake g;
  SMResource sm = Device(0).resources().sm();
  auto [groups, rest] = sm.split({.count = {66, 66}}, /*dry_run=*/true);
  EXPECT_EQ(counts_of(groups), (std::vector<unsigned>{64, 64}));
  EXPECT_EQ(rest.sm_count(), 4u);
  EXPECT_FALSE(groups[0].is_usable());
  EXPECT_FALSE(rest.is_usable());
  std::string m = message_of<std::invalid_argument>([&] { Device(0).create_context({.resources = {groups[0]}}); });
  EXPECT_TRUE(contains(m, "dry-run")) << m;
  EXPECT_EQ(Green::created, 0);
}

TEST(GreenResources, RequestsThatCannotBeMetNameGranularityMinimumAndAWorkingSplit) {
  GreenFake g;
  SMResource sm = Device(0).resources().sm();
  std::string m = message_of<std::invalid_argument>([&] { sm.split({.count = {100, 100}}); });
  EXPECT_TRUE(contains(m, "asks for 200 SMs")) << m;
  EXPECT_TRUE(contains(m, "has 132 SMs")) << m;
  EXPECT_TRUE(contains(m, "multiples of 8 SMs")) << m;
  EXPECT_TRUE(contains(m, "minimum partition 8 SMs")) << m;
  EXPECT_TRUE(contains(m, "a split that would work: count=[64, 64]")) << m;
  // The suggestion does work.
  EXPECT_EQ(counts_of(sm.split({.count = {64, 64}}).first), (std::vector<unsigned>{64, 64}));

  m = message_of<std::invalid_argument>([&] { sm.split({.count = {16, 4}}); });
  EXPECT_TRUE(contains(m, "a group of 4 SMs, below the minimum partition")) << m;
  EXPECT_TRUE(contains(m, "count=[16, 8]")) << m;

  m = message_of<std::invalid_argument>([&] { sm.split({.count = std::vector<int>(17, 8)}); });
  EXPECT_TRUE(contains(m, "at most 16 groups fit")) << m;

  Green::limit_groups = 1;  // a GPU whose topology gives one group at most
  m = message_of<std::invalid_argument>([&] { sm.split({.count = {32, 32}}); });
  EXPECT_TRUE(contains(m, "cannot be made as [32, 32]")) << m;
  EXPECT_TRUE(contains(m, "at most 1 group fits: count=[8]")) << m;
  Green::limit_groups = ~0u;
  EXPECT_TRUE(g.warnings.empty());
}

TEST(GreenResources, OptionsAreCheckedAsCudaCoreChecksThem) {
  GreenFake g;
  SMResource sm = Device(0).resources().sm();
  auto invalid = [&](const SMResourceOptions& o) { return message_of<std::invalid_argument>([&] { sm.split(o); }); };
  EXPECT_TRUE(contains(invalid({.count = std::vector<int>{}}), "count is an empty list"));
  EXPECT_TRUE(contains(invalid({.count = {8, -8}}), "count[1] = -8: must be non-negative"));
  EXPECT_TRUE(contains(invalid({.count = -1}), "count = -1: must be non-negative"));
  EXPECT_TRUE(contains(invalid({.count = {8, 8}, .coscheduled_sm_count = {8, 8, 8}}),
                       "coscheduled_sm_count has 3 values, expected 2"));
  EXPECT_TRUE(contains(invalid({.count = 8, .backfill = {true, false}}),
                       "backfill has one value per group but count is a single value"));
  for (const SMResourceOptions& o : {SMResourceOptions{.count = 8, .coscheduled_sm_count = 8},
                                     SMResourceOptions{.count = {8, 8}, .preferred_coscheduled_sm_count = {8, 8}},
                                     SMResourceOptions{.count = 8, .backfill = true}}) {
    try {
      sm.split(o);
      ADD_FAILURE() << "co-scheduling fields need CUDA 13.1";
    } catch (const FeatureUnavailableError& e) {
      EXPECT_TRUE(contains(e.requirement(), "CUDA driver 13.1")) << e.what();
    }
  }
  EXPECT_NO_THROW(sm.split({.count = 8, .backfill = false}));
  EXPECT_THROW(SMResource().sm_count(), std::logic_error);
}

TEST(GreenResources, AGroupIsNotSplitAgainButItsContextsResourcesAre) {
  GreenFake g;
  auto [groups, rest] = Device(0).resources().sm().split({.count = {64, 64}});
  std::string m = message_of<std::invalid_argument>([&] { groups[0].split({.count = 8}); });
  EXPECT_TRUE(contains(m, "make a context from it")) << m;
  Context ctx = Device(0).create_context({.resources = {groups[0]}});
  auto [sub, sub_rest] = ctx.resources().sm().split({.count = {16, 16}});
  EXPECT_EQ(counts_of(sub), (std::vector<unsigned>{16, 16}));
  EXPECT_EQ(sub_rest.sm_count(), 32u);
  // A group of the context's split makes a context of its own.
  Context inner = Device(0).create_context({.resources = {sub[1]}});
  EXPECT_EQ(inner.resources().sm().sm_count(), 16u);
}

TEST(GreenResources, OldDriversAndUnsupportedGpusNameWhatIsNeeded) {
  {
    GreenFake g;
    g.fake.table.version = 12030;
    g.fake.table.cuDeviceGetDevResource = nullptr;
    try {
      Device(0).resources().sm();
      ADD_FAILURE() << "no FeatureUnavailableError";
    } catch (const FeatureUnavailableError& e) {
      EXPECT_EQ(e.requirement(), "CUDA driver 12.4") << e.what();
      EXPECT_TRUE(contains(e.what(), "the driver is CUDA 12.3")) << e.what();
    }
  }
  {
    GreenFake g;
    SMResource sm = Device(0).resources().sm();
    auto [groups, rest] = sm.split({.count = 8});
    g.fake.table.cuGreenCtxCreate = nullptr;  // a driver that can split but not make contexts
    EXPECT_THROW(Device(0).create_context({.resources = {groups[0]}}), FeatureUnavailableError);
    g.fake.table.cuDevSmResourceSplitByCount = nullptr;
    EXPECT_THROW(sm.split({.count = 8}), FeatureUnavailableError);
  }
  {
    GreenFake g;
    g.fake.table.cuDeviceGetDevResource = [](CUdevice, CUdevResource*, CUdevResourceType) {
      return CUDA_ERROR_NOT_SUPPORTED;
    };
    try {
      Device(0).resources().sm();
      ADD_FAILURE() << "no FeatureUnavailableError";
    } catch (const FeatureUnavailableError& e) {
      EXPECT_TRUE(contains(e.feature(), "device 0 (Fake H200, sm_90)")) << e.what();
      EXPECT_TRUE(contains(e.requirement(), "CUDA_ERROR_NOT_SUPPORTED")) << e.what();
    }
  }
}

// ---- green contexts -----------------------------------------------------------------------------

TEST(GreenContext, StreamsAndEventsOfAGreenContextReportIt) {
  GreenFake g;
  Device dev(0);
  const CUcontext was_current = Context::current().handle();
  auto [groups, rest] = dev.resources().sm().split({.count = {16, 112}});
  Context a = dev.create_context({.resources = {groups[0]}});
  Context b = dev.create_context({.resources = {groups[1]}});
  EXPECT_TRUE(a.is_green());
  EXPECT_FALSE(a.is_primary());
  EXPECT_NE(a, b);
  EXPECT_NE(a, dev.context());
  EXPECT_EQ(a.device_id(), 0);
  EXPECT_EQ(a.resources().sm().sm_count(), 16u);
  EXPECT_EQ(b.resources().sm().sm_count(), 112u) << "a group of 7 units makes one context";
  EXPECT_EQ(dev.context().resources().sm().sm_count(), 132u);

  Stream s = a.create_stream();
  EXPECT_EQ(Green::green_streams, 1);
  EXPECT_EQ(s.context(), a);
  EXPECT_TRUE(s.context().is_green());
  EXPECT_EQ(s.resources().sm().sm_count(), 16u);
  // Through the driver (a StreamRef knows only the handle): the same box.
  EXPECT_EQ(StreamRef(s.handle()).context(), a);
  EXPECT_TRUE(StreamRef(s.handle()).context().is_green());
  EXPECT_EQ(StreamRef(s.handle()).resources().sm().sm_count(), 16u);
  Event e = a.create_event({.timing_enabled = true});
  EXPECT_EQ(e.context(), a);
  EXPECT_EQ(Green::event_ctx.at(e.handle()), a.handle()) << "the event is made in the green context";
  Event recorded = s.record();
  EXPECT_EQ(Green::event_ctx.at(recorded.handle()), a.handle());
  EXPECT_EQ(dev.create_stream().resources().sm().sm_count(), 132u);
  EXPECT_TRUE(Context::from_handle(a.handle()).is_green()) << "cucore's green contexts are found by their CUcontext";
  std::string m = message_of<std::invalid_argument>([&] { a.create_stream({.nonblocking = false}); });
  EXPECT_TRUE(contains(m, "non-blocking")) << m;
  EXPECT_EQ(Context::current().handle(), was_current) << "making streams and events leaves the current context";
}

TEST(GreenContext, EveryDestructionOrderDestroysTheContextOnceAfterItsStreamsAndEvents) {
  std::vector<int> order(5);
  std::iota(order.begin(), order.end(), 0);
  int runs = 0;
  do {
    GreenFake g;
    {
      auto [groups, rest] = Device(0).resources().sm().split({.count = {64, 64}});
      std::optional<Context> ctx(Device(0).create_context({.resources = {groups[0]}}));
      std::optional<Context> copy(*ctx);
      std::optional<Stream> stream(ctx->create_stream());
      std::optional<Event> event(ctx->create_event());
      std::optional<SMResource> res(ctx->resources().sm());
      stream->record(*event);
      for (int i : order) {
        switch (i) {
          case 0: ctx->close(); ctx.reset(); break;
          case 1: copy.reset(); break;
          case 2: stream->close(); stream.reset(); break;
          case 3: event.reset(); break;
          case 4: res.reset(); break;
        }
        if (Green::destroyed) {
          EXPECT_FALSE(stream.has_value() || event.has_value() || ctx.has_value() || copy.has_value() ||
                       res.has_value())
              << "destroyed while something still shared it";
        }
      }
    }
    EXPECT_EQ(Green::created, 1);
    EXPECT_EQ(Green::destroyed, 1);
    EXPECT_EQ(Green::problems(), "") << ::testing::PrintToString(order);
    ++runs;
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_EQ(runs, 120);
}

TEST(GreenContext, ClosingTheContextWhileItsStreamLivesKeepsItForTheStream) {
  GreenFake g;
  auto [groups, rest] = Device(0).resources().sm().split({.count = 32});
  Context ctx = Device(0).create_context({.resources = {groups[0]}});
  Stream s = ctx.create_stream();
  ctx.close();
  ctx.close();  // idempotent
  EXPECT_TRUE(ctx.is_closed());
  EXPECT_FALSE(ctx.is_green());
  EXPECT_EQ(Green::destroyed, 0);
  EXPECT_NO_THROW(s.sync());
  EXPECT_TRUE(s.context().is_green());
  EXPECT_EQ(s.resources().sm().sm_count(), 32u);
  std::string m = message_of<ClosedError>([&] { ctx.create_stream(); });
  EXPECT_TRUE(contains(m, "Context has been closed (create_stream)")) << m;
  EXPECT_THROW(ctx.resources(), ClosedError);
  EXPECT_THROW(ctx.create_event(), ClosedError);
  s.close();
  EXPECT_EQ(Green::destroyed, 1);
  EXPECT_EQ(Green::problems(), "");
}

TEST(GreenContext, AnEventRecordedThroughTheBareHandleKeepsTheContext) {
  GreenFake g;
  auto [groups, rest] = Device(0).resources().sm().split({.count = 16});
  std::optional<Context> ctx(Device(0).create_context({.resources = {groups[0]}}));
  std::optional<Stream> s(ctx->create_stream());
  Event e = StreamRef(s->handle()).record();  // the context found from the handle alone
  ctx.reset();
  s.reset();
  EXPECT_EQ(Green::destroyed, 0) << "the event shares the green context";
  EXPECT_TRUE(e.context().is_green());
  e.close();
  EXPECT_EQ(Green::destroyed, 1);
  EXPECT_EQ(Green::problems(), "");
}

TEST(GreenContext, AContextIsNotClosedWhileCurrent) {
  GreenFake g;
  auto [groups, rest] = Device(0).resources().sm().split({.count = 8});
  Context ctx = Device(0).create_context({.resources = {groups[0]}});
  ctx.set_current();
  std::string m = message_of<Error>([&] { ctx.close(); });
  EXPECT_TRUE(contains(m, "current on this thread")) << m;
  EXPECT_FALSE(ctx.is_closed());
  Device(0).set_current();
  ctx.close();
  EXPECT_EQ(Green::destroyed, 1);
  // A green context current when its last share goes is made not current first.
  auto [more, more_rest] = Device(0).resources().sm().split({.count = 8});
  std::optional<Context> other(Device(0).create_context({.resources = {more[0]}}));
  Context(*other).set_current();
  Stream s = other->create_stream();
  std::optional<Context> alias = s.context();
  other.reset();
  alias.reset();
  s.close();  // the last share
  CUcontext current = nullptr;
  g.fake.table.cuCtxGetCurrent(&current);
  EXPECT_EQ(current, nullptr);
  EXPECT_EQ(Green::problems(), "");
}

TEST(GreenContext, BadRequestsAreRefusedBeforeTheDriverSeesThem) {
  GreenFake g;
  FakeDriver::device_count = 2;
  Device dev(0);
  auto [groups, rest] = dev.resources().sm().split({.count = {64, 64}});
  auto [other, other_rest] = dev.resources().sm().split({.count = {8, 8}});
  auto refused = [&](const ContextOptions& o) { return message_of<std::invalid_argument>([&] { dev.create_context(o); }); };
  EXPECT_TRUE(contains(refused({}), "resources: empty"));
  EXPECT_TRUE(contains(refused({.resources = {SMResource()}}), "[0] is an empty SMResource"));
  EXPECT_TRUE(contains(refused({.resources = {groups[0], other[0]}}), "[1] is not from the same split"));
  EXPECT_TRUE(contains(refused({.resources = {dev.resources().sm(), groups[0]}}), "not from the same split"));
  auto [on1, on1_rest] = Device(1).resources().sm().split({.count = 8});
  EXPECT_TRUE(contains(refused({.resources = {on1[0]}}), "SMResource of device 1, not of device 0"));
  Context sub = dev.create_context({.resources = {groups[0]}});
  auto [whole, none_left] = sub.resources().sm().split({.count = 64});
  EXPECT_EQ(none_left.sm_count(), 0u);
  EXPECT_TRUE(contains(refused({.resources = {none_left}}), "has no SMs"));
  EXPECT_EQ(Green::created, 1);
  // Two groups of one split make one context, and so does a whole resource.
  Context both = dev.create_context({.resources = {groups[0], groups[1]}});
  EXPECT_EQ(both.resources().sm().sm_count(), 128u);
  Context all = dev.create_context({.resources = {dev.resources().sm()}});
  EXPECT_EQ(all.resources().sm().sm_count(), 132u);
}

TEST(GreenContext, AForeignGreenStreamIsAdoptedAsGreenAndNotDestroyed) {
  GreenFake g;
  auto& t = g.fake.table;
  CUdevResource in{}, out[1], rest{};
  ASSERT_EQ(t.cuDeviceGetDevResource(0, &in, CU_DEV_RESOURCE_TYPE_SM), CUDA_SUCCESS);
  unsigned n = 1;
  ASSERT_EQ(t.cuDevSmResourceSplitByCount(out, &n, &in, &rest, 0, 24), CUDA_SUCCESS);
  CUdevResourceDesc desc = nullptr;
  ASSERT_EQ(t.cuDevResourceGenerateDesc(&desc, out, 1), CUDA_SUCCESS);
  CUgreenCtx foreign = nullptr;
  ASSERT_EQ(t.cuGreenCtxCreate(&foreign, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM), CUDA_SUCCESS);
  CUstream h = nullptr;
  ASSERT_EQ(t.cuGreenCtxStreamCreate(&h, foreign, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
  {
    Stream s = Stream::from_handle(h);
    Context c = s.context();
    EXPECT_TRUE(c.is_green());
    EXPECT_FALSE(c.is_primary());
    EXPECT_EQ(s.resources().sm().sm_count(), 24u);
  }
  EXPECT_EQ(Green::destroyed, 0) << "cucore did not make it, so it does not destroy it";
  ASSERT_EQ(t.cuStreamDestroy(h), CUDA_SUCCESS);
  ASSERT_EQ(t.cuGreenCtxDestroy(foreign), CUDA_SUCCESS);
  EXPECT_EQ(Green::problems(), "");
}

// ---- workqueues ---------------------------------------------------------------------------------

TEST(GreenWorkqueue, NeedsACuda13_1Driver) {
  GreenFake g;
  try {
    Device(0).resources().workqueue();
    ADD_FAILURE() << "no FeatureUnavailableError";
  } catch (const FeatureUnavailableError& e) {
    EXPECT_EQ(e.requirement(), "CUDA driver 13.1") << e.what();
    EXPECT_TRUE(contains(e.feature(), "WorkqueueResource")) << e.what();
  }
}

TEST(GreenWorkqueue, IsReadConfiguredAndGivenToTheContext) {
  GreenFake g;
  g.fake.table.version = 13010;
  WorkqueueResource wq = Device(0).resources().workqueue();
  EXPECT_EQ(wq.sharing_scope(), WorkqueueSharingScope::device_ctx);
  EXPECT_EQ(wq.concurrency_limit(), 32u);
  EXPECT_EQ(wq.device_id(), 0);
  wq.configure({.sharing_scope = WorkqueueSharingScope::green_ctx_balanced, .concurrency_limit = 4});
  EXPECT_EQ(wq.sharing_scope(), WorkqueueSharingScope::green_ctx_balanced);
  EXPECT_EQ(wq.concurrency_limit(), 4u);
  wq.configure({.concurrency_limit = 7});  // the scope stays
  EXPECT_EQ(wq.sharing_scope(), WorkqueueSharingScope::green_ctx_balanced);
  EXPECT_EQ(wq.concurrency_limit(), 7u);
  std::string m = message_of<std::invalid_argument>([&] { wq.configure({.concurrency_limit = 0}); });
  EXPECT_TRUE(contains(m, "concurrency_limit = 0: must be at least 1")) << m;
  // The driver's layout: {device, limit, scope} in the resource's payload.
  int raw[3];
  std::memcpy(raw, reinterpret_cast<const unsigned char*>(wq.handle()) + 96, sizeof raw);
  EXPECT_EQ(raw[1], 7);
  EXPECT_EQ(raw[2], 1);
  EXPECT_EQ(Green::type_of(wq.handle()->type), 1000);

  auto [groups, rest] = Device(0).resources().sm().split({.count = 16});
  Context ctx = Device(0).create_context({.resources = {groups[0], wq}});
  ASSERT_EQ(Green::descs.size(), 1u);
  const auto& given = Green::descs.begin()->second;
  ASSERT_EQ(given.size(), 2u);
  EXPECT_EQ(given[0].sm.smCount, 16u);
  EXPECT_EQ(Green::type_of(given[1].type), 1000);
  std::string twice = message_of<std::invalid_argument>(
      [&] { Device(0).create_context({.resources = {groups[0], wq, wq}}); });
  EXPECT_TRUE(contains(twice, "second WorkqueueResource")) << twice;
  EXPECT_THROW(WorkqueueResource().concurrency_limit(), std::logic_error);
}

// ---- the log hook --------------------------------------------------------------------------------

TEST(GreenLog, TheDefaultHandlerPrintsEachWarningOnce) {
  FakeDriver fake;
  Green::install(fake);
  LogHandler previous = set_log_handler({});  // the default
  SMResource sm = Device(0).resources().sm();
  ::testing::internal::CaptureStderr();
  sm.split({.count = {66, 66}});
  sm.split({.count = {66, 66}});
  sm.split({.count = 20});
  std::string err = ::testing::internal::GetCapturedStderr();
  set_log_handler(previous);
  Green::reset();
  auto count = [&](const std::string& needle) {
    int n = 0;
    for (std::size_t at = err.find(needle); at != std::string::npos; at = err.find(needle, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("cucore: warning: SMResourceOptions.count = [66, 66] rounded down to [64, 64]"), 1) << err;
  EXPECT_EQ(count("SMResourceOptions.count = 20 rounded down to [16]"), 1) << err;
}

TEST(GreenLog, AHandlerSeesEveryWarningAndMayThrow) {
  GreenFake g;
  SMResource sm = Device(0).resources().sm();
  sm.split({.count = {66, 66}});
  sm.split({.count = {66, 66}});
  EXPECT_EQ(g.warnings.size(), 2u);
  LogHandler mine = set_log_handler([](LogLevel, std::string_view m) { throw std::runtime_error(std::string(m)); });
  EXPECT_THROW(sm.split({.count = 9}), std::runtime_error);
  EXPECT_NO_THROW(sm.split({.count = 8}));  // nothing rounded, nothing logged
  set_log_handler(mine);
}
