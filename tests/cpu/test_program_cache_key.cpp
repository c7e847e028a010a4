// make_program_cache_key: every field counts, renderings that match give one
// key, options the key cannot see are refused; plus the integrity helpers
// (checksum, structural checks) the file cache relies on.
#include <gtest/gtest.h>

#include <cucore/program.hpp>
#include <cucore/pathfinder.hpp>
#include <cucore/program_cache.hpp>

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "cache/code_format.hpp"
#include "hashing/hashing.hpp"
#include "cache/toolchain_identity.hpp"

#include "common/compile_helpers.hpp"

namespace cucore {
namespace {

const std::string& kSource = test::kSaxpyTemplate;

ProgramOptions base_options() { return test::sm90(); }

std::string key_of(const ProgramOptions& o, std::string_view code = kSource, std::string_view type = "c++",
                   CodeType target = CodeType::cubin, std::vector<std::string> names = {"saxpy<float>"},
                   std::string_view extra = {}) {
  return make_program_cache_key(code, type, o, target, names, extra);
}

TEST(ProgramCacheKey, IsA32ByteDigestAndDeterministic) {
  std::string a = key_of(base_options());
  EXPECT_EQ(a.size(), kProgramCacheKeySize);
  EXPECT_EQ(a, key_of(base_options()));
  std::string hex = program_cache_key_hex(a);
  ASSERT_EQ(hex.size(), 64u);
  for (std::size_t i = 0; i < a.size(); ++i) {
    char buf[3];
    std::snprintf(buf, sizeof buf, "%02x", static_cast<unsigned char>(a[i]));
    EXPECT_EQ(hex.substr(2 * i, 2), buf);
  }
}

// The documented layout, recomputed here: proves which fields (compiler
// identity and schema included) go in, and in what form.
TEST(ProgramCacheKey, MatchesTheDocumentedFieldLayout) {
  ProgramOptions o = base_options();
  o.name = "saxpy.cu";
  std::vector<std::string> names = {"saxpy<float>", "saxpy<double>", "saxpy<float>"};
  std::string buf;
  auto u64 = [&](std::uint64_t v) {
    for (int i = 0; i < 8; ++i) buf.push_back(static_cast<char>(v >> (8 * i)));
  };
  auto field = [&](std::string_view label, std::string_view value) {
    buf.push_back(static_cast<char>(label.size()));
    buf.append(label);
    u64(value.size());
    buf.append(value);
  };
  auto list = [&](std::string_view label, const std::vector<std::string>& items) {
    buf.push_back(static_cast<char>(label.size()));
    buf.append(label);
    u64(items.size());
    for (const auto& s : items) {
      u64(s.size());
      buf.append(s);
    }
  };
  const std::string identity = detail::nvrtc_identity();
  EXPECT_NE(identity.find("nvrtc "), std::string::npos) << identity;
  EXPECT_NE(identity.find("cuda.h "), std::string::npos) << identity;
  EXPECT_NE(identity.find("cccl "), std::string::npos) << identity;
  auto [major, minor] = nvrtc_version();
  EXPECT_EQ(identity.rfind("nvrtc " + std::to_string(major) + "." + std::to_string(minor) + ";", 0), 0u) << identity;
  field("schema", "cucore-program-cache-key-3");
  field("compiler", identity);
  field("code_type", "c++");
  field("target", "cubin");
  field("code_sha256", detail::sha256(kSource));
  // The flags as they reach NVRTC, but the toolkit's header directories as one
  // placeholder (the compiler identity names the toolkit).
  std::vector<std::string> flags = o.as_nvrtc_flags(), toolkit;
  for (const auto& d : {pathfinder::cccl_include_dir(), pathfinder::cuda_include_dir()})
    if (d) toolkit.push_back("--include-path=" + *d);
  auto at = std::search(flags.begin(), flags.end(), toolkit.begin(), toolkit.end());
  ASSERT_NE(at, flags.end());
  at = flags.erase(at, at + static_cast<std::ptrdiff_t>(toolkit.size()));
  flags.insert(at, "--include-path=<toolkit headers>");
  list("flags", flags);
  list("name_expressions", {"saxpy<double>", "saxpy<float>"});  // sorted, once each
  field("name", "saxpy.cu");
  field("extra_digest", "");
  EXPECT_EQ(make_program_cache_key(kSource, "c++", o, CodeType::cubin, names), detail::sha256(buf));
}

TEST(ProgramCacheKey, EachFieldChangesTheKey) {
  const ProgramOptions o = base_options();
  const std::string base = key_of(o);
  std::set<std::string> keys{base};
  auto distinct = [&](const std::string& k, const char* what) {
    EXPECT_TRUE(keys.insert(k).second) << what << " did not change the key";
  };
  distinct(key_of(o, kSource + " "), "code");
  distinct(key_of(o, kSource, "c++", CodeType::ptx), "target ptx");
  distinct(key_of(o, kSource, "c++", CodeType::ltoir), "target ltoir");
  distinct(key_of(o, kSource, "ptx", CodeType::cubin), "code_type");
  distinct(key_of(o, kSource, "c++", CodeType::cubin, {}), "no name expressions");
  distinct(key_of(o, kSource, "c++", CodeType::cubin, {"saxpy<float>", "saxpy<double>"}), "another name expression");
  distinct(key_of(o, kSource, "c++", CodeType::cubin, {"saxpy<float>"}, "digest-1"), "extra_digest");
  distinct(key_of(o, kSource, "c++", CodeType::cubin, {"saxpy<float>"}, "digest-2"), "another extra_digest");
  {
    ProgramOptions p = o;
    p.name = "other_name";
    distinct(key_of(p), "options.name");
  }
  // Flags: each rendered option is a different key.
  std::vector<std::pair<const char*, std::function<void(ProgramOptions&)>>> changes = {
      {"arch", [](ProgramOptions& p) { p.arch = "sm_80"; }},
      {"std", [](ProgramOptions& p) { p.std = "c++17"; }},
      {"debug", [](ProgramOptions& p) { p.debug = true; }},
      {"lineinfo", [](ProgramOptions& p) { p.lineinfo = true; }},
      {"max_register_count", [](ProgramOptions& p) { p.max_register_count = 32; }},
      {"ftz", [](ProgramOptions& p) { p.ftz = true; }},
      {"ftz=false", [](ProgramOptions& p) { p.ftz = false; }},
      {"use_fast_math", [](ProgramOptions& p) { p.use_fast_math = true; }},
      {"define_macro", [](ProgramOptions& p) { p.define_macro.emplace_back(std::string("N=1")); }},
      {"define_macro value", [](ProgramOptions& p) { p.define_macro.emplace_back(std::string("N=2")); }},
      {"undefine_macro", [](ProgramOptions& p) { p.undefine_macro.push_back("M"); }},
      {"diag_suppress", [](ProgramOptions& p) { p.diag_suppress.push_back(177); }},
      {"relocatable_device_code", [](ProgramOptions& p) { p.relocatable_device_code = true; }},
      {"use_toolkit_headers", [](ProgramOptions& p) { p.use_toolkit_headers = false; }},
  };
  for (auto& [what, change] : changes) {
    ProgramOptions p = o;
    change(p);
    distinct(key_of(p), what);
  }
}

TEST(ProgramCacheKey, RememberedCodeDigestsNeverStandForOtherCode) {
  // Many sources, some differing in one byte, keyed over and over in a random
  // order: each key must equal the one computed the first time for that source.
  std::mt19937 rng(11);
  std::vector<std::string> sources;
  for (int i = 0; i < 40; ++i) {
    std::string s = kSource + "// " + std::to_string(i % 20) + "\n";
    if (i >= 20) s[rng() % kSource.size()] ^= 1;  // near twins of the first 20
    sources.push_back(s);
  }
  std::vector<std::string> first;
  for (const auto& s : sources) first.push_back(key_of(base_options(), s));
  std::set<std::string> distinct(first.begin(), first.end());
  EXPECT_EQ(distinct.size(), sources.size());
  for (int t = 0; t < 2000; ++t) {
    std::size_t i = rng() % sources.size();
    ASSERT_EQ(key_of(base_options(), sources[i]), first[i]) << i;
  }
}

TEST(ProgramCacheKey, FieldsCannotBleedIntoEachOther) {
  // Length prefixes: moving bytes from one field to the next is a different key.
  ProgramOptions a = base_options(), b = base_options();
  a.name = "xy";
  b.name = "y";
  EXPECT_NE(make_program_cache_key("kernel_x", "c++", b, CodeType::cubin),
            make_program_cache_key("kernel_", "c++", a, CodeType::cubin));
  EXPECT_NE(key_of(a, kSource, "c++", CodeType::cubin, {"ab", "c"}), key_of(a, kSource, "c++", CodeType::cubin, {"a", "bc"}));
}

TEST(ProgramCacheKey, SpellingsThatRenderAlikeGiveOneKey) {
  const std::string base = key_of(base_options());
  ProgramOptions p = base_options();
  p.debug = false;  // switches are rendered only when true
  p.lineinfo = false;
  p.use_fast_math = false;
  EXPECT_EQ(key_of(p), base);

  ProgramOptions m1 = base_options(), m2 = base_options();
  m1.define_macro.emplace_back(std::string("N=4"));
  m2.define_macro.emplace_back(std::pair<std::string, std::string>("N", "4"));
  EXPECT_EQ(key_of(m1), key_of(m2));

  // Name expressions: order and repeats do not matter.
  EXPECT_EQ(key_of(base_options(), kSource, "c++", CodeType::cubin, {"saxpy<float>", "saxpy<double>"}),
            key_of(base_options(), kSource, "c++", CodeType::cubin, {"saxpy<double>", "saxpy<float>", "saxpy<double>"}));
}

TEST(ProgramCacheKey, OptionsReadingUnseenFilesNeedAnExtraDigest) {
  std::vector<std::pair<const char*, std::function<void(ProgramOptions&)>>> external = {
      {"include_path", [](ProgramOptions& p) { p.include_path.push_back("/opt/include"); }},
      {"pre_include", [](ProgramOptions& p) { p.pre_include.push_back("prelude.h"); }},
      {"pch", [](ProgramOptions& p) { p.pch = true; }},
      {"use_pch", [](ProgramOptions& p) { p.use_pch = "x.pch"; }},
      {"pch_dir", [](ProgramOptions& p) { p.pch_dir = "/tmp/pch"; }},
      {"name", [](ProgramOptions& p) { p.name = "src/kernel.cu"; }},
  };
  for (auto& [what, change] : external) {
    ProgramOptions p = base_options();
    change(p);
    try {
      key_of(p);
      ADD_FAILURE() << what << " was accepted without extra_digest";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("extra_digest"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
    const std::string k1 = key_of(p, kSource, "c++", CodeType::cubin, {}, "fingerprint-1");
    const std::string k2 = key_of(p, kSource, "c++", CodeType::cubin, {}, "fingerprint-2");
    EXPECT_NE(k1, k2) << what;
  }
}

// cuda.core's extra_digest=b"" is a digest (it tests `is None`): given empty,
// it keys apart from none and stands for the files the key cannot see; a given
// non-empty one keys as the string_view form (keys made before are unchanged).
TEST(ProgramCacheKey, AGivenEmptyExtraDigestIsNotNone) {
  const std::vector<std::string> names{"saxpy<float>"};
  const ProgramOptions o = base_options();
  const std::string none = make_program_cache_key(kSource, "c++", o, CodeType::cubin, names);
  const std::string empty = make_program_cache_key(kSource, "c++", o, CodeType::cubin, names, GivenExtraDigest{});
  EXPECT_NE(none, empty);
  EXPECT_EQ(none, make_program_cache_key(kSource, "c++", o, CodeType::cubin, names, std::string_view()));
  EXPECT_EQ(make_program_cache_key(kSource, "c++", o, CodeType::cubin, names, GivenExtraDigest{"fp"}),
            make_program_cache_key(kSource, "c++", o, CodeType::cubin, names, std::string_view("fp")));
  ProgramOptions with_includes = base_options();
  with_includes.include_path.push_back("/opt/include");
  EXPECT_EQ(make_program_cache_key(kSource, "c++", with_includes, CodeType::cubin, names, GivenExtraDigest{}).size(),
            kProgramCacheKeySize);
  ProgramOptions libdevice = base_options();
  libdevice.use_libdevice = true;
  EXPECT_EQ(make_program_cache_key("ir", "nvvm", libdevice, CodeType::ptx, {}, GivenExtraDigest{}).size(),
            kProgramCacheKeySize);
}

TEST(ProgramCacheKey, OptionsWithSideEffectsAreRefused) {
  std::vector<std::pair<const char*, std::function<void(ProgramOptions&)>>> effects = {
      {"create_pch", [](ProgramOptions& p) { p.create_pch = "out.pch"; }},
      {"time", [](ProgramOptions& p) { p.time = "timing.csv"; }},
      {"fdevice_time_trace", [](ProgramOptions& p) { p.fdevice_time_trace = "trace.json"; }},
  };
  for (auto& [what, change] : effects) {
    ProgramOptions p = base_options();
    change(p);
    try {
      key_of(p, kSource, "c++", CodeType::cubin, {}, "a digest does not help");
      ADD_FAILURE() << what << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  }
}

TEST(ProgramCacheKey, RejectsUnresolvedArchAndUnknownKinds) {
  ProgramOptions p;
  p.arch.clear();
  EXPECT_THROW(key_of(p), std::invalid_argument);
  EXPECT_THROW(key_of(base_options(), kSource, "fortran"), std::invalid_argument);
  EXPECT_THROW(key_of(base_options(), kSource, "c++", CodeType::fatbin), std::invalid_argument);  // not NVRTC's
}

TEST(ProgramCacheKey, ProgramOptionsResolveTheSameKeyAsTheProgram) {
  // What Program::compile(..., cache) keys on: its resolved options.
  Program prog(kSource, "c++", base_options());
  EXPECT_EQ(make_program_cache_key(prog.code(), prog.code_type(), prog.options(), CodeType::cubin),
            make_program_cache_key(kSource, "c++", base_options(), CodeType::cubin));
}

// ---------------------------------------------------------------- integrity helpers

TEST(ProgramCacheIntegrity, Sha256MatchesTheStandardVectors) {
  // FIPS 180-2 examples.
  EXPECT_EQ(detail::to_hex(detail::sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(detail::to_hex(detail::sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(detail::to_hex(detail::sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(detail::to_hex(detail::sha256(std::string(1000000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(ProgramCacheIntegrity, IncrementalSha256IsTheDigestOfTheConcatenation) {
  // FIPS 180-2's two-block message, fed in uneven pieces (one crossing the 64-byte block).
  const std::string msg = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  detail::Sha256 h;
  h.update(msg.substr(0, 3));
  h.update(msg.data() + 3, 0);
  h.update(msg.substr(3));
  EXPECT_EQ(detail::to_hex(h.digest()), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_THROW(h.update("x"), std::logic_error);  // spent
  EXPECT_EQ(detail::to_hex(detail::Sha256().digest()), detail::to_hex(detail::sha256("")));
}

TEST(ProgramCacheIntegrity, ChecksumIsXxHash64) {
  // Reference values of the xxHash64 algorithm (seed 0).
  EXPECT_EQ(detail::checksum64("", 0), 0xEF46DB3751D8E999ULL);
  EXPECT_EQ(detail::checksum64("abc", 3), 0x44BC2CF5AD770999ULL);
}

TEST(ProgramCacheIntegrity, ChecksumSeesEveryByteFlip) {
  std::mt19937_64 rng(42);
  for (std::size_t n : {1u, 7u, 31u, 32u, 33u, 100u, 4096u, 65537u}) {
    std::vector<unsigned char> data(n);
    for (auto& b : data) b = static_cast<unsigned char>(rng());
    const auto h = detail::checksum64(data.data(), n);
    for (int t = 0; t < 64; ++t) {
      auto copy = data;
      copy[rng() % n] ^= static_cast<unsigned char>(1u << (rng() % 8));
      EXPECT_NE(detail::checksum64(copy.data(), n), h) << n;
    }
    EXPECT_NE(detail::checksum64(data.data(), n - 1), h) << "truncation of " << n;
  }
}

class CompiledObjects : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    Program prog(kSource, "c++", base_options());
    cubin_ = new ObjectCode(prog.compile(CodeType::cubin, {"saxpy<float>"}));
    ptx_ = new ObjectCode(prog.compile(CodeType::ptx, {"saxpy<float>"}));
    ltoir_ = new ObjectCode(prog.compile(CodeType::ltoir, {"saxpy<float>"}));
  }
  static void TearDownTestSuite() {
    delete cubin_;
    delete ptx_;
    delete ltoir_;
  }
  static std::vector<std::byte> bytes(const ObjectCode& o) { return {o.code().begin(), o.code().end()}; }
  static std::vector<std::byte> fatbin_like(std::size_t payload, unsigned seed) {
    std::vector<std::byte> b(16 + payload);
    const std::uint32_t magic = 0xBA55ED50u;
    const std::uint16_t version = 1, header = 16;
    const std::uint64_t size = payload;
    std::memcpy(b.data(), &magic, 4);
    std::memcpy(b.data() + 4, &version, 2);
    std::memcpy(b.data() + 6, &header, 2);
    std::memcpy(b.data() + 8, &size, 8);
    std::mt19937 rng(seed);
    for (std::size_t i = 16; i < b.size(); ++i) b[i] = static_cast<std::byte>(rng());
    return b;
  }
  static inline ObjectCode* cubin_ = nullptr;
  static inline ObjectCode* ptx_ = nullptr;
  static inline ObjectCode* ltoir_ = nullptr;
};

TEST_F(CompiledObjects, RealOutputsPassTheirStructuralCheckAndNoOther) {
  struct Case {
    CodeType type;
    std::vector<std::byte> data;
  };
  std::vector<Case> cases = {{CodeType::cubin, bytes(*cubin_)},
                             {CodeType::ptx, bytes(*ptx_)},
                             {CodeType::ltoir, bytes(*ltoir_)},
                             {CodeType::fatbin, fatbin_like(3000, 1)}};
  for (const auto& c : cases) {
    EXPECT_EQ(detail::detect_code_type(c.data), c.type);
    for (const auto& other : cases)
      EXPECT_EQ(detail::structurally_valid(other.type, c.data), other.type == c.type)
          << to_string(c.type) << " checked as " << to_string(other.type);
  }
}

TEST_F(CompiledObjects, TruncatedCubinAndFatbinFailTheStructuralCheckAtEveryLength) {
  // Structure alone catches truncation of ELF and fatbin; PTX and LTO-IR rely on
  // the stored size and checksum (tested with the file cache).
  for (const auto& [type, data] :
       {std::pair<CodeType, std::vector<std::byte>>{CodeType::cubin, bytes(*cubin_)},
        {CodeType::fatbin, fatbin_like(2048, 2)}}) {
    ASSERT_TRUE(detail::structurally_valid(type, data));
    for (std::size_t n = 0; n < data.size(); ++n)
      ASSERT_FALSE(detail::structurally_valid(type, std::span(data).first(n))) << to_string(type) << " cut to " << n;
  }
}

TEST_F(CompiledObjects, RandomBytesAreNoKnownType) {
  std::mt19937 rng(7);
  for (int t = 0; t < 200; ++t) {
    std::vector<std::byte> junk(1 + rng() % 5000);
    for (auto& b : junk) b = static_cast<std::byte>(rng());
    for (CodeType type : {CodeType::cubin, CodeType::fatbin, CodeType::ltoir, CodeType::ptx})
      EXPECT_FALSE(detail::structurally_valid(type, junk)) << to_string(type);
  }
}

}  // namespace
}  // namespace cucore
