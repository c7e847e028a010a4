// Compiles through a cache see the headers they include: two projects with the
// same source keep their own headers, an edited header is recompiled, a header
// that appears earlier in the search order wins, NVRTC compiles exactly the
// contents that were keyed, and what cannot be followed is compiled uncached
// with a line saying why. Also the include scanner and the manifests alone.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cucore/errors.hpp>
#include <cucore/program.hpp>
#include <cucore/program_cache.hpp>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "hashing/hashing.hpp"
#include "cache/include_manifest.hpp"
#include "cache/program_key.hpp"
#include "common/compile_helpers.hpp"
#include "compile/include_resolver.hpp"
#include "compile/include_scan.hpp"
#include "compile/program_compile.hpp"

namespace cucore {
namespace {

namespace fs = std::filesystem;

std::string text_of(const ObjectCode& o) {
  auto b = o.code();
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

// PTX of `p[i] = VALUE_i;` shows each value as an immediate.
bool ptx_has(const ObjectCode& o, long v) { return text_of(o).find(std::to_string(v)) != std::string::npos; }

class Includes : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cucore-includes-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    // Manifests go under the cache root: keep this test's apart.
    old_xdg_ = std::getenv("XDG_CACHE_HOME") ? std::getenv("XDG_CACHE_HOME") : "";
    ::setenv("XDG_CACHE_HOME", (root_ / "xdg").c_str(), 1);
    seed_ = std::random_device{}();
    rng_.seed(seed_);
  }
  void TearDown() override {
    if (!old_cwd_.empty()) fs::current_path(old_cwd_);
    if (old_xdg_.empty())
      ::unsetenv("XDG_CACHE_HOME");
    else
      ::setenv("XDG_CACHE_HOME", old_xdg_.c_str(), 1);
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  fs::path write(const fs::path& rel, const std::string& text) {
    const fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
    return p;
  }
  // Eight digits, so that a rewrite of a header keeps its size.
  long value() { return std::uniform_int_distribution<long>(10000000, 99999999)(rng_); }
  static std::string define(const char* name, long v) {
    return "#define " + std::string(name) + " " + std::to_string(v) + "\n";
  }
  void chdir_to(const fs::path& dir) {
    if (old_cwd_.empty()) old_cwd_ = fs::current_path();
    fs::current_path(dir);
  }
  static ProgramOptions named(const fs::path& file) {
    ProgramOptions o = test::sm90();
    o.name = file.string();
    return o;
  }

  fs::path root_;
  fs::path old_cwd_;
  std::string old_xdg_;
  unsigned seed_ = 0;
  std::mt19937 rng_;
};

constexpr const char* kKernel = "#include \"config.h\"\nextern \"C\" __global__ void k(long* p) { p[0] = VALUE; }\n";

// Each kind of cache, fresh, in `dir`.
std::vector<std::pair<std::string, std::function<std::unique_ptr<ProgramCache>(const fs::path&)>>> caches() {
  return {
      {"in memory", [](const fs::path&) { return std::make_unique<InMemoryProgramCache>(); }},
      {"on disk", [](const fs::path& d) { return std::make_unique<FileStreamProgramCache>(d / "disk"); }},
      {"two levels", [](const fs::path& d) { return std::make_unique<TwoLevelProgramCache>(std::nullopt, d / "two"); }},
  };
}

TEST_F(Includes, TwoProjectsWithTheSameSourceKeepTheirOwnHeaders) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  for (const auto& [kind, make] : caches()) {
    SCOPED_TRACE(kind);
    const long va = value(), vb = value();
    const fs::path a = write(kind + "/a/k.cu", kKernel), b = write(kind + "/b/k.cu", kKernel);
    write(kind + "/a/config.h", define("VALUE", va));
    write(kind + "/b/config.h", define("VALUE", vb));
    auto cache = make(root_ / kind);
    // Named by their paths (as the CLI does)...
    ObjectCode oa = Program(kKernel, "c++", named(a)).compile(CodeType::ptx, {}, cache.get());
    ObjectCode ob = Program(kKernel, "c++", named(b)).compile(CodeType::ptx, {}, cache.get());
    EXPECT_TRUE(ptx_has(oa, va));
    EXPECT_TRUE(ptx_has(ob, vb)) << "the second project got the first one's binary";
    EXPECT_FALSE(ptx_has(ob, va));
    // ...and by a bare name, its quoted includes found in the working directory.
    for (const auto& [dir, v] : {std::pair{a.parent_path(), va}, std::pair{b.parent_path(), vb}}) {
      chdir_to(dir);
      const auto hits = cache->stats().hits;
      ObjectCode o = Program(kKernel, "c++", test::sm90()).compile(CodeType::ptx, {}, cache.get());
      EXPECT_TRUE(ptx_has(o, v)) << dir;
      EXPECT_EQ(cache->stats().hits, hits) << "a bare name in another directory hit";
      ObjectCode again = Program(kKernel, "c++", test::sm90()).compile(CodeType::ptx, {}, cache.get());
      EXPECT_TRUE(ptx_has(again, v));
      EXPECT_EQ(cache->stats().hits, hits + 1) << "the same project missed";
    }
  }
}

TEST_F(Includes, AnEditedHeaderIsRecompiledAndTheOldContentsHitAgain) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  for (const auto& [kind, make] : caches()) {
    SCOPED_TRACE(kind);
    const fs::path src = write(kind + "/k.cu", kKernel);
    const long v1 = value(), v2 = value();
    write(kind + "/config.h", define("VALUE", v1));
    auto cache = make(root_ / kind);
    Program prog(kKernel, "c++", named(src));
    EXPECT_TRUE(ptx_has(prog.compile(CodeType::ptx, {}, cache.get()), v1));
    // Rewritten at once, to the same size: within the same clock tick as the
    // first read, so only the contents can tell.
    write(kind + "/config.h", define("VALUE", v2));
    ObjectCode edited = prog.compile(CodeType::ptx, {}, cache.get());
    EXPECT_TRUE(ptx_has(edited, v2)) << "the edit was not seen";
    EXPECT_FALSE(ptx_has(edited, v1));
    const auto hits = cache->stats().hits;
    write(kind + "/config.h", define("VALUE", v1));
    EXPECT_TRUE(ptx_has(prog.compile(CodeType::ptx, {}, cache.get()), v1));
    EXPECT_EQ(cache->stats().hits, hits + 1) << "the first contents' entry was not found again";
  }
}

