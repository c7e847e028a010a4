#pragma once
// Imported IPC pointers (handles.hpp's rules). The driver does not count
// repeated imports of a pool pointer (the first free unmaps them all) and
// refuses a second import of a pinned one, so every import of one export
// payload shares one IpcMapping, unmapped exactly once when its last
// MappingHandle goes. Users are counted under the table's lock, and the last
// one unmaps and removes its entry under it too, so an importer finds either a
// live mapping or none, never one being unmapped (whose free would undo a new
// import): plain counts under the lock the import and the unmap take anyway,
// no weak references.
//
// This floor owns the table, the counts and the handles; the IPC layer, which
// knows contexts, imports the pointer and names the unmap, the mapping's
// deleter, when it maps it (src/ipc/buffer_ipc.cpp).
#include <cuda.h>

#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <type_traits>

#include "handles/handles.hpp"

namespace cucore::detail {

using IpcPayload = std::array<unsigned char, sizeof(CUmemPoolPtrExportData)>;

struct IpcMapping;
// Frees a mapped pointer; never throws (a refusal leaves it to the process's end).
using IpcUnmap = void (*)(const IpcMapping& mapping) noexcept;

// One imported pointer, fixed once made: read without the lock.
struct IpcMapping {
  IpcPayload payload{};                 // the export data it was imported from (the table's key)
  std::optional<std::array<unsigned char, 16>> pool_uuid;  // the exporting pool's, as the descriptor said
  CUdeviceptr ptr = 0;
  std::size_t extent = 0;               // the mapped allocation's size
  PoolHandle pool;                      // the mapped pool stays imported while the pointer is
  StreamHandle stream_box;              // the stream it is freed on (when cucore's)
  CUstream stream = nullptr;
  int device = -1;                      // the pool's device (-1: a pinned pool)
  IpcUnmap unmap = nullptr;             // set by the importer once `ptr` is mapped
  unsigned users = 0;                   // its handles; under the table's lock
};

// A share of a mapping: the last share unmaps it and drops its entry.
using MappingHandle = std::shared_ptr<const IpcMapping>;

// The mapping of `key`: the live one, shared, else one `import(mapping)` makes
// under the table's lock, filling every field but `payload` and `users` and
// setting `unmap` as soon as the pointer is mapped, so that should it throw
// after, what it mapped is unmapped (and the entry dropped) before the error
// reaches the caller. Call without holding the lock.
using IpcImport = void (*)(IpcMapping& mapping, void* context);
MappingHandle acquire_mapping(const IpcPayload& key, IpcImport import, void* context);

template <typename Import>
  requires std::is_invocable_v<Import&, IpcMapping&>
MappingHandle acquire_mapping(const IpcPayload& key, Import&& import) {
  return acquire_mapping(
      key, [](IpcMapping& m, void* f) { (*static_cast<std::remove_reference_t<Import>*>(f))(m); },
      static_cast<void*>(&import));
}

}  // namespace cucore::detail
