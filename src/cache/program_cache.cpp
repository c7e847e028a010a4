// ProgramCache's shared parts, InMemoryProgramCache, TwoLevelProgramCache, the
// default cache, and Program::compile through a cache (single-flight).
#include <cucore/errors.hpp>
#include <cucore/program.hpp>
#include <cucore/program_cache.hpp>

#include <cstdint>
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <functional>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/code_format.hpp"
#include "hashing/hashing.hpp"
#include "cache/include_manifest.hpp"
#include "cache/program_key.hpp"
#include "cache/single_flight.hpp"
#include "cache/toolchain_identity.hpp"
#include "compile/program_compile.hpp"

namespace cucore {

// ---------------------------------------------------------------- ProgramCache

std::optional<ObjectCode> ProgramCache::get(std::string_view key, CodeType code_type) {
  auto found = get(key);
  if (found && found->is_opaque()) return std::nullopt;  // a user's bytes: not code of a known type
  if (found && found->code_type() != code_type) {
    erase(key);
    return std::nullopt;
  }
  return found;
}

void ProgramCache::put(std::string_view key, std::span<const std::byte> code, std::optional<CodeType> code_type) {
  if (!code_type) {
    code_type = detail::detect_code_type(code);
    if (!code_type) {  // stored as they are, as cuda.core's caches store any bytes
      put(key, ObjectCode::opaque(std::vector<std::byte>(code.begin(), code.end())));
      return;
    }
  } else if (!detail::structurally_valid(*code_type, code)) {
    throw InvalidArgumentError("ProgramCache::put: the bytes are not a valid " + std::string(to_string(*code_type)));
  }
  put(key, ObjectCode::from_bytes(std::vector<std::byte>(code.begin(), code.end()), *code_type));
}

// ---------------------------------------------------------------- InMemoryProgramCache

namespace {
struct KeyHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
}  // namespace

// A hash map whose nodes are threaded on an intrusive LRU list (most recent at
// head.next): a hit is one lookup and two pointer splices, no allocation.
struct InMemoryProgramCache::Impl {
  struct Node {
    ObjectCode code;
    std::size_t bytes = 0;
    Node* prev = nullptr;
    Node* next = nullptr;
    const std::string* key = nullptr;
  };
  std::unordered_map<std::string, Node, KeyHash, std::equal_to<>> map;
  Node head;  // sentinel of the circular list
  std::size_t total = 0;
  CacheStats stats;
  mutable std::mutex mutex;

  Impl() { head.prev = head.next = &head; }