TEST_F(Includes, NvrtcCompilesExactlyWhatTheKeyNames) {
  // Nested quoted includes resolve from their own directory; the same name
  // from two places is two headers. The cached compile (headers handed over by
  // path) must equal NVRTC's own compile from disk.
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const long top = value(), sub = value(), lib = value();
  const std::string src =
      "#include \"b.h\"\n#include \"sub/a.h\"\n#include <lib.h>\n"
      "extern \"C\" __global__ void k(long* p) { p[0] = B_TOP; p[1] = B_SUB; p[2] = LIB; }\n";
  const fs::path file = write("p/k.cu", src);
  write("p/b.h", "#pragma once\n" + define("B_TOP", top));
  write("p/sub/a.h", "#pragma once\n#include \"b.h\"\n");
  write("p/sub/b.h", "#pragma once\n" + define("B_SUB", sub));
  write("inc/lib.h", "#pragma once\n#include \"../p/b.h\"\n" + define("LIB", lib));
  ProgramOptions o = named(file);
  o.include_path = {(root_ / "inc").string()};
  Program prog(src, "c++", o);
  InMemoryProgramCache cache;
  ObjectCode cached = prog.compile(CodeType::ptx, {}, &cache);
  ObjectCode direct = prog.compile(CodeType::ptx);
  for (long v : {top, sub, lib}) EXPECT_TRUE(ptx_has(cached, v)) << v;
  EXPECT_EQ(text_of(cached), text_of(direct));
  EXPECT_TRUE(ptx_has(prog.compile(CodeType::ptx, {}, &cache), sub));
  EXPECT_EQ(cache.stats().hits, 1u);
}

