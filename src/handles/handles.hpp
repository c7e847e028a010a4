#pragma once
// The handle layer, as cuda.core's _cpp resource handles: each native
// resource cucore holds lives in one reference-counted box (std::make_shared:
// one allocation) that also holds shares of the boxes it depends on: a stream
// its context, an event its context, a kernel its library
// (kernel_handles.hpp), an allocation its stream (buffer_handles.hpp). A box
// releases its resource in its destructor, which runs when the last share
// goes, so after everything that depends on it has released its own: the
// public objects can be destroyed in any order.
//
// How a box releases is chosen by the function that makes it and fixed for
// the box's life: a kind (Release, ContextKind) or, for an allocation, the
// deleter of the memory resource it came from. An adopted resource's box
// releases nothing; no box has a flag that code sets later.
//
// Boxes made as often as the driver makes their objects (streams, events,
// allocations, imported pools, IPC mappings) come from make_box
// (box_allocator.hpp), so making one costs no malloc.
//
// A box may also hold an Owner: a foreign object (a Python object, a PyTorch
// stream) kept alive as long as the box and released the way its maker chose
// (the Python module's takes the GIL first).
//
// Releases never throw and never load the driver: they go through the table
// already loaded; with none (process exit, a test that put its table back)
// the resource is left to the process's end.
#include <cuda.h>

#include <atomic>
#include <memory>

namespace cucore {
struct IPCEventDescriptor;  // cucore/ipc.hpp's; an event box holds the one src/ipc/event_ipc.cpp makes
}