  void unlink(Node* n) {
    n->prev->next = n->next;
    n->next->prev = n->prev;
  }
  void push_front(Node* n) {
    n->next = head.next;
    n->prev = &head;
    head.next->prev = n;
    head.next = n;
  }
  void touch(Node* n) {
    if (head.next == n) return;
    unlink(n);
    push_front(n);
  }
  void remove(Node* n) {
    unlink(n);
    total -= n->bytes;
    map.erase(*n->key);
  }
  void evict(std::optional<std::size_t> max) {
    if (!max) return;
    while (total > *max && head.prev != &head) {
      remove(head.prev);
      ++stats.evictions;
    }
  }
  // Inserts or replaces; the caller holds the lock.
  Node* store(std::string_view key, const ObjectCode& code, std::optional<std::size_t> max) {
    const std::size_t bytes = code.code().size();
    auto it = map.find(key);
    if (max && bytes > *max) {
      // Too large to keep; drop a stale older value rather than serve it.
      if (it != map.end()) remove(&it->second);
      return nullptr;
    }
    Node* n;
    if (it != map.end()) {
      n = &it->second;
      total -= n->bytes;
      touch(n);
    } else {
      auto [ins, ok] = map.try_emplace(std::string(key));
      n = &ins->second;
      n->key = &ins->first;
      push_front(n);
    }
    n->code = code;
    n->bytes = bytes;
    total += bytes;
    evict(max);
    return n;
  }
};

InMemoryProgramCache::InMemoryProgramCache(std::optional<std::size_t> max_size_bytes)
    : impl_(std::make_unique<Impl>()), max_size_(max_size_bytes) {}
InMemoryProgramCache::~InMemoryProgramCache() = default;

std::optional<ObjectCode> InMemoryProgramCache::get(std::string_view key) {
  std::lock_guard lock(impl_->mutex);
  auto it = impl_->map.find(key);
  if (it == impl_->map.end()) {
    ++impl_->stats.misses;
    return std::nullopt;
  }
  impl_->touch(&it->second);
  ++impl_->stats.hits;
  return it->second.code;
}

std::optional<ObjectCode> InMemoryProgramCache::get(std::string_view key, CodeType code_type) {
  std::lock_guard lock(impl_->mutex);
  auto it = impl_->map.find(key);
  if (it == impl_->map.end()) {
    ++impl_->stats.misses;
    return std::nullopt;
  }
  if (it->second.code.is_opaque()) {  // a user's bytes: never taken for compiled code
    ++impl_->stats.misses;
    return std::nullopt;
  }
  if (it->second.code.code_type() != code_type) {
    impl_->remove(&it->second);
    ++impl_->stats.errors;
    ++impl_->stats.misses;
    return std::nullopt;
  }
  impl_->touch(&it->second);
  ++impl_->stats.hits;
  return it->second.code;
}

void InMemoryProgramCache::put(std::string_view key, const ObjectCode& code) {
  if (!code) throw InvalidArgumentError("InMemoryProgramCache::put: empty ObjectCode");
  std::lock_guard lock(impl_->mutex);
  impl_->store(key, code, max_size_);
}

ObjectCode InMemoryProgramCache::put_if_absent(std::string_view key, const ObjectCode& code) {
  if (!code) throw InvalidArgumentError("InMemoryProgramCache::put_if_absent: empty ObjectCode");
  std::lock_guard lock(impl_->mutex);
  if (auto it = impl_->map.find(key); it != impl_->map.end()) {
    impl_->touch(&it->second);
    return it->second.code;
  }
  impl_->store(key, code, max_size_);
  return code;
}

bool InMemoryProgramCache::erase(std::string_view key) {
  std::lock_guard lock(impl_->mutex);
  auto it = impl_->map.find(key);
  if (it == impl_->map.end()) return false;
  impl_->remove(&it->second);
  return true;
}

void InMemoryProgramCache::clear() {
  std::lock_guard lock(impl_->mutex);
  impl_->map.clear();
  impl_->head.prev = impl_->head.next = &impl_->head;
  impl_->total = 0;
}

std::size_t InMemoryProgramCache::size_bytes() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->total;
}

CacheStats InMemoryProgramCache::stats() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->stats;
}

std::size_t InMemoryProgramCache::entry_count() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->map.size();
}

// ---------------------------------------------------------------- TwoLevelProgramCache

struct TwoLevelProgramCache::Counters {
  std::atomic<std::uint64_t> hits{0}, misses{0};
};

TwoLevelProgramCache::TwoLevelProgramCache(std::optional<std::size_t> memory_max_bytes, std::filesystem::path dir,
                                           std::optional<std::size_t> disk_max_bytes)
    : memory_(memory_max_bytes), disk_(std::move(dir), disk_max_bytes), counters_(std::make_unique<Counters>()) {}
TwoLevelProgramCache::~TwoLevelProgramCache() = default;

std::optional<ObjectCode> TwoLevelProgramCache::lookup(std::string_view key, std::optional<CodeType> code_type) {
  auto m = code_type ? memory_.get(key, *code_type) : memory_.get(key);
  if (m) {
    ++counters_->hits;
    return m;
  }
  auto d = code_type ? disk_.get(key, *code_type) : disk_.get(key);
  if (d) {
    ++counters_->hits;
    // Two threads may both read the disk: the first promotion wins, both return
    // it, so the module is loaded once.
    return memory_.put_if_absent(key, *d);
  }
  ++counters_->misses;
  return std::nullopt;
}

std::optional<ObjectCode> TwoLevelProgramCache::get(std::string_view key) { return lookup(key, {}); }
std::optional<ObjectCode> TwoLevelProgramCache::get(std::string_view key, CodeType code_type) {
  return lookup(key, code_type);
}