TEST_F(Includes, NvrtcIsHandedTheContentsThatWereRead) {
  // What reaches NVRTC is what was read and digested, even if the file changes
  // right after: the compile cannot store one header's binary under another's key.
  const long read = value(), later = value();
  const fs::path file = write("h/k.cu", kKernel);
  write("h/config.h", define("VALUE", read));
  Program prog(kKernel, "c++", named(file));
  detail::ResolvedIncludes r = detail::resolve_includes(kKernel, prog.options());
  ASSERT_EQ(r.unfollowable, "");
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0].first, (root_ / "h/config.h").string());
  EXPECT_NE(r.source.find("#include \"" + (root_ / "h/config.h").string() + "\""), std::string::npos) << r.source;
  write("h/config.h", define("VALUE", later));
  ObjectCode o = detail::compile_program(prog, CodeType::ptx, {}, &r);
  EXPECT_TRUE(ptx_has(o, read));
  EXPECT_FALSE(ptx_has(o, later));
}

TEST_F(Includes, AHeaderThatAppearsEarlierInTheSearchOrderWins) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const long in_inc = value(), beside = value();
  const fs::path file = write("q/k.cu", kKernel);
  write("inc/config.h", define("VALUE", in_inc));
  ProgramOptions o = named(file);
  o.include_path = {(root_ / "inc").string()};
  Program prog(kKernel, "c++", o);
  FileStreamProgramCache cache(root_ / "cache");
  EXPECT_TRUE(ptx_has(prog.compile(CodeType::ptx, {}, &cache), in_inc));
  write("q/config.h", define("VALUE", beside));  // the source's directory comes before -I
  ObjectCode o2 = prog.compile(CodeType::ptx, {}, &cache);
  EXPECT_TRUE(ptx_has(o2, beside));
  EXPECT_EQ(cache.stats().hits, 0u);
  fs::remove(root_ / "q/config.h");  // and gone again: the -I one, from the cache
  EXPECT_TRUE(ptx_has(prog.compile(CodeType::ptx, {}, &cache), in_inc));
  EXPECT_EQ(cache.stats().hits, 1u);
}

TEST_F(Includes, ADeletedHeaderFailsTheCompileRatherThanHitting) {
  const fs::path file = write("d/k.cu", kKernel);
  write("d/config.h", define("VALUE", value()));
  Program prog(kKernel, "c++", named(file));
  InMemoryProgramCache cache;
  prog.compile(CodeType::ptx, {}, &cache);
  fs::remove(root_ / "d/config.h");
  EXPECT_THROW(prog.compile(CodeType::ptx, {}, &cache), CompileError);
  EXPECT_EQ(cache.stats().hits, 0u);
}

TEST_F(Includes, PreIncludedAndAngledHeadersAreKeyedToo) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const std::string src = "#include <lib.h>\nextern \"C\" __global__ void k(long* p) { p[0] = PRE; p[1] = LIB; }\n";
  const fs::path file = write("e/k.cu", src);
  long pre = value(), lib = value();
  write("e/pre.h", define("PRE", pre));
  write("inc/lib.h", define("LIB", lib));
  ProgramOptions o = named(file);
  o.include_path = {(root_ / "inc").string()};
  o.pre_include = {"pre.h"};
  Program prog(src, "c++", o);
  InMemoryProgramCache cache;
  ObjectCode first = prog.compile(CodeType::ptx, {}, &cache);
  EXPECT_TRUE(ptx_has(first, pre) && ptx_has(first, lib));
  pre = value();
  write("e/pre.h", define("PRE", pre));
  EXPECT_TRUE(ptx_has(prog.compile(CodeType::ptx, {}, &cache), pre));
  lib = value();
  write("inc/lib.h", define("LIB", lib));
  EXPECT_TRUE(ptx_has(prog.compile(CodeType::ptx, {}, &cache), lib));
  EXPECT_EQ(cache.stats().hits, 0u);
  EXPECT_TRUE(ptx_has(prog.compile(CodeType::ptx, {}, &cache), lib));
  EXPECT_EQ(cache.stats().hits, 1u);
}