namespace cucore::detail {

// A foreign object kept alive with a box; type-erased.
using Owner = std::shared_ptr<const void>;

// How a box lets its resource go, fixed by the function that makes the box
// (never changed after): the maker that creates or imports the resource makes
// a destroying box, the one that adopts it a box that releases nothing.
enum class Release : unsigned char {
  none,     // made elsewhere (adopted, a view): never released by cucore
  destroy,  // made or imported by cucore: destroyed when the box goes
};

// ---- contexts ------------------------------------------------------------------

enum class ContextKind : unsigned char {
  primary,  // a device's primary context: retained once per process and kept
  adopted,  // made elsewhere (Context::from_handle): never released by cucore
  green,    // a green context cucore made: cuGreenCtxDestroy when the box goes
};

struct ContextBox {
  CUcontext ctx = nullptr;  // for a green context, the CUcontext cuCtxFromGreenCtx gives
  mutable std::atomic<int> device_ordinal{-1};  // resolved lazily for adopted contexts
  ContextKind kind = ContextKind::adopted;
  CUgreenCtx green = nullptr;  // set for green contexts (made by cucore, or adopted from a foreign stream)
  Owner owner;
  ContextBox(CUcontext c, int ordinal, ContextKind k, Owner o) noexcept
      : ctx(c), device_ordinal(ordinal), kind(k), owner(std::move(o)) {}
  ContextBox(const ContextBox&) = delete;
  ContextBox& operator=(const ContextBox&) = delete;
  ~ContextBox();
};
using ContextHandle = std::shared_ptr<const ContextBox>;

ContextHandle make_primary_context(CUcontext ctx, int ordinal);
ContextHandle adopt_context(CUcontext ctx, Owner owner = {});

// A green context made by cuGreenCtxCreate: the box owns `green` from the
// start (cuGreenCtxDestroy if anything after fails), asks for its CUcontext
// and registers it, so Context::from_handle of that CUcontext (a stream's
// cuStreamGetCtx) finds this box while it lives.
ContextHandle make_green_context(CUgreenCtx green, int ordinal);
// The live green context cucore made whose CUcontext is `ctx`, else null.
ContextHandle find_green_context(CUcontext ctx);
// A green context made elsewhere (found through a foreign stream): never destroyed by cucore.
ContextHandle adopt_green_context(CUgreenCtx green, CUcontext ctx);

// ---- streams -------------------------------------------------------------------

struct StreamBox {
  CUstream stream = nullptr;
  ContextHandle ctx;  // the context it was made in; none for adopted streams (their owner keeps it)
  Owner owner;
  const Release release;  // destroy: cuStreamDestroy when the box goes
  explicit StreamBox(Release r) noexcept : release(r) {}
  StreamBox(const StreamBox&) = delete;
  StreamBox& operator=(const StreamBox&) = delete;
  ~StreamBox();
};
using StreamHandle = std::shared_ptr<const StreamBox>;

// A new stream in `ctx`, which must be current; `priority` null: the default.
// In a green context: cuGreenCtxStreamCreate, which needs CU_STREAM_NON_BLOCKING
// (std::invalid_argument otherwise).
StreamHandle create_stream(const ContextHandle& ctx, unsigned flags, const int* priority);
// A stream made elsewhere, never destroyed by cucore; `owner` lives as long.
StreamHandle adopt_stream(CUstream stream, Owner owner);

// ---- events --------------------------------------------------------------------

struct EventBox {
  CUevent event = nullptr;
  ContextHandle ctx;
  unsigned flags = 0;  // CU_EVENT_*: what it was made (or opened) as
  // An IPC-enabled event's descriptor for other processes is fixed for the
  // event's life: made once by the first Event::shared_ipc_descriptor()
  // (src/ipc/event_ipc.cpp, under its lock), published by `ipc_ready`
  // (release) and never changed after; every copy of the Event gives that one.
  // Its handle is asked of the driver then; an opened event's is the handle it
  // was opened from (`ipc_handle_known` from the start).
  mutable std::atomic<bool> ipc_ready{false};
  mutable bool ipc_handle_known = false;  // written before the box is shared or under that lock
  mutable std::shared_ptr<const IPCEventDescriptor> ipc_descriptor;  // set once ipc_ready
  mutable CUipcEventHandle ipc_handle;  // unset until ipc_handle_known
  EventBox() noexcept {}                 // not = default, which would zero ipc_handle for every event
  EventBox(const EventBox&) = delete;
  EventBox& operator=(const EventBox&) = delete;
  ~EventBox();
};
using EventHandle = std::shared_ptr<const EventBox>;

// A new event in `ctx`, which must be current.
EventHandle create_event(const ContextHandle& ctx, unsigned flags);
// The event another process exported (cuIpcOpenEventHandle of the
// CU_IPC_HANDLE_SIZE bytes at `handle`) in `ctx`, which must be current; the
// box owns it (cuEventDestroy, as the driver requires) and keeps the handle as
// its own IPC handle. `flags` are what it behaves as (CU_EVENT_*).
EventHandle open_ipc_event(const ContextHandle& ctx, const void* handle, unsigned flags);

// ---- memory pools --------------------------------------------------------------

struct PoolBox {
  CUmemoryPool pool = nullptr;
  const Release release;  // destroy: cuMemPoolDestroy when the box goes (the driver waits for outstanding frees)
  explicit PoolBox(Release r) noexcept : release(r) {}
  PoolBox(const PoolBox&) = delete;
  PoolBox& operator=(const PoolBox&) = delete;
  ~PoolBox();
};
using PoolHandle = std::shared_ptr<const PoolBox>;

PoolHandle create_pool(const CUmemPoolProps& props);
PoolHandle adopt_pool(CUmemoryPool pool);  // a device's default pool, or one made elsewhere
// Another process's pool from its POSIX file descriptor (which stays the
// caller's); the box owns the imported pool (cuMemPoolDestroy).
PoolHandle import_pool(int fd);

// ---- libraries (loaded code) ------------------------------------------------------

struct LibraryBox {
  CUlibrary library = nullptr;
  LibraryBox() = default;
  LibraryBox(const LibraryBox&) = delete;
  LibraryBox& operator=(const LibraryBox&) = delete;
  ~LibraryBox();  // cuLibraryUnload
};
using LibraryHandle = std::shared_ptr<const LibraryBox>;

// cuLibraryLoadData of `image`; `what` names it in the error.
LibraryHandle load_library(const void* image, const char* what);

}  // namespace cucore::detail