void TwoLevelProgramCache::put(std::string_view key, const ObjectCode& code) {
  memory_.put(key, code);
  disk_.put(key, code);
}

bool TwoLevelProgramCache::erase(std::string_view key) {
  bool a = memory_.erase(key);
  bool b = disk_.erase(key);
  return a || b;
}

void TwoLevelProgramCache::clear() {
  memory_.clear();
  disk_.clear();
}

std::size_t TwoLevelProgramCache::size_bytes() const { return disk_.size_bytes(); }

CacheStats TwoLevelProgramCache::stats() const {
  CacheStats m = memory_.stats(), d = disk_.stats();
  return {counters_->hits.load(), counters_->misses.load(), m.evictions + d.evictions, m.errors + d.errors};
}

// ---------------------------------------------------------------- the default cache

TwoLevelProgramCache& default_two_level_program_cache() {
  static TwoLevelProgramCache* cache = [] {
    std::filesystem::path dir = FileStreamProgramCache::default_path();
    if (const char* d = std::getenv("CUCORE_PROGRAM_CACHE_DIR"); d && *d) dir = d;
    // Leaked on purpose: objects handed out may outlive static destruction.
    return new TwoLevelProgramCache(std::size_t(256) << 20, dir, std::size_t(1) << 30);
  }();
  return *cache;
}

ProgramCache& default_program_cache() { return default_two_level_program_cache(); }

// ---------------------------------------------------------------- compile through a cache

namespace {

// Single-flight: the first thread to miss a (cache, key) compiles; the others
// wait for its result. Only the table is locked, briefly; compiles of different
// keys run in parallel.
struct Flight {
  std::promise<ObjectCode> promise;
  std::shared_future<ObjectCode> result = promise.get_future().share();
};

struct FlightKey {
  const ProgramCache* cache;
  std::string key;
  bool operator==(const FlightKey&) const = default;
};
struct FlightKeyHash {
  std::size_t operator()(const FlightKey& k) const noexcept {
    return std::hash<std::string>{}(k.key) ^ (std::hash<const void*>{}(k.cache) * 31);
  }
};

std::mutex g_flights_mutex;
std::unordered_map<FlightKey, std::shared_ptr<Flight>, FlightKeyHash> g_flights;
// Bumped when a flight lands (after its put): a thread that missed before a
// flight landed and finds no flight knows to look in the cache again.
std::atomic<std::uint64_t> g_flights_landed{0};

}  // namespace

namespace detail {

std::uint64_t flights_landed() noexcept { return g_flights_landed.load(std::memory_order_acquire); }

ObjectCode single_flight(ProgramCache& cache, const std::string& key, CodeType target, std::uint64_t landed_before,
                         const std::function<ObjectCode(std::string& key)>& make) {
  FlightKey fk{&cache, key};
  std::shared_ptr<Flight> flight;
  {
    std::unique_lock lock(g_flights_mutex);
    if (auto it = g_flights.find(fk); it != g_flights.end()) {
      auto result = it->second->result;
      lock.unlock();
      return result.get();  // the leader's object, or its exception
    }
    if (g_flights_landed.load(std::memory_order_acquire) != landed_before) {
      // A flight landed since our miss: it may have been this key's.
      lock.unlock();
      if (auto hit = cache.get(key, target)) return std::move(*hit);
      lock.lock();
      if (auto it = g_flights.find(fk); it != g_flights.end()) {
        auto result = it->second->result;
        lock.unlock();
        return result.get();
      }
    }
    flight = std::make_shared<Flight>();
    g_flights.emplace(fk, flight);
  }

  auto land = [&] {
    std::lock_guard lock(g_flights_mutex);
    g_flights_landed.fetch_add(1, std::memory_order_acq_rel);
    g_flights.erase(fk);
  };
  try {
    std::string stored = key;
    ObjectCode result = make(stored);
    flight->promise.set_value(result);
    land();
    return result;
  } catch (...) {
    flight->promise.set_exception(std::current_exception());
    land();
    throw;
  }
}

}  // namespace detail