TEST_F(Includes, WhatCannotBeFollowedCompilesUncachedAndSaysWhy) {
  const long v = value();
  write("f/config.h", define("VALUE", v));
  const std::string src = "#define HEADER \"config.h\"\n#include HEADER\n"
                          "extern \"C\" __global__ void k(long* p) { p[0] = VALUE; }\n";
  const fs::path file = write("f/k.cu", src);
  Program prog(src, "c++", named(file));
  FileStreamProgramCache cache(root_ / "cache");
  for (int i = 0; i < 2; ++i) {
    ObjectCode o = prog.compile(CodeType::ptx, {}, &cache);
    EXPECT_TRUE(ptx_has(o, v));
    EXPECT_NE(o.compile_log().find("cucore: not cached: " + file.string() + ": a computed #include"),
              std::string::npos)
        << o.compile_log();
  }
  EXPECT_EQ(cache.stats().hits + cache.stats().misses, 0u);  // never looked up
  EXPECT_EQ(cache.entries().size(), 0u);
  // Options with side effects, or precompiled headers: uncached too.
  ProgramOptions timed = test::sm90();
  timed.time = (root_ / "time.txt").string();
  ObjectCode t = Program("extern \"C\" __global__ void k() {}", "c++", timed).compile(CodeType::ptx, {}, &cache);
  EXPECT_NE(t.compile_log().find("not cached: time writes a timing file"), std::string::npos) << t.compile_log();
}

TEST_F(Includes, AHeaderThatIsAFifoIsAnErrorNotAHang) {
  const fs::path file = write("g/k.cu", kKernel);
  ASSERT_EQ(::mkfifo((root_ / "g/config.h").c_str(), 0600), 0);
  const int rc = test::run_with_timeout([&] {
    InMemoryProgramCache cache;
    try {
      Program(kKernel, "c++", named(file)).compile(CodeType::ptx, {}, &cache);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what()).find((root_ / "g/config.h").string()) != std::string::npos ? 0 : 2;
    }
    return 3;
  });
  EXPECT_EQ(rc, 0) << (rc == -1 ? "hung" : "no error naming the FIFO");
}

// Without a cache NVRTC used to open the headers itself, with a blocking read:
// a FIFO hung the compile. The headers are now read by cucore either way.
TEST_F(Includes, AHeaderThatIsAFifoFailsFastWithoutACache) {
  const fs::path file = write("g/k.cu", kKernel);
  ASSERT_EQ(::mkfifo((root_ / "g/config.h").c_str(), 0600), 0);
  const int rc = test::run_with_timeout([&] {
    try {
      Program(kKernel, "c++", named(file)).compile(CodeType::ptx, {});
    } catch (const std::invalid_argument& e) {
      return std::string(e.what()) == "Program::compile: " + (root_ / "g/config.h").string() +
                                          " is not a regular file or directory (a FIFO or device?): NVRTC would "
                                          "block reading it"
                 ? 0
                 : 2;
    }
    return 3;
  });
  EXPECT_EQ(rc, 0) << (rc == -1 ? "hung" : "no error naming the FIFO");
}

// NVRTC takes a header's contents as a C string: one with a NUL was compiled
// cut short (and cached so). It is refused by path, with or without a cache,
// as a source with a NUL is.
TEST_F(Includes, AHeaderWithANulByteIsRefusedByItsPath) {
  const fs::path file = write("n/k.cu", kKernel);
  const fs::path header = write("n/config.h", std::string("#define VALUE 5\n\0#error the rest\n", 33));
  const std::string expect = "Program::compile: '" + header.string() + "' contains a NUL byte at offset 16; is it a header?";
  for (const auto& [kind, make] : caches()) {
    SCOPED_TRACE(kind);
    auto cache = make(root_ / kind);
    try {
      Program(kKernel, "c++", named(file)).compile(CodeType::ptx, {}, cache.get());
      ADD_FAILURE() << "compiled";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), expect);
    }
    EXPECT_EQ(cache->size_bytes(), 0u);  // nothing stored
  }
  try {
    Program(kKernel, "c++", named(file)).compile(CodeType::ptx, {});
    ADD_FAILURE() << "compiled";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), expect);
  }
  // The resolver says so itself, for the caches' keying.
  detail::ResolvedIncludes r = detail::resolve_includes(kKernel, named(file));
  EXPECT_EQ(r.error, expect.substr(std::string("Program::compile: ").size()));
  EXPECT_TRUE(r.headers.empty());
}

