// The table of imported IPC pointers (ipc_handles.hpp).
#include "handles/ipc_handles.hpp"

#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "handles/box_allocator.hpp"

namespace cucore::detail {
namespace {

struct Table {
  using Map = std::map<IpcPayload, IpcMapping>;
  std::mutex mutex;
  Map entries;
  // Nodes of entries gone, for the next imports: a steady import/unmap cycle allocates no node.
  static constexpr std::size_t kSpareNodes = 16;
  std::vector<Map::node_type> spare;
  Table() { spare.reserve(kSpareNodes); }

  // A fresh entry for `key` (not in); under the lock.
  Map::iterator add(const IpcPayload& key) {
    if (spare.empty()) return entries.try_emplace(key).first;
    Map::node_type node = std::move(spare.back());
    spare.pop_back();
    node.key() = key;
    node.mapped() = IpcMapping{};  // a recycled node keeps its last one's fields
    return entries.insert(std::move(node)).position;
  }
  // Drops `it`, moving out the shares it held so that the caller lets them go after the lock.
  void drop(Map::iterator it, PoolHandle& pool, StreamHandle& stream) noexcept {
    pool = std::move(it->second.pool);
    stream = std::move(it->second.stream_box);
    Map::node_type node = entries.extract(it);
    if (spare.size() < kSpareNodes) spare.push_back(std::move(node));  // reserved: never allocates
  }
};
Table& table() {
  static auto* t = new Table;  // never destroyed: Buffers may go during static destruction
  return *t;
}

// The deleter of every MappingHandle.
struct ReleaseMapping {
  void operator()(const IpcMapping* m) const noexcept {
    Table& t = table();
    PoolHandle pool;  // the shares the entry held, let go after the lock (declared before it)
    StreamHandle stream;
    std::lock_guard lock(t.mutex);
    auto it = t.entries.find(m->payload);
    if (--it->second.users) return;
    if (it->second.unmap) it->second.unmap(it->second);
    t.drop(it, pool, stream);
  }
};

}  // namespace

MappingHandle acquire_mapping(const IpcPayload& key, IpcImport import, void* context) {
  Table& t = table();
  const IpcMapping* mapping = nullptr;
  {
    PoolHandle pool;  // a failed import's shares, let go after the lock
    StreamHandle stream;
    std::lock_guard lock(t.mutex);
    if (auto it = t.entries.find(key); it != t.entries.end()) {
      ++it->second.users;
      mapping = &it->second;
    } else {
      // The entry first (it may allocate), so that nothing can fail between
      // the import and the entry owning what it mapped. No one sees it without
      // users: the lock is held throughout.
      const auto entry = t.add(key);
      IpcMapping& m = entry->second;
      m.payload = key;
      try {
        import(m, context);
      } catch (...) {
        if (m.unmap) m.unmap(m);
        t.drop(entry, pool, stream);
        throw;
      }
      m.users = 1;
      mapping = &m;
    }
  }
  // Outside the lock: should the share's count fail to allocate, the
  // constructor hands the mapping to ReleaseMapping, which gives the use back.
  return MappingHandle(mapping, ReleaseMapping{}, BoxAllocator<IpcMapping>{});
}

}  // namespace cucore::detail
