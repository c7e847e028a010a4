// The option table (src/options/option_fields.inc) against the aggregates it
// describes: each struct has exactly the table's fields (a field added to one
// and not the other fails to compile here), each named once (checked at run
// time), and every field the table gives a flag renders
// that flag when set, and nothing when unset.
#include <gtest/gtest.h>

#include <cucore/event.hpp>
#include <cucore/linker.hpp>
#include <cucore/memory.hpp>
#include <cucore/program.hpp>
#include <cucore/stream.hpp>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "compile/program_compile.hpp"
#include "options/option_fields.inc"

namespace cucore {
namespace {

// The number of fields of an aggregate: the most initializers it takes.
struct AnyField {
  template <typename T>
  operator T() const;  // NOLINT(google-explicit-constructor): declared only
};
template <typename T, typename... A>
constexpr std::size_t field_count() {
  if constexpr (requires { T{A{}..., AnyField{}}; })
    return field_count<T, A..., AnyField>();
  else
    return sizeof...(A);
}

#define COUNT_PROGRAM(field, ...) +1
#define COUNT_LINKER(field, ...) +1
#define COUNT_PAIR(py, cpp) +1
static_assert(field_count<ProgramOptions>() == 0 CUCORE_PROGRAM_OPTION_FIELDS(COUNT_PROGRAM),
              "ProgramOptions and CUCORE_PROGRAM_OPTION_FIELDS disagree: add the field to both");
static_assert(field_count<LinkerOptions>() == 0 CUCORE_LINKER_OPTION_FIELDS(COUNT_LINKER),
              "LinkerOptions and CUCORE_LINKER_OPTION_FIELDS disagree: add the field to both");
static_assert(field_count<StreamOptions>() == 0 CUCORE_STREAM_OPTION_FIELDS(COUNT_PAIR));
static_assert(field_count<EventOptions>() == 0 CUCORE_EVENT_OPTION_FIELDS(COUNT_PAIR));
static_assert(field_count<DeviceMemoryResourceOptions>() == 0 CUCORE_DEVICE_MEMORY_RESOURCE_OPTION_FIELDS(COUNT_PAIR));
static_assert(field_count<PinnedMemoryResourceOptions>() == 0 CUCORE_PINNED_MEMORY_RESOURCE_OPTION_FIELDS(COUNT_PAIR));
static_assert(field_count<ManagedMemoryResourceOptions>() ==
              0 CUCORE_MANAGED_MEMORY_RESOURCE_OPTION_FIELDS(COUNT_PAIR));

// Where a member lies in its struct.
template <typename T, typename M>
std::ptrdiff_t offset_in(const T& object, const M& member) {
  return reinterpret_cast<const char*>(&member) - reinterpret_cast<const char*>(&object);
}

// Each table names each member of its struct once: one entry per field, no
// two at the same offset (naming a member twice, say X(max_size, ipc_enabled),
// keeps the count and compiles, but would read one Python field into another
// field's member). The Program and Linker tables also follow the declaration
// order, as their renderings do; the others follow the Python dataclasses'.
template <typename T>
void expect_table_is_the_struct(const std::vector<std::ptrdiff_t>& offsets, const char* type, bool in_order) {
  EXPECT_EQ(offsets.size(), field_count<T>()) << type;
  for (std::size_t i = 0; i < offsets.size(); ++i) {
    EXPECT_GE(offsets[i], 0) << type << " entry " << i;
    EXPECT_LT(offsets[i], static_cast<std::ptrdiff_t>(sizeof(T))) << type << " entry " << i;
    for (std::size_t j = 0; j < i; ++j)
      EXPECT_NE(offsets[i], offsets[j]) << type << ": entries " << j << " and " << i << " name the same member";
    if (in_order && i > 0) {
      EXPECT_GT(offsets[i], offsets[i - 1]) << type << ": entry " << i << " is out of declaration order";
    }
  }
}

TEST(OptionFields, EachTableNamesEveryMemberOfItsStructOnce) {
  const ProgramOptions po;
  const LinkerOptions lo;
  const StreamOptions s;
  const EventOptions e;
  const DeviceMemoryResourceOptions d;
  const PinnedMemoryResourceOptions p;
  const ManagedMemoryResourceOptions m;
  std::vector<std::ptrdiff_t> offsets;
#define OFFSET_FIRST(field, ...) offsets.push_back(offset_in(OBJ, OBJ.field));
#define OFFSET_PAIR(py, cpp) offsets.push_back(offset_in(OBJ, OBJ.cpp));
#define OBJ po
  CUCORE_PROGRAM_OPTION_FIELDS(OFFSET_FIRST)
  expect_table_is_the_struct<ProgramOptions>(offsets, "ProgramOptions", true);
#undef OBJ
  offsets.clear();
#define OBJ lo
  CUCORE_LINKER_OPTION_FIELDS(OFFSET_FIRST)
  expect_table_is_the_struct<LinkerOptions>(offsets, "LinkerOptions", true);
#undef OBJ
  offsets.clear();
#define OBJ s
  CUCORE_STREAM_OPTION_FIELDS(OFFSET_PAIR)
  expect_table_is_the_struct<StreamOptions>(offsets, "StreamOptions", false);
#undef OBJ
  offsets.clear();
#define OBJ e
  CUCORE_EVENT_OPTION_FIELDS(OFFSET_PAIR)
  expect_table_is_the_struct<EventOptions>(offsets, "EventOptions", false);
#undef OBJ
  offsets.clear();
#define OBJ d
  CUCORE_DEVICE_MEMORY_RESOURCE_OPTION_FIELDS(OFFSET_PAIR)
  expect_table_is_the_struct<DeviceMemoryResourceOptions>(offsets, "DeviceMemoryResourceOptions", false);
#undef OBJ
  offsets.clear();
#define OBJ p
  CUCORE_PINNED_MEMORY_RESOURCE_OPTION_FIELDS(OFFSET_PAIR)
  expect_table_is_the_struct<PinnedMemoryResourceOptions>(offsets, "PinnedMemoryResourceOptions", false);
#undef OBJ
  offsets.clear();
#define OBJ m
  CUCORE_MANAGED_MEMORY_RESOURCE_OPTION_FIELDS(OFFSET_PAIR)
  expect_table_is_the_struct<ManagedMemoryResourceOptions>(offsets, "ManagedMemoryResourceOptions", false);
#undef OBJ
#undef OFFSET_PAIR
#undef OFFSET_FIRST
}

// A value that makes the field render (random where the field takes any).
void set(std::optional<bool>& f) { f = true; }
void set(std::optional<int>& f) { f = 3; }
void set(std::string& f) { f = "c++17"; }
void set(std::vector<std::string>& f) { f = {"X1", "X2"}; }
void set(std::vector<int>& f) { f = {177, 550}; }
void set(decltype(ProgramOptions::define_macro)& f) { f = {std::string("FOO"), std::pair<std::string, std::string>("BAR", "2")}; }
void set(decltype(ProgramOptions::extra_sources)& f) { f = {{"m", "x"}}; }
void set(bool& f) { f = !f; }

bool any_starts_with(const std::vector<std::string>& flags, const std::string& prefix) {
  return std::any_of(flags.begin(), flags.end(), [&](const std::string& f) { return f.rfind(prefix, 0) == 0; });
}

TEST(OptionFields, EveryProgramFieldWithAFlagRendersIt) {
  const ProgramOptions base{.arch = "sm_90", .use_toolkit_headers = false};
  const std::vector<std::string> bare = base.as_nvrtc_flags();
  EXPECT_EQ(bare, std::vector<std::string>{"-arch=sm_90"});
  int checked = 0;
#define CHECK_FIELD(field, nvrtc, flag, nvvm, nvvm_flag)                                                  \
  if (std::string(flag).size() > 0 && std::string(#field) != "arch") {                                   \
    ProgramOptions o = base;                                                                              \
    set(o.field);                                                                                         \
    if (std::string(#field) == "std") o.std = "c++17";                                                    \
    if (std::string(#field) == "ofast_compile") o.ofast_compile = "min";                                  \
    if (std::string(#field) == "use_pch") o.use_pch = "a.pch";                                            \
    const auto flags = o.as_nvrtc_flags();                                                                \
    EXPECT_TRUE(any_starts_with(flags, flag)) << #field << " did not render " << flag;                    \
    EXPECT_GT(flags.size(), bare.size()) << #field;                                                       \
    ++checked;                                                                                            \
  }
  CUCORE_PROGRAM_OPTION_FIELDS(CHECK_FIELD)
#undef CHECK_FIELD
  EXPECT_GE(checked, 50);
}

TEST(OptionFields, NvvmRefusesExactlyTheFieldsTheTableMarks) {
  const ProgramOptions base{.arch = "sm_90"};
  EXPECT_EQ(base.as_nvvm_flags(), std::vector<std::string>{"-arch=compute_90"});
  std::set<std::string> refused, expected;
#define CHECK_NVVM(field, nvrtc, flag, nvvm, nvvm_flag)                    \
  {                                                                        \
    ProgramOptions o = base;                                               \
    set(o.field);                                                          \
    if (std::string(#nvvm) == "unsupported") expected.insert(#field);      \
    for (const auto& u : o.unsupported_by_nvvm()) refused.insert(u);       \
  }
  CUCORE_PROGRAM_OPTION_FIELDS(CHECK_NVVM)
#undef CHECK_NVVM
  EXPECT_EQ(refused, expected);
  ProgramOptions lineinfo = base;
  lineinfo.lineinfo = true;
  try {
    (void)lineinfo.as_nvvm_flags();
    ADD_FAILURE() << "lineinfo was accepted for NVVM";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "The following options are not supported by NVVM backend: lineinfo");
  }
  ProgramOptions nvvm = base;
  nvvm.debug = true;
  nvvm.ftz = true;
  nvvm.prec_div = false;
  nvvm.device_code_optimize = true;
  EXPECT_EQ(nvvm.as_nvvm_flags(CodeType::ltoir),
            (std::vector<std::string>{"-arch=compute_90", "-g", "-opt=3", "-ftz=1", "-prec-div=0", "-gen-lto"}));
}

TEST(OptionFields, EveryLinkerFieldWithAFlagRendersIt) {
  const LinkerOptions base{.arch = "sm_90"};
  EXPECT_EQ(base.as_nvjitlink_flags(), std::vector<std::string>{"-arch=sm_90"});
  int checked = 0;
#define CHECK_FIELD(field, kind, flag)                                                 \
  if (std::string(flag).size() > 0 && std::string(#field) != "arch") {                \
    LinkerOptions o = base;                                                            \
    set(o.field);                                                                      \
    if (std::string(#field) == "ptx") o.link_time_optimization = true;                 \
    const auto flags = o.as_nvjitlink_flags();                                         \
    EXPECT_TRUE(any_starts_with(flags, flag)) << #field << " did not render " << flag; \
    ++checked;                                                                         \
  }
  CUCORE_LINKER_OPTION_FIELDS(CHECK_FIELD)
#undef CHECK_FIELD
  EXPECT_GE(checked, 20);
}

// A PTX program's linker options are cuda.core's translation, as the table
// marks it: each marked field carried over (time: true when a file is named),
// and every other linker field left unset.
TEST(OptionFields, PtxProgramsPassTheMarkedFieldsToTheirLinker) {
  const ProgramOptions o{.name = "p", .arch = "sm_90a", .debug = true, .lineinfo = false, .ptxas_options = {"-v"},
                         .max_register_count = 40, .ftz = true, .prec_sqrt = false, .prec_div = true, .fma = false,
                         .link_time_optimization = true, .time = "t.csv", .split_compile = 3, .no_cache = true};
  const LinkerOptions l = detail::linker_options_for_ptx(o);
  const LinkerOptions expected{.name = "p", .arch = "sm_90a", .max_register_count = 40, .time = true,
                               .link_time_optimization = true, .debug = true, .lineinfo = false, .ftz = true,
                               .prec_div = true, .prec_sqrt = false, .fma = false, .ptxas_options = {"-v"},
                               .split_compile = 3, .no_cache = true};
  int compared = 0;
#define SAME(field, kind, flag)                         EXPECT_EQ(l.field, expected.field) << #field;         ++compared;
  CUCORE_LINKER_OPTION_FIELDS(SAME)
#undef SAME
  EXPECT_EQ(compared, 22);
  EXPECT_FALSE(detail::linker_options_for_ptx(ProgramOptions{.arch = "sm_90"}).time.has_value());  // no file: no timing
}

}  // namespace
}  // namespace cucore