TEST_F(Includes, ToolkitHeadersAreLeftToNvrtcAndCachedAlike) {
  const std::string src =
      "#include <cuda/std/cstdint>\nextern \"C\" __global__ void k(cuda::std::uint64_t* p) { p[0] = 7; }\n";
  Program prog(src, "c++", test::sm90());
  InMemoryProgramCache cache;
  prog.compile(CodeType::cubin, {}, &cache);
  prog.compile(CodeType::cubin, {}, &cache);
  EXPECT_EQ(cache.stats().hits, 1u);
  // Nothing read beyond the source: the toolkit's headers are the toolchain's.
  detail::ResolvedIncludes r = detail::resolve_includes(src, prog.options());
  EXPECT_TRUE(r.headers.empty());
  EXPECT_EQ(r.unfollowable, "");
  EXPECT_EQ(r.source, src);  // nothing rewritten
}

TEST_F(Includes, ToolkitOnlyIncludesKeyWithoutTouchingTheDisk) {
  // Angled includes of relative names with no include_path reach only the
  // toolkit (the compiler identity covers it): nothing is read, stat'ed or
  // remembered for them, and the key is the one a full resolution gives.
  const std::string src = "#include <cuda/std/cstdint>\n#if __has_include(<cuda/std/cstddef>)\n#endif\n"
                          "extern \"C\" __global__ void k(cuda::std::uint64_t* p) { p[0] = " +
                          std::to_string(value()) + "; }\n";
  Program prog(src, "c++", test::sm90());
  FileStreamProgramCache cache(root_ / "cache");
  prog.compile(CodeType::cubin, {}, &cache);
  prog.compile(CodeType::cubin, {}, &cache);
  EXPECT_EQ(cache.stats().hits, 1u);
  // One miss in all: the first compile's quick key is the resolved one, so it
  // is not asked twice (had it differed, two misses); the second compile hits
  // on its first lookup, with no manifest to consult.
  EXPECT_EQ(cache.stats().misses, 1u);
  EXPECT_FALSE(fs::exists(root_ / "xdg" / "cucore" / "includes")) << "a manifest was written for toolkit headers";
  // A second cache, keyed through make_program_cache_key's fields alone, names the same entry.
  const auto entries = cache.entries();
  ASSERT_EQ(entries.size(), 1u);
  std::string probe_key;
  {
    std::string buf;
    detail::write_key_fields(buf, src, "c++", prog.options(), CodeType::cubin, {}, {}, &prog.nvrtc_flags());
    detail::append_search_field(buf, detail::IncludeSearch{}, false);
    detail::append_includes_field(buf, {});
    probe_key = detail::sha256(buf);
  }
  EXPECT_TRUE(cache.get(probe_key, CodeType::cubin).has_value()) << "the key differs from a full resolution's";
}

TEST_F(Includes, AngledIncludesStillFollowIncludePathsAndAbsoluteNames) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  long lib = value(), abs = value();
  write("inc/lib.h", define("LIB", lib));
  const fs::path abs_header = write("abs/v.h", define("ABS", abs));
  // An absolute name: found without any include_path, so read and keyed.
  const std::string src_abs = "#include <" + abs_header.string() +
                              ">\nextern \"C\" __global__ void k(long* p) { p[0] = ABS; }\n";
  Program prog_abs(src_abs, "c++", test::sm90());
  // A relative name along an include_path (and no pre_include).
  const std::string src_lib = "#include <lib.h>\nextern \"C\" __global__ void k(long* p) { p[0] = LIB; }\n";
  ProgramOptions o = test::sm90();
  o.include_path = {(root_ / "inc").string()};
  Program prog_lib(src_lib, "c++", o);
  InMemoryProgramCache cache;
  EXPECT_TRUE(ptx_has(prog_abs.compile(CodeType::ptx, {}, &cache), abs));
  EXPECT_TRUE(ptx_has(prog_lib.compile(CodeType::ptx, {}, &cache), lib));
  abs = value();
  write("abs/v.h", define("ABS", abs));
  lib = value();
  write("inc/lib.h", define("LIB", lib));
  EXPECT_TRUE(ptx_has(prog_abs.compile(CodeType::ptx, {}, &cache), abs)) << "an edited absolute <header> hit";
  EXPECT_TRUE(ptx_has(prog_lib.compile(CodeType::ptx, {}, &cache), lib)) << "an edited -I <header> hit";
  EXPECT_EQ(cache.stats().hits, 0u);
}

