#include "handles/handles.hpp"

#include <cucore/errors.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>
#include <stdexcept>
#include <unordered_map>

#include "errors/release.hpp"
#include "handles/box_allocator.hpp"
#include "loader/driver.hpp"

namespace cucore::detail {

namespace {
// The loaded table, or null: releases never load the driver.
const DriverTable* loaded() noexcept { return g_driver.load(std::memory_order_acquire); }
}  // namespace

ContextHandle make_primary_context(CUcontext ctx, int ordinal) {
  return std::make_shared<const ContextBox>(ctx, ordinal, ContextKind::primary, Owner{});
}

ContextHandle adopt_context(CUcontext ctx, Owner owner) {
  return std::make_shared<const ContextBox>(ctx, -1, ContextKind::adopted, std::move(owner));
}

// ---- green contexts ----

namespace {
// The green contexts cucore made, by their CUcontext, while they live (never
// destroyed: boxes may go during static destruction).
struct GreenRegistry {
  std::mutex mutex;
  std::unordered_map<CUcontext, std::weak_ptr<const ContextBox>> boxes;
};
GreenRegistry& green_registry() {
  static auto* r = new GreenRegistry;
  return *r;
}
}  // namespace

ContextBox::~ContextBox() {
  if (kind != ContextKind::green || !green) return;
  const auto* t = loaded();
  if (!t) return;
  // A context current on this thread must not outlive its destruction there.
  CUcontext current = nullptr;
  if (t->cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == ctx && ctx) t->cuCtxSetCurrent(nullptr);
  if (t->cuGreenCtxDestroy) report_release(t->cuGreenCtxDestroy(green), "cuGreenCtxDestroy");
}

ContextHandle make_green_context(CUgreenCtx green, int ordinal) {
  std::shared_ptr<ContextBox> box;
  try {
    box = std::make_shared<ContextBox>(nullptr, ordinal, ContextKind::green, Owner{});
  } catch (...) {
    // No box took it yet: the green context is ours to destroy.
    if (const auto* t = loaded(); t && t->cuGreenCtxDestroy)
      report_release(t->cuGreenCtxDestroy(green), "cuGreenCtxDestroy");
    throw;
  }
  box->green = green;  // owned from here: destroyed with the box, also if what follows throws
  CUcontext ctx = nullptr;
  check(driver().cuCtxFromGreenCtx(&ctx, green), "cuCtxFromGreenCtx");
  box->ctx = ctx;
  GreenRegistry& r = green_registry();
  std::lock_guard lock(r.mutex);
  std::erase_if(r.boxes, [](const auto& entry) { return entry.second.expired(); });
  r.boxes[ctx] = box;
  return box;
}

ContextHandle find_green_context(CUcontext ctx) {
  GreenRegistry& r = green_registry();
  std::lock_guard lock(r.mutex);
  auto it = r.boxes.find(ctx);
  return it == r.boxes.end() ? nullptr : it->second.lock();
}

ContextHandle adopt_green_context(CUgreenCtx green, CUcontext ctx) {
  auto box = std::make_shared<ContextBox>(ctx, -1, ContextKind::adopted, Owner{});
  box->green = green;
  return box;
}

StreamBox::~StreamBox() {
  if (release == Release::destroy && stream)
    if (const auto* t = loaded()) report_release(t->cuStreamDestroy(stream), "cuStreamDestroy");
}

StreamHandle create_stream(const ContextHandle& ctx, unsigned flags, const int* priority) {
  // The box first: should it fail to allocate, no stream is left behind.
  auto box = make_box<StreamBox>(Release::destroy);
  box->ctx = ctx;
  const DriverTable& d = driver();
  CUstream h = nullptr;
  if (ctx->green && d.cuGreenCtxStreamCreate) {
    // The stream is the green context's whatever is current (a 12.4 driver,
    // which lacks this call, gets one from the green context made current).
    if (!(flags & CU_STREAM_NON_BLOCKING))
      throw InvalidArgumentError(
          "StreamOptions.nonblocking = false: a green context's streams are non-blocking (cuGreenCtxStreamCreate "
          "requires CU_STREAM_NON_BLOCKING)");
    check(d.cuGreenCtxStreamCreate(&h, ctx->green, flags, priority ? *priority : 0), "cuGreenCtxStreamCreate");
  } else if (priority) {
    check(d.cuStreamCreateWithPriority(&h, flags, *priority), "cuStreamCreateWithPriority");
  } else {
    check(d.cuStreamCreate(&h, flags), "cuStreamCreate");
  }
  box->stream = h;
  return box;
}

StreamHandle adopt_stream(CUstream stream, Owner owner) {
  auto box = make_box<StreamBox>(Release::none);
  box->stream = stream;
  box->owner = std::move(owner);
  return box;
}

EventBox::~EventBox() {
  if (event)
    if (const auto* t = loaded()) report_release(t->cuEventDestroy(event), "cuEventDestroy");
}

EventHandle create_event(const ContextHandle& ctx, unsigned flags) {
  auto box = make_box<EventBox>();
  box->ctx = ctx;
  box->flags = flags;
  CUevent e = nullptr;
  check(driver().cuEventCreate(&e, flags), "cuEventCreate");
  box->event = e;
  return box;
}

EventHandle open_ipc_event(const ContextHandle& ctx, const void* handle, unsigned flags) {
  auto box = make_box<EventBox>();
  box->ctx = ctx;
  box->flags = flags;
  std::memcpy(box->ipc_handle.reserved, handle, sizeof box->ipc_handle.reserved);  // the one copy of the handle
  CUevent e = nullptr;
  check(driver().cuIpcOpenEventHandle(&e, box->ipc_handle), "cuIpcOpenEventHandle");
  box->event = e;
  box->ipc_handle_known = true;  // published with the box
  return box;
}

PoolBox::~PoolBox() {
  if (release == Release::destroy && pool)
    if (const auto* t = loaded()) report_release(t->cuMemPoolDestroy(pool), "cuMemPoolDestroy");
}

PoolHandle create_pool(const CUmemPoolProps& props) {
  auto box = std::make_shared<PoolBox>(Release::destroy);
  CUmemoryPool pool = nullptr;
  check(driver().cuMemPoolCreate(&pool, &props), "cuMemPoolCreate");
  box->pool = pool;
  return box;
}

PoolHandle import_pool(int fd) {
  auto box = make_box<PoolBox>(Release::destroy);  // recycled: a process importing pools again and again mallocs none
  CUmemoryPool pool = nullptr;
  // A POSIX descriptor travels as the handle's value, not through a pointer to it.
  void* handle = reinterpret_cast<void*>(static_cast<std::intptr_t>(fd));
  check(driver().cuMemPoolImportFromShareableHandle(&pool, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
        "cuMemPoolImportFromShareableHandle");
  box->pool = pool;
  return box;
}

PoolHandle adopt_pool(CUmemoryPool pool) {
  auto box = std::make_shared<PoolBox>(Release::none);
  box->pool = pool;
  return box;
}

LibraryBox::~LibraryBox() {
  if (library)
    if (const auto* t = loaded(); t && t->cuLibraryUnload)
      report_release(t->cuLibraryUnload(library), "cuLibraryUnload");
}

LibraryHandle load_library(const void* image, const char* what) {
  auto box = std::make_shared<LibraryBox>();
  const DriverTable& d = driver();
  require(reinterpret_cast<const void*>(d.cuLibraryLoadData), 12000, "context-independent loading (cuLibraryLoadData)");
  CUlibrary lib = nullptr;
  check(d.cuLibraryLoadData(&lib, image, nullptr, nullptr, 0, nullptr, nullptr, 0), what);
  box->library = lib;
  return box;
}

}  // namespace cucore::detail
