// InMemoryProgramCache (LRU by bytes, shared objects, thread safety) and
// Program::compile through a cache (hits run no compiler, single-flight).
#include <gtest/gtest.h>

#include <cucore/errors.hpp>
#include <cucore/program.hpp>
#include <cucore/program_cache.hpp>

#include <cstdint>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <latch>
#include <list>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "common/compile_helpers.hpp"
#include "common/counting_cache.hpp"

namespace cucore {
namespace {

const std::string& kSaxpy = test::kSaxpyTemplate;

using test::sm90;

// A self-describing payload: PTX-typed text whose header names its key and
// seed, so a reader can regenerate it and compare every byte. `size` bytes
// (for sizes above the header's).
ObjectCode payload(const std::string& key, unsigned seed, std::size_t size) {
  std::string head = std::string("// key=") + key + " seed=" + std::to_string(seed) + " size=" + std::to_string(size) +
                     "\n.target sm_90\n";
  std::string text = head;
  std::mt19937 rng(seed);
  while (text.size() + 1 < size) text.push_back(static_cast<char>('a' + rng() % 26));
  text.push_back('\0');  // PTX ends with a NUL (ObjectCode would add one)
  std::vector<std::byte> bytes(text.size());
  std::memcpy(bytes.data(), text.data(), text.size());
  return ObjectCode::from_bytes(std::move(bytes), CodeType::ptx, "payload", {{"key", key}});
}

// Empty if `o` is exactly what payload() made for `key`, else what differs.
std::string check_payload(const ObjectCode& o, const std::string& key) {
  std::string text(reinterpret_cast<const char*>(o.code().data()), o.code().size());
  unsigned seed = 0;
  std::size_t size = 0;
  char k[256] = {};
  if (std::sscanf(text.c_str(), "// key=%255s seed=%u size=%zu", k, &seed, &size) != 3) return "unparsable header";
  if (key != k) return std::string("holds key ") + k + ", asked for " + key;
  ObjectCode expect = payload(key, seed, size);
  if (o.code().size() != expect.code().size()) return "size differs";
  for (std::size_t i = 0; i < o.code().size(); ++i)
    if (o.code()[i] != expect.code()[i]) return std::string("byte ") + std::to_string(i) + " differs";
  if (o.symbol_mapping() != expect.symbol_mapping()) return "symbol mapping differs";
  return {};
}

TEST(InMemoryProgramCache, HitReturnsTheStoredObjectWithoutCopying) {
  InMemoryProgramCache cache;
  ObjectCode stored = payload("k", 1, 5000);
  cache.put("k", stored);
  auto a = cache.get("k");
  auto b = cache.get("k");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->state(), stored.state());  // one shared state: a kernel from it loads once
  EXPECT_EQ(b->state(), stored.state());
  EXPECT_EQ(a->code().data(), stored.code().data());  // the very bytes, not a copy
  EXPECT_EQ(check_payload(*a, "k"), "");
  EXPECT_FALSE(cache.get("other"));
  auto s = cache.stats();
  EXPECT_EQ(s.hits, 2u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(cache.size_bytes(), 5000u);
}

TEST(InMemoryProgramCache, LeastRecentlyReadIsEvictedFirst) {
  InMemoryProgramCache cache(300);
  cache.put("a", payload("a", 1, 100));
  cache.put("b", payload("b", 2, 100));
  cache.put("c", payload("c", 3, 100));
  ASSERT_TRUE(cache.get("a"));  // a is now the most recent; b the least
  cache.put("d", payload("d", 4, 100));
  EXPECT_FALSE(cache.get("b"));
  for (const char* k : {"a", "c", "d"}) {
    auto o = cache.get(k);
    ASSERT_TRUE(o) << k;
    EXPECT_EQ(check_payload(*o, k), "");
  }
  EXPECT_EQ(cache.stats().evictions, 1u);
  EXPECT_EQ(cache.size_bytes(), 300u);
  // Reads above left d most recent, then c, then a. A 250-byte entry needs all
  // three gone, least recent first.
  cache.put("e", payload("e", 5, 250));
  EXPECT_FALSE(cache.get("a"));
  EXPECT_FALSE(cache.get("c"));
  EXPECT_FALSE(cache.get("d"));  // 250 + 100 > 300: d goes too
  EXPECT_TRUE(cache.get("e"));
  EXPECT_EQ(cache.size_bytes(), 250u);
}

TEST(InMemoryProgramCache, EntryLargerThanTheCapIsNotStored) {
  InMemoryProgramCache cache(1000);
  cache.put("small", payload("small", 1, 500));
  cache.put("huge", payload("huge", 2, 1001));
  EXPECT_FALSE(cache.get("huge"));
  EXPECT_TRUE(cache.get("small"));  // and nothing was evicted for it
  EXPECT_EQ(cache.stats().evictions, 0u);
}

// Random operations against a reference LRU model: every step's contents,
// bytes and eviction count must agree.
TEST(InMemoryProgramCache, AgreesWithAReferenceLruModel) {
  std::mt19937 rng(1234);
  const std::size_t cap = 20000;
  InMemoryProgramCache cache(cap);
  std::list<std::pair<std::string, std::size_t>> model;  // most recent first
  std::uint64_t model_evictions = 0;
  auto model_find = [&](const std::string& k) {
    return std::find_if(model.begin(), model.end(), [&](auto& e) { return e.first == k; });
  };
  auto model_total = [&] {
    std::size_t t = 0;
    for (auto& e : model) t += e.second;
    return t;
  };
  std::map<std::string, unsigned> seeds;
  for (int step = 0; step < 3000; ++step) {
    std::string k = std::string("k") + std::to_string(rng() % 40);
    int op = static_cast<int>(rng() % 10);
    if (op < 5) {
      auto got = cache.get(k);
      auto it = model_find(k);
      ASSERT_EQ(bool(got), it != model.end()) << "step " << step << " key " << k;
      if (got) {
        ASSERT_EQ(check_payload(*got, k), "");
        ASSERT_EQ(got->code().size(), it->second);
        model.splice(model.begin(), model, it);
      }
    } else if (op < 9) {
      std::size_t size = 64 + rng() % 3000;
      unsigned seed = static_cast<unsigned>(rng());
      cache.put(k, payload(k, seed, size));
      if (auto it = model_find(k); it != model.end()) model.erase(it);
      model.emplace_front(k, size);
      while (model_total() > cap) {
        model.pop_back();
        ++model_evictions;
      }
    } else {
      bool had = cache.erase(k);
      auto it = model_find(k);
      ASSERT_EQ(had, it != model.end());
      if (it != model.end()) model.erase(it);
    }
    ASSERT_EQ(cache.size_bytes(), model_total()) << "step " << step;
    ASSERT_EQ(cache.entry_count(), model.size());
    ASSERT_EQ(cache.stats().evictions, model_evictions);
  }
}

TEST(InMemoryProgramCache, WrongTypeIsADamagedMiss) {
  InMemoryProgramCache cache;
  cache.put("k", payload("k", 1, 300));
  EXPECT_FALSE(cache.get("k", CodeType::cubin));
  EXPECT_EQ(cache.stats().errors, 1u);
  EXPECT_FALSE(cache.get("k"));  // removed
  cache.put("k", payload("k", 1, 300));
  EXPECT_TRUE(cache.get("k", CodeType::ptx));
}

TEST(InMemoryProgramCache, PutRawBytesRecognisesTheType) {
  Program prog(kSaxpy, "c++", sm90());
  ObjectCode cubin = prog.compile(CodeType::cubin, {"saxpy<float>"});
  InMemoryProgramCache cache;
  cache.put("raw", cubin.code());
  auto got = cache.get("raw");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->code_type(), CodeType::cubin);
  ASSERT_EQ(got->code().size(), cubin.code().size());
  EXPECT_EQ(std::memcmp(got->code().data(), cubin.code().data(), cubin.code().size()), 0);
  // Bytes of no known kind are kept as they are (cuda.core's caches take any
  // bytes): read back untyped, never handed to a compile as code.
  std::mt19937 rng(7);
  std::vector<std::byte> junk(100);
  for (auto& b : junk) b = static_cast<std::byte>(0x20 + rng() % 64);
  junk[0] = std::byte{0x01};  // no code type starts so
  cache.put("junk", junk);
  auto opaque = cache.get("junk");
  ASSERT_TRUE(opaque);
  EXPECT_TRUE(opaque->is_opaque());
  ASSERT_EQ(opaque->code().size(), junk.size());
  EXPECT_EQ(std::memcmp(opaque->code().data(), junk.data(), junk.size()), 0);
  EXPECT_FALSE(cache.get("junk", CodeType::cubin));
  EXPECT_TRUE(cache.get("junk")) << "a typed miss must not drop the user's entry";
  EXPECT_FALSE(cubin.is_opaque());
  EXPECT_THROW(cache.put("junk2", junk, CodeType::cubin), std::invalid_argument);
  EXPECT_THROW(cache.put("empty", ObjectCode()), std::invalid_argument);
}

TEST(InMemoryProgramCache, ConcurrentReadersAndWritersSeeWholeEntries) {
  InMemoryProgramCache cache(60000);  // small enough to evict while others read
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < 1000; ++i) {
        std::string k = std::string("k") + std::to_string(rng() % 32);
        if (rng() % 2) {
          cache.put(k, payload(k, static_cast<unsigned>(rng()), 100 + rng() % 4000));
        } else if (auto o = cache.get(k)) {
          if (!check_payload(*o, k).empty()) ++bad;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_LE(cache.size_bytes(), 60000u);
  EXPECT_GT(cache.stats().evictions, 0u);
}

// ---------------------------------------------------------------- compile through a cache

using test::CountingCache;

TEST(CompileThroughCache, HitReturnsTheStoredObjectAndCompilesNothing) {
  InMemoryProgramCache memory;
  CountingCache cache(memory);
  Program prog(kSaxpy, "c++", sm90());
  ObjectCode first = prog.compile(CodeType::cubin, {"saxpy<float>"}, &cache);
  EXPECT_EQ(cache.puts.load(), 1);
  ObjectCode second = prog.compile(CodeType::cubin, {"saxpy<float>"}, &cache);
  EXPECT_EQ(cache.puts.load(), 1);
  EXPECT_EQ(second.state(), first.state());
  EXPECT_EQ(second.symbol_mapping().at("saxpy<float>"), first.symbol_mapping().at("saxpy<float>"));
  // The cached object is what an uncached compile makes.
  ObjectCode fresh = prog.compile(CodeType::cubin, {"saxpy<float>"});
  ASSERT_EQ(fresh.code().size(), first.code().size());
  EXPECT_EQ(std::memcmp(fresh.code().data(), first.code().data(), fresh.code().size()), 0);
  // Another target or another name list is another entry.
  ObjectCode ptx = prog.compile(CodeType::ptx, {"saxpy<float>"}, &cache);
  EXPECT_EQ(ptx.code_type(), CodeType::ptx);
  prog.compile(CodeType::cubin, {"saxpy<double>"}, &cache);
  EXPECT_EQ(cache.puts.load(), 3);
  auto s = memory.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 3u);
  // No cache: plain compile.
  EXPECT_EQ(prog.compile(CodeType::cubin, {}, nullptr).code_type(), CodeType::cubin);
}

TEST(CompileThroughCache, CompileErrorsAreNotCachedAndReachEveryWaiter) {
  InMemoryProgramCache memory;
  CountingCache cache(memory);
  Program bad("__global__ void k() { this is not C++ }", "c++", sm90());
  std::latch start(4);
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      start.arrive_and_wait();
      try {
        bad.compile(CodeType::cubin, {}, &cache);
      } catch (const CompileError& e) {
        if (!e.log().empty()) ++errors;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 4);
  EXPECT_EQ(cache.puts.load(), 0);
  EXPECT_EQ(memory.entry_count(), 0u);
}

TEST(CompileThroughCache, SixteenThreadsAskingForOneKeyCompileOnce) {
  for (int round = 0; round < 2; ++round) {
    InMemoryProgramCache memory;
    CountingCache cache(memory);
    // A distinct source per round: no other cache may already hold it.
    Program prog(kSaxpy + "// round " + std::to_string(round) + "\n", "c++", sm90());
    std::latch start(16);
    std::vector<ObjectCode> results(16);
    std::vector<std::thread> threads;
    for (int i = 0; i < 16; ++i)
      threads.emplace_back([&, i] {
        start.arrive_and_wait();
        results[i] = prog.compile(CodeType::cubin, {"saxpy<float>"}, &cache);
      });
    for (auto& t : threads) t.join();
    EXPECT_EQ(cache.puts.load(), 1);
    for (const auto& r : results) {
      ASSERT_TRUE(r);
      EXPECT_EQ(r.state(), results[0].state());  // one object: its module loads once
    }
    EXPECT_EQ(memory.entry_count(), 1u);
  }
}

TEST(CompileThroughCache, DifferentKeysCompileInParallel) {
  // Key A's store waits until key B has been stored. Were compiles serialized
  // (one global lock around the flight), B could not finish and A would time out.
  InMemoryProgramCache memory;
  CountingCache cache(memory);
  Program a(kSaxpy + "// A\n", "c++", sm90());
  Program b(kSaxpy + "// B\n", "c++", sm90());
  const std::string key_b = make_program_cache_key(b.code(), b.code_type(), b.options(), CodeType::cubin);
  std::mutex m;
  std::condition_variable cv;
  bool b_stored = false, a_timed_out = false;
  std::atomic<bool> a_waiting{false};
  cache.on_put = [&](std::string_view key) {
    std::unique_lock lock(m);
    if (key == key_b) {
      b_stored = true;
      cv.notify_all();
    } else {
      a_waiting = true;
      a_timed_out = !cv.wait_for(lock, std::chrono::seconds(60), [&] { return b_stored; });
    }
  };
  std::thread ta([&] { a.compile(CodeType::cubin, {}, &cache); });
  // B starts once A is inside its flight.
  while (!a_waiting) std::this_thread::yield();
  std::thread tb([&] { b.compile(CodeType::cubin, {}, &cache); });
  ta.join();
  tb.join();
  EXPECT_FALSE(a_timed_out);
  EXPECT_EQ(cache.puts.load(), 2);
}

TEST(CompileThroughCache, TwoLevelPromotesDiskHitsSoModulesAreShared) {
  auto dir = std::filesystem::temp_directory_path() / (std::string("cucore-twolevel-") + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  Program prog(kSaxpy, "c++", sm90());
  {
    TwoLevelProgramCache writer({}, dir);
    prog.compile(CodeType::cubin, {"saxpy<float>"}, &writer);
    EXPECT_EQ(writer.stats().misses, 1u);
  }
  TwoLevelProgramCache cache({}, dir);  // a new process, as far as memory goes
  CountingCache counting(cache);
  ObjectCode a = prog.compile(CodeType::cubin, {"saxpy<float>"}, &counting);
  ObjectCode b = prog.compile(CodeType::cubin, {"saxpy<float>"}, &counting);
  EXPECT_EQ(counting.puts.load(), 0);
  EXPECT_EQ(a.state(), b.state());
  EXPECT_EQ(cache.disk().stats().hits, 1u);    // read from disk once
  EXPECT_EQ(cache.memory().stats().hits, 1u);  // then served from memory
  EXPECT_EQ(cache.stats().hits, 2u);
  EXPECT_FALSE(a.symbol_mapping().at("saxpy<float>").empty());
  EXPECT_TRUE(cache.erase(
      make_program_cache_key(prog.code(), "c++", prog.options(), CodeType::cubin, std::vector<std::string>{"saxpy<float>"})));
  EXPECT_EQ(cache.size_bytes(), 0u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cucore