// ---------------------------------------------------------------- the scanner

TEST(IncludeScan, FindsDirectivesOutsideCommentsAndLiterals) {
  const std::string text =
      "// #include \"comment1.h\"\n"
      "/* #include \"comment2.h\"\n#include \"comment3.h\" */\n"
      "#include \"a.h\"\n"
      "  #  include <b/c.h>  // trailing\n"
      "%:include \"digraph.h\"\n"
      "#in\\\nclude \"spliced.h\"\n"
      "const char* s = \"\\n#include \\\"string.h\\\"\";\n"
      "const char* r = R\"x(\n#include \"raw.h\"\n)x\";\n"
      "int n = 1'000'000; char q = '\"';\n"
      "#include \"after_literals.h\"\n"
      "#if __has_include(<maybe.h>) && defined(__has_include)\n#endif\n"
      "x = a /* c */ # include \"not_at_line_start.h\"\n"
      "#define STR \"#include \\\"in_define.h\\\"\"\n"
      "/**/ #include \"after_comment.h\"\n";
  detail::IncludeScan scan = detail::scan_includes(text);
  EXPECT_EQ(scan.unfollowable, "");
  std::vector<std::string> names;
  for (const auto& d : scan.directives) names.push_back((d.angled ? "<" : "\"") + d.name + (d.has_include ? "?" : ""));
  EXPECT_EQ(names, (std::vector<std::string>{"\"a.h", "<b/c.h", "\"digraph.h", "\"spliced.h", "\"after_literals.h",
                                             "<maybe.h?", "\"after_comment.h"}));
  ASSERT_EQ(scan.directives.size(), 7u);
  EXPECT_EQ(scan.directives[0].line, 4u);
  EXPECT_EQ(scan.directives[3].line, 8u);  // the spliced directive's name is on line 8
  // Rewriting replaces exactly the header names.
  std::vector<std::optional<std::string>> repl(scan.directives.size());
  repl[0] = "/x/a.h";
  repl[1] = "/y/b/c.h";
  repl[3] = "/z/spliced.h";
  const std::string out = detail::rewrite_includes(text, scan.directives, repl);
  EXPECT_NE(out.find("#include \"/x/a.h\"\n"), std::string::npos);
  EXPECT_NE(out.find("#  include </y/b/c.h>  // trailing"), std::string::npos);
  EXPECT_NE(out.find("#in\\\nclude \"/z/spliced.h\""), std::string::npos);
  EXPECT_NE(out.find("R\"x(\n#include \"raw.h\"\n)x\""), std::string::npos);  // literals untouched
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), std::count(text.begin(), text.end(), '\n'));
}

TEST(IncludeScan, SplicesAnywhereOutsideNamesMapBackToTheOriginal) {
  // Directives with line splices (\\\n, \\\r\n, several in a row) in random
  // places outside their header names: each name's position, line and rewrite
  // must be the original text's.
  std::mt19937 rng(5);
  const char* splices[] = {"\\\n", "\\\r\n", "\\\n\\\n", "\\\r\n\\\n"};
  for (int t = 0; t < 300; ++t) {
    std::string text;
    std::vector<std::pair<std::string, std::size_t>> expected;  // quoted name, line
    const int n = 1 + static_cast<int>(rng() % 6);
    for (int k = 0; k < n; ++k) {
      if (rng() % 2) text += "int filler_" + std::to_string(k) + " = 1;\n";
      const std::string head = "#include ";
      for (char c : head) {
        text += c;
        if (rng() % 3 == 0) text += splices[rng() % 4];
      }
      const bool angled = rng() % 2;
      const std::string name = std::string(angled ? "<" : "\"") + "dir" + std::to_string(k) + "/h" +
                               std::to_string(rng() % 1000) + ".h" + (angled ? ">" : "\"");
      expected.emplace_back(name, static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n') + 1));
      text += name;
      if (rng() % 2) text += splices[rng() % 4];
      text += "\n";
    }
    detail::IncludeScan scan = detail::scan_includes(text);
    ASSERT_EQ(scan.unfollowable, "") << text;
    ASSERT_EQ(scan.directives.size(), expected.size()) << text;
    std::vector<std::optional<std::string>> repl;
    std::string want = text;
    for (std::size_t k = scan.directives.size(); k-- > 0;) {
      const auto& d = scan.directives[k];
      ASSERT_EQ(text.substr(d.begin, d.end - d.begin), expected[k].first) << text;
      EXPECT_EQ(d.line, expected[k].second) << text;
      want.replace(d.begin + 1, d.end - d.begin - 2, "/r" + std::to_string(k));
    }
    for (std::size_t k = 0; k < scan.directives.size(); ++k) repl.push_back("/r" + std::to_string(k));
    EXPECT_EQ(detail::rewrite_includes(text, scan.directives, repl), want);
  }
}

TEST(IncludeScan, WhatCannotBeFollowedIsSaid) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"#define H \"a.h\"\n#include H\n", "a computed #include"},
      {"#include_next <a.h>\n", "#include_next"},
      {"#import \"a.h\"\n", "#import"},
      {"#if __has_include(H)\n#endif\n", "a computed __has_include"},
      {"#if __has_include_next(<a.h>)\n#endif\n", "__has_include_next"},
      {"#include \"a\\\n.h\"\n", "broken across lines"},
      {"#include \"unterminated.h\n", "a computed #include"},
  };
  for (const auto& [text, why] : cases) {
    detail::IncludeScan scan = detail::scan_includes(text);
    EXPECT_NE(scan.unfollowable.find(why), std::string::npos) << text << " -> " << scan.unfollowable;
    EXPECT_NE(scan.unfollowable.find("(line "), std::string::npos) << scan.unfollowable;
  }
}