namespace {

// The result of a compile that could not go through the cache, with a line in
// its log saying why.
ObjectCode uncached(const Program& program, CodeType target, const std::vector<std::string>& names,
                    const std::string& why) {
  ObjectCode o = detail::compile_program(program, target, names, nullptr);
  std::string log = o.compile_log();
  if (!log.empty()) log += '\n';
  log += "cucore: not cached: " + why;
  auto bytes = o.code();
  return ObjectCode::from_bytes({bytes.begin(), bytes.end()}, o.code_type(), o.name(), o.symbol_mapping(),
                                std::move(log));
}

// Why a compile of this program cannot be cached, or "".
std::string uncacheable(const Program& program) {
  const ProgramOptions& o = program.options();
  // libdevice is the toolkit's file, which the key names by libNVVM's identity.
  if (program.code_type() != "c++") return {};
  // Side effects a hit would skip.
  if (!o.create_pch.empty()) return "create_pch writes a file, which a cache hit would not";
  if (!o.time.empty()) return "time writes a timing file, which a cache hit would not";
  if (!o.fdevice_time_trace.empty()) return "fdevice_time_trace writes a trace, which a cache hit would not";
  // Inputs nobody can follow: NVRTC's own precompiled headers.
  if (o.pch.value_or(false) || !o.use_pch.empty() || !o.pch_dir.empty())
    return "precompiled headers (pch, use_pch, pch_dir) are files the key cannot see";
  return {};
}

// How one compile is keyed: the key, and (when its includes were read) what
// NVRTC must be handed so that it compiles exactly what was keyed.
struct Keyed {
  std::string key;
  std::optional<detail::ResolvedIncludes> includes;
  std::string unfollowable;  // non-empty: compile without the cache, for this reason
};

class Keying {
 public:
  Keying(const Program& p, CodeType target, const std::vector<std::string>& names)
      : program_(p), target_(target), names_(names) {
    if (p.code_type() == "c++") {
      const detail::IncludeScan& scan = detail::code_includes(p.code());
      unfollowable_ = scan.unfollowable.empty() ? std::string() : p.options().name + ": " + scan.unfollowable;
      follows_ = !scan.directives.empty() || !p.options().pre_include.empty();
      // <name> is looked for along the include_path, then in the toolkit's
      // directories, which the compiler identity covers: with no include_path
      // (nor pre_include), angled includes of relative names find nothing to
      // read, so there is nothing to stat or remember either. Generated code
      // that includes only CCCL (cucore.compute's) keys without touching the disk.
      // (Were this ever misjudged, the quick key would only miss: an entry is
      // stored under it only when resolving found nothing to read.)
      toolkit_only_ = follows_ && p.options().include_path.empty() && p.options().pre_include.empty() &&
                      std::all_of(scan.directives.begin(), scan.directives.end(), [](const detail::IncludeDirective& d) {
                        return d.angled && !d.name.starts_with('/');  // absolute (POSIX), as the resolver tells
                      });
    }
  }

  const std::string& unfollowable() const { return unfollowable_; }

  // The key from what is remembered of the headers (their manifest, its probes
  // checked by stat), or std::nullopt when the headers must be read.
  std::optional<std::string> quick_key() {
    fields();
    if (!follows_) return key_from(nullptr);
    if (toolkit_only_) return key_from(&kNoProbes);
    auto probes = detail::load_include_manifest(manifest_key());
    if (!probes || !detail::probes_hold(*probes)) return std::nullopt;
    return key_from(&*probes);
  }

  // Reads and follows the includes; the key of what was read.
  Keyed full_key() {
    Keyed k;
    fields();
    if (!follows_) {
      k.key = key_from(nullptr);
      return k;
    }
    k.includes = detail::resolve_includes(program_.code(), program_.options());
    if (!k.includes->error.empty()) throw InvalidArgumentError("Program::compile: " + k.includes->error);
    if (!k.includes->unfollowable.empty()) {
      k.unfollowable = k.includes->unfollowable;
      return k;
    }
    k.key = key_from(&k.includes->probes);
    if (!toolkit_only_) detail::store_include_manifest(manifest_key(), k.includes->probes);
    return k;
  }

