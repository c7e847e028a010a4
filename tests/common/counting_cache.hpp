#pragma once
// A cache that counts its puts around another (a reference): through
// Program::compile or cucore.compute's links, one put is one build. `on_put`
// runs before each put, for tests that order builds against each other.
#include <cucore/program_cache.hpp>

#include <atomic>
#include <functional>
#include <optional>
#include <string_view>

namespace cucore::test {

class CountingCache final : public ProgramCache {
 public:
  explicit CountingCache(ProgramCache& inner) : inner_(inner) {}
  using ProgramCache::put;
  std::optional<ObjectCode> get(std::string_view key) override { return inner_.get(key); }
  std::optional<ObjectCode> get(std::string_view key, CodeType type) override { return inner_.get(key, type); }
  void put(std::string_view key, const ObjectCode& code) override {
    if (on_put) on_put(key);
    ++puts;
    inner_.put(key, code);
  }
  bool erase(std::string_view key) override { return inner_.erase(key); }
  void clear() override { inner_.clear(); }
  std::size_t size_bytes() const override { return inner_.size_bytes(); }
  CacheStats stats() const override { return inner_.stats(); }
  std::atomic<int> puts{0};
  std::function<void(std::string_view)> on_put;

 private:
  ProgramCache& inner_;
};

}  // namespace cucore::test