TEST(IncludeScan, RandomTextNeverBreaksIt) {
  std::mt19937 rng(11);
  const std::string alphabet = "#include\"<>/*\\\n 'R()x%:_ab";
  for (int t = 0; t < 2000; ++t) {
    std::string text(rng() % 300, ' ');
    for (auto& c : text) c = alphabet[rng() % alphabet.size()];
    detail::IncludeScan scan = detail::scan_includes(text);
    std::vector<std::optional<std::string>> repl(scan.directives.size(), std::string("/r"));
    const std::string out = detail::rewrite_includes(text, scan.directives, repl);
    for (const auto& d : scan.directives) {
      ASSERT_LE(d.begin, d.end);
      ASSERT_LE(d.end, text.size());
    }
    ASSERT_GE(out.size() + 2 * scan.directives.size() + text.size(), text.size());
  }
}

TEST(IncludeScan, TextsWithoutAHashFindTheSameAsTheFullLexer) {
  // scan_includes skips its lexer for texts with nothing that could start a
  // directive. Random texts without a '#' (but with "%:", __has_include and
  // line splices that can make directives without one) must give what the
  // lexer gives: the lexer runs on the same text after a line holding a null
  // directive ("#"), whose results shift by that line.
  std::mt19937 rng(31);
  const std::vector<std::string> pieces = {
      "%:include \"a.h\"\n", "%:  include <b/c.h>\n", "%\\\n:include \"s.h\"\n", "%:in\\\nclude <d.h>\n",
      "x = __has_include(<e.h>);\n", "__has_incl\\\nude(\"f.h\")\n", "__has_include_next(<g.h>)\n",
      "%:include H\n", "%:include", "%:", "%", ":", "include", " ", "\"a.h\"", "<b/c.h>", "\n", "\\\n", "(", ")",
      "x", "/*", "*/", "//", "'", "\"", "R\"(", ")\"", "int k = 5 % 3;", "_", "has_include", "\\"};
  int found = 0;
  for (int t = 0; t < 3000; ++t) {
    std::string text;
    for (auto n = rng() % 12; n-- > 0;) text += pieces[rng() % pieces.size()];
    const detail::IncludeScan fast = detail::scan_includes(text);
    const detail::IncludeScan full = detail::scan_includes("#\n" + text);
    ASSERT_EQ(fast.directives.size(), full.directives.size()) << text;
    for (std::size_t k = 0; k < fast.directives.size(); ++k) {
      const auto& a = fast.directives[k];
      const auto& b = full.directives[k];
      EXPECT_EQ(a.name, b.name) << text;
      EXPECT_EQ(a.angled, b.angled) << text;
      EXPECT_EQ(a.has_include, b.has_include) << text;
      EXPECT_EQ(a.line + 1, b.line) << text;
      if (!a.has_include) {
        EXPECT_EQ(a.begin + 2, b.begin) << text;
        EXPECT_EQ(a.end + 2, b.end) << text;
      }
    }
    EXPECT_EQ(fast.unfollowable.empty(), full.unfollowable.empty()) << text;
    found += !fast.directives.empty() || !fast.unfollowable.empty();
  }
  EXPECT_GT(found, 300) << "too few of the random texts held a directive to test anything";
}