  // After a compile: the key again if the compiler identity turned out to be
  // other than the memo said (the entry then goes under the corrected key).
  std::optional<std::string> corrected(const Keyed& k) {
    if (program_.code_type() != "c++" || !detail::refresh_nvrtc_identity()) return std::nullopt;
    fields_.clear();
    fields();
    if (k.includes && !toolkit_only_) detail::store_include_manifest(manifest_key(), k.includes->probes);
    return key_from(k.includes ? &k.includes->probes : nullptr);
  }

 private:
  void fields() {
    if (fields_.empty())
      detail::write_key_fields(fields_, program_.code(), program_.code_type(), program_.options(), target_, names_,
                               {}, program_.code_type() == "c++" ? &program_.nvrtc_flags() : nullptr);
  }
  // Without includes to follow and with no include_path, the key is exactly
  // make_program_cache_key's, so either names the same entry.
  std::string key_from(const std::vector<detail::IncludeProbe>* probes) {
    if (!follows_ && program_.options().include_path.empty()) return detail::sha256(fields_);
    std::string buf = fields_;
    detail::append_search_field(buf, search(), false);
    if (probes) detail::append_includes_field(buf, *probes);
    return detail::sha256(buf);
  }
  std::string manifest_key() {
    std::string buf = fields_;
    buf += "include-manifest";
    detail::append_search_field(buf, search(), true);
    return detail::sha256(buf);
  }
  const detail::IncludeSearch& search() {
    // Toolkit-only: the key's search field lists the include_path alone, empty
    // here; finding the working directory and the toolkit would cost a warm hit.
    if (!search_) search_ = toolkit_only_ ? detail::IncludeSearch{} : detail::IncludeSearch::of(program_.options());
    return *search_;
  }
  static inline const std::vector<detail::IncludeProbe> kNoProbes{};

  const Program& program_;
  CodeType target_;
  const std::vector<std::string>& names_;
  bool follows_ = false;
  bool toolkit_only_ = false;
  std::string unfollowable_;
  std::string fields_;
  std::optional<detail::IncludeSearch> search_;
};

}  // namespace

namespace {
// Program::compile(target, names, cache) comes here: compile/ stands below the
// cache and reaches it only through this registration.
ObjectCode compile_through_cache(const Program& self, CodeType target, std::vector<std::string> name_expressions,
                                 ProgramCache& cache_ref) {
  ProgramCache* const cache = &cache_ref;
  if (std::string why = uncacheable(self); !why.empty()) return uncached(self, target, name_expressions, why);
  Keying keying(self, target, name_expressions);
  if (!keying.unfollowable().empty()) return uncached(self, target, name_expressions, keying.unfollowable());

  const std::uint64_t landed_before = detail::flights_landed();
  const std::optional<std::string> quick = keying.quick_key();
  if (quick)
    if (auto hit = cache->get(*quick, target)) return std::move(*hit);

  // The headers are read now (unless there are none), so the compile gets
  // exactly what the key names.
  Keyed keyed = keying.full_key();
  if (!keyed.unfollowable.empty()) return uncached(self, target, name_expressions, keyed.unfollowable);
  std::string& key = keyed.key;
  // The manifest was stale, but the headers may match an entry still (a key
  // already asked for, as a toolkit-only compile's, is not asked twice).
  if (keyed.includes && quick != key)
    if (auto hit = cache->get(key, target)) return std::move(*hit);

  return detail::single_flight(*cache, key, target, landed_before, [&](std::string& k) {
    ObjectCode result = detail::compile_program(self, target, name_expressions,
                                                keyed.includes ? &*keyed.includes : nullptr);
    // The key named the compiler from a memo; now that NVRTC is loaded, make
    // sure it named the one that compiled (else store under the right key).
    if (auto again = keying.corrected(keyed)) k = std::move(*again);
    if (auto* memory = dynamic_cast<InMemoryProgramCache*>(cache)) return memory->put_if_absent(k, result);
    cache->put(k, result);
    return result;
  });
}

const bool g_registered = (detail::set_compile_through_cache(compile_through_cache), true);
}  // namespace

}  // namespace cucore
