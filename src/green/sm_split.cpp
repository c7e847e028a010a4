// SMResource::split over cuDevSmResourceSplitByCount, never making fewer groups
// than asked.
//
// The driver makes equal groups of a size it rounds UP to its granularity and
// silently returns fewer groups when they do not fit (NVIDIA's cuda.core then
// gives one group for [66, 66] on a 132-SM H200). cucore instead:
//  1. learns the granularity from the driver: the smallest group it makes
//     (the minimum) and the size after that (minimum + step), two probe splits
//     with no side effect;
//  2. rounds each count DOWN to a size the driver makes (66 -> 64);
//  3. makes the groups with one split: equal counts are one group each;
//     different counts are built from equal units of their common divisor (or
//     of the minimum, which packs best), several units per group; the driver
//     lets one context take several outputs of one split;
//  4. checks the driver made every unit at the size asked, else explains what
//     would fit.
#include <cucore/errors.hpp>
#include <cucore/log.hpp>
#include <cucore/resources.hpp>

#include <cstdint>
#include <algorithm>
#include <atomic>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "green/green.hpp"
#include "loader/driver.hpp"

namespace cucore {
namespace detail {
namespace {

std::atomic<std::uint64_t> g_split_ids{0};

template <typename T>
std::string list(const std::vector<T>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

template <typename T>
std::string shown(const PerGroup<T>& f) {
  return f.is_single() ? std::to_string(f.values()[0]) : list(f.values());
}

// ---- the request, checked as cuda.core checks it ----

template <typename T>
void check_field(const PerGroup<T>& f, const char* name, const PerGroup<int>& count, std::size_t groups) {
  if (!f.is_per_group()) return;
  if (!count.is_per_group())
    throw InvalidArgumentError(std::string("SMResourceOptions.") + name +
                                " has one value per group but count is a single value; give count one value per "
                                "group to ask for several groups");
  if (f.values().size() != groups)
    throw InvalidArgumentError(std::string("SMResourceOptions.") + name + " has " +
                                std::to_string(f.values().size()) + " values, expected " + std::to_string(groups) +
                                " (one per group, as count)");
}

void check_non_negative(const PerGroup<int>& f, const char* name) {
  for (std::size_t i = 0; i < f.values().size(); ++i)
    if (f.values()[i] < 0)
      throw InvalidArgumentError(std::string("SMResourceOptions.") + name +
                                  (f.is_single() ? "" : "[" + std::to_string(i) + "]") + " = " +
                                  std::to_string(f.values()[i]) + ": must be non-negative");
}

// The count per group (0: the smallest group the GPU makes).
std::vector<unsigned> requested_counts(const SMResourceOptions& o) {
  std::size_t groups = 1;
  if (o.count.is_per_group()) {
    groups = o.count.values().size();
    if (groups == 0)
      throw InvalidArgumentError(
          "SMResourceOptions.count is an empty list: give one count per group, or a single count for one group");
  }
  check_field(o.coscheduled_sm_count, "coscheduled_sm_count", o.count, groups);
  check_field(o.preferred_coscheduled_sm_count, "preferred_coscheduled_sm_count", o.count, groups);
  check_field(o.backfill, "backfill", o.count, groups);
  check_non_negative(o.count, "count");
  check_non_negative(o.coscheduled_sm_count, "coscheduled_sm_count");
  check_non_negative(o.preferred_coscheduled_sm_count, "preferred_coscheduled_sm_count");
  const char* needs_13_1 = nullptr;
  if (o.coscheduled_sm_count.is_set()) needs_13_1 = "SMResourceOptions.coscheduled_sm_count";
  else if (o.preferred_coscheduled_sm_count.is_set()) needs_13_1 = "SMResourceOptions.preferred_coscheduled_sm_count";
  else if (std::ranges::any_of(o.backfill.values(), [](bool b) { return b; })) needs_13_1 = "SMResourceOptions.backfill";
  if (needs_13_1)
    throw FeatureUnavailableError(std::string(needs_13_1) + " (the structured split cuDevSmResourceSplit)",
                                  "CUDA driver 13.1 and a cucore built with CUDA 13.1 headers (this one splits "
                                  "with cuDevSmResourceSplitByCount)");
  std::vector<unsigned> counts(groups);
  for (std::size_t i = 0; i < groups; ++i) counts[i] = static_cast<unsigned>(o.count.at(i, 0));
  return counts;
}

// ---- the driver ----

struct Split {
  std::vector<CUdevResource> groups;
  CUdevResource rest{};
  unsigned size() const { return groups.empty() ? 0 : groups[0].sm.smCount; }
};

// Up to `want` groups of at least `min_count` SMs (one driver call). A split
// the driver refuses for its size makes no group; other failures throw.
Split split_by_count(const CUdevResource& input, unsigned want, unsigned min_count) {
  Split s;
  s.groups.assign(want, CUdevResource{});
  unsigned n = want;
  CUresult r = driver().cuDevSmResourceSplitByCount(s.groups.data(), &n, &input, &s.rest, 0, min_count);
  if (r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION) {
    s.groups.clear();
    return s;
  }
  check(r, "cuDevSmResourceSplitByCount");
  s.groups.resize(std::min(n, want));
  return s;
}

// How many groups of `size` SMs the driver would make (a split that makes nothing).
unsigned groups_that_fit(const CUdevResource& input, unsigned size, unsigned sm_count) {
  unsigned n = 0;
  if (driver().cuDevSmResourceSplitByCount(nullptr, &n, &input, nullptr, 0, size) != CUDA_SUCCESS)
    n = size ? sm_count / size : 0;
  return n;
}

// The sizes the driver makes: min, min + step, min + 2 step, ...
struct Grain {
  unsigned min;
  unsigned step;
  // The largest size the driver makes that is at most `count` (0 if below min).
  unsigned round_down(unsigned count) const { return count < min ? 0 : min + (count - min) / step * step; }
  bool makes(unsigned size) const { return size >= min && (size - min) % step == 0; }
  std::string describe() const {
    return min == step ? "groups are multiples of " + std::to_string(step) + " SMs"
                       : "groups have at least " + std::to_string(min) + " SMs, in steps of " + std::to_string(step);
  }
};

Grain grain_of(const SMResourceState& s, const CUdevResource& input) {
  Grain g{std::max(1u, s.min_partition), std::max(1u, s.alignment)};
  if (g.min > s.sm_count) return g;
  Split a = split_by_count(input, 1, g.min);
  if (a.groups.empty()) return g;
  g.min = a.size();
  if (g.min + 1 <= s.sm_count) {
    Split b = split_by_count(input, 1, g.min + 1);
    if (!b.groups.empty() && b.size() > g.min) g.step = b.size() - g.min;
  }
  return g;
}

// The driver's groups for `sizes` (each a size the grain makes), from one
// split into equal units: of their common divisor (one unit per group when the
// sizes are equal), else of the minimum (several per group; packs best). The
// driver lets one context take several outputs of one split. No unit when the
// driver cannot make them.
struct Units {
  Split split;
  unsigned unit = 0;
};
Units make_units(const CUdevResource& input, const Grain& grain, const std::vector<unsigned>& sizes) {
  unsigned common = 0;
  for (unsigned z : sizes) common = std::gcd(common, z);
  std::vector<unsigned> candidates;
  if (grain.makes(common)) candidates.push_back(common);
  if (common != grain.min && common % grain.min == 0) candidates.push_back(grain.min);
  const unsigned sum = std::accumulate(sizes.begin(), sizes.end(), 0u);
  for (unsigned u : candidates) {
    Split sp = split_by_count(input, sum / u, u);
    if (sp.groups.size() == sum / u && sp.size() == u) return {std::move(sp), u};
  }
  return {};
}

// ---- what would work, for the error messages ----

// Counts like `counts`, in multiples of the minimum, that the driver makes
// (tried), shrinking the largest first; empty when not even one minimum-size
// group per count fits.
std::vector<unsigned> fitting(std::vector<unsigned> counts, const Grain& grain, unsigned units,
                              const CUdevResource& input) {
  const unsigned m = grain.min;
  if (counts.empty() || counts.size() > units) return {};
  for (unsigned& c : counts) c = std::max(m, c / m * m);
  for (;;) {
    auto largest = std::max_element(counts.begin(), counts.end());
    if (std::accumulate(counts.begin(), counts.end(), 0u) <= units * m && make_units(input, grain, counts).unit)
      return counts;
    if (*largest == m) return {};
    *largest -= m;
  }
}

[[noreturn]] void cannot_split(const std::string& what, const SMResourceState& s, const CUdevResource& input,
                               const Grain& grain, const std::vector<unsigned>& counts) {
  unsigned units = groups_that_fit(input, grain.min, s.sm_count);
  std::vector<unsigned> works = fitting(counts, grain, units, input);
  std::string hint;
  if (!works.empty()) hint = "a split that would work: count=" + list(works);
  else if (units > 0)
    hint = "at most " + std::to_string(units) + (units == 1 ? " group fits" : " groups fit") +
           ": count=" + list(std::vector(units, grain.min));
  else hint = "this resource has fewer SMs than the minimum partition, so it cannot be split";
  throw InvalidArgumentError(what + "; this SM resource of " + describe_device(s.device) + " has " +
                              std::to_string(s.sm_count) + " SMs (" + grain.describe() + ", minimum partition " +
                              std::to_string(grain.min) + " SMs); " + hint);
}

}  // namespace
}  // namespace detail

std::pair<std::vector<SMResource>, SMResource> SMResource::split(const SMResourceOptions& options,
                                                                 bool dry_run) const {
  using namespace detail;
  const SMResourceState& s = open("split");
  const std::vector<unsigned> asked = requested_counts(options);
  const DriverTable& d = driver();
  require(reinterpret_cast<const void*>(d.cuDevSmResourceSplitByCount), 12040,
          "SMResource::split (cuDevSmResourceSplitByCount)");
  if (s.split != 0 || s.parts.size() != 1)
    throw InvalidArgumentError(
        "SMResource::split: this SMResource is itself a split's group or remainder, which the driver does not split "
        "again; make a context from it and split that context's resources().sm()");
  const CUdevResource& input = s.parts[0];
  const Grain grain = grain_of(s, input);
  const std::string request = "SMResourceOptions.count = " + shown(options.count);

  // Round each count down to a size the driver makes.
  std::vector<unsigned> sizes(asked.size());
  unsigned asked_total = 0;
  for (std::size_t i = 0; i < asked.size(); ++i) {
    unsigned c = asked[i] ? asked[i] : grain.min;
    asked_total += c;
    sizes[i] = grain.round_down(c);
    if (sizes[i] == 0)
      cannot_split(request + " asks for a group of " + std::to_string(c) + " SMs, below the minimum partition", s,
                   input, grain, asked);
  }
  if (asked_total > s.sm_count)
    cannot_split(request + " asks for " + std::to_string(asked_total) + " SMs in all", s, input, grain, asked);

  Units made = make_units(input, grain, sizes);
  if (!made.unit) cannot_split(request + " cannot be made as " + list(sizes), s, input, grain, sizes);
  const unsigned unit = made.unit;

  const std::uint64_t id = ++g_split_ids;
  std::vector<SMResource> groups;
  groups.reserve(sizes.size());
  std::size_t next = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    auto g = make_sm_state(s.device, made.split.groups[next], &s);
    for (unsigned k = 1; k < sizes[i] / unit; ++k) {
      const CUdevResource& part = made.split.groups[next + k];
      g->parts.push_back(part);
      g->sm_count += part.sm.smCount;
    }
    next += sizes[i] / unit;
    g->requested = asked[i] ? asked[i] : g->sm_count;
    g->split = id;
    g->usable = !dry_run;
    groups.emplace_back(std::move(g));
  }
  auto rest = make_sm_state(s.device, made.split.rest, &s);
  rest->split = id;
  rest->usable = !dry_run;

  bool rounded = false;
  for (std::size_t i = 0; i < sizes.size(); ++i) rounded |= asked[i] && asked[i] != sizes[i];
  if (rounded)
    detail::log(LogLevel::warning, request + " rounded down to " + list(sizes) + " (on " + describe_device(s.device) +
                                       " " + grain.describe() + "); " + std::to_string(rest->sm_count) +
                                       " SMs are in the remainder. cucore never makes fewer groups than asked.");
  return {std::move(groups), SMResource(std::move(rest))};
}

}  // namespace cucore