// ---------------------------------------------------------------- manifests

TEST_F(Includes, ManifestsCheckStatsFirstAndContentsOnlyWhenNeeded) {
  const fs::path h = write("m/h.h", define("X", value()));
  const fs::path old = write("m/old.h", "old");
  const timespec long_ago[2] = {{std::time(nullptr) - 3600, 0}, {std::time(nullptr) - 3600, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, old.c_str(), long_ago, 0), 0);
  ProgramOptions o = named(root_ / "m/k.cu");
  detail::ResolvedIncludes r =
      detail::resolve_includes("#include \"h.h\"\n#include \"old.h\"\n#include \"absent.h\"\n", o);
  ASSERT_EQ(r.unfollowable, "");
  ASSERT_EQ(r.probes.size(), 3u);
  EXPECT_FALSE(r.probes[0].stamp_trusted);  // just written: its stat cannot be trusted yet
  EXPECT_FALSE(r.probes[1].stamp_trusted);  // its ctime is still new (utimensat sets it)
  EXPECT_EQ(r.probes[2].kind, detail::IncludeProbe::absent);
  EXPECT_TRUE(detail::probes_hold(r.probes));

  // A trusted stamp that matches spares reading: a wrong digest goes unnoticed.
  std::vector<detail::IncludeProbe> p = r.probes;
  p[0].stamp_trusted = true;
  p[0].digest[0] ^= 1;
  EXPECT_TRUE(detail::probes_hold(p));
  p[0].stamp_trusted = false;  // untrusted: the contents are compared
  EXPECT_FALSE(detail::probes_hold(p));
  p = r.probes;
  p[0].stamp_trusted = true;
  p[0].mtime_ns += 1;  // another stamp: the contents are compared, and match
  EXPECT_TRUE(detail::probes_hold(p));
  // A file where none was, or none where one was.
  write("m/absent.h", "now here");
  EXPECT_FALSE(detail::probes_hold(r.probes));
  fs::remove(root_ / "m/absent.h");
  fs::remove(h);
  EXPECT_FALSE(detail::probes_hold(r.probes));
}

TEST_F(Includes, ManifestsRoundTripAndRefuseAnythingElse) {
  write("n/h.h", define("X", value()));
  fs::create_directories(root_ / "n/sub");
  detail::ResolvedIncludes r = detail::resolve_includes("#include \"h.h\"\n#include \"no.h\"\n#include \"sub\"\n",
                                                        named(root_ / "n/k.cu"));
  ASSERT_EQ(r.probes.size(), 3u);
  EXPECT_EQ(r.probes[2].kind, detail::IncludeProbe::directory);
  const std::string text = detail::format_include_manifest(r.probes);
  auto back = detail::parse_include_manifest(text);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, r.probes);
  // A cut manifest is refused, or (cut at a line's end) is the probes before the cut.
  for (std::size_t cut = 0; cut < text.size(); ++cut) {
    auto part = detail::parse_include_manifest(text.substr(0, cut));
    if (!part) continue;
    ASSERT_EQ(text[cut - 1], '\n') << cut;
    ASSERT_LT(part->size(), r.probes.size());
    EXPECT_TRUE(std::equal(part->begin(), part->end(), r.probes.begin())) << cut;
  }
  for (const char* bad : {"", "cucore-include-manifest 2\n", "cucore-include-manifest 1\nX /a\n",
                          "cucore-include-manifest 1\nA relative\n", "cucore-include-manifest 1\nF 1 2 3 4 1 zz /a\n",
                          "cucore-include-manifest 1\nF 1 2 3 4 2 " /* trusted must be 0 or 1 */}) {
    EXPECT_FALSE(detail::parse_include_manifest(bad)) << bad;
  }
}

}  // namespace
}  // namespace cucore
