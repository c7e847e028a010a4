#include "handles/handles.hpp"

#include <cucore/errors.hpp>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <stdexcept>
#include <unordered_map>

#include "loader/driver.hpp"

namespace cucore::detail {

namespace {
// The loaded table, or null: releases never load the driver.
const DriverTable* loaded() noexcept { return g_driver.load(std::memory_order_acquire); }

// Stream and event boxes come and go as fast as the driver makes the objects,
// so their memory is recycled per thread instead of going through malloc each
// time (which cost more than the rest of creating and destroying a Stream).
// A thread keeps at most kKeep blocks of a size; its exit returns them. Under
// AddressSanitizer it is plain operator new, so use-after-free stays visible.
template <std::size_t Size, std::size_t Align>
class Recycler {
 public:
  static void* get() {
    List& l = t_list;
    if (Node* n = l.head) {
      l.head = n->next;
      --l.count;
      return n;
    }
    return ::operator new(Size, std::align_val_t(Align));
  }
  static void put(void* p) noexcept {
    List& l = t_list;
    if (l.count >= kKeep) {
      ::operator delete(p, std::align_val_t(Align));
      return;
    }
    if (!l.reaper_armed) {
      l.reaper_armed = true;
      t_reaper.arm();
    }
    l.head = new (p) Node{l.head};
    ++l.count;
  }

 private:
  static_assert(Size >= sizeof(void*));
  static constexpr unsigned kKeep = 64;
  struct Node {
    Node* next;
  };
  // Trivially destructible, so it stays usable while the thread exits; the
  // reaper (destroyed then) empties it and stops further keeping.
  struct List {
    Node* head = nullptr;
    unsigned count = 0;
    bool reaper_armed = false;
  };
  struct Reaper {
    void arm() noexcept {}
    ~Reaper() {
      List& l = t_list;
      while (Node* n = l.head) {
        l.head = n->next;
        ::operator delete(n, std::align_val_t(Align));
      }
      l.count = kKeep;  // blocks freed from now on go straight back
    }
  };
  static thread_local List t_list;
  static thread_local Reaper t_reaper;
};
template <std::size_t Size, std::size_t Align>
thread_local typename Recycler<Size, Align>::List Recycler<Size, Align>::t_list;
template <std::size_t Size, std::size_t Align>
thread_local typename Recycler<Size, Align>::Reaper Recycler<Size, Align>::t_reaper;

// Under AddressSanitizer (GCC's macro or clang's feature test) boxes come from
// the heap, so a use after release is reported instead of hidden by reuse.
#if defined(__SANITIZE_ADDRESS__)
#define CUCORE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUCORE_ASAN 1
#endif
#endif
#ifndef CUCORE_ASAN
#define CUCORE_ASAN 0
#endif

template <typename T>
struct BoxAllocator {
  using value_type = T;
  BoxAllocator() noexcept = default;
  template <typename U>
  BoxAllocator(const BoxAllocator<U>&) noexcept {}  // NOLINT(google-explicit-constructor)
  T* allocate(std::size_t n) {
#if !CUCORE_ASAN
    if (n == 1) return static_cast<T*>(Recycler<sizeof(T), alignof(T)>::get());
#endif
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(alignof(T))));
  }
  void deallocate(T* p, std::size_t n) noexcept {
#if !CUCORE_ASAN
    if (n == 1) return Recycler<sizeof(T), alignof(T)>::put(p);
#endif
    (void)n;  // unsized: clang declares sized deallocation only with -fsized-deallocation
    ::operator delete(p, std::align_val_t(alignof(T)));
  }
  template <typename U>
  friend bool operator==(const BoxAllocator&, const BoxAllocator<U>&) noexcept {
    return true;
  }
};

template <typename Box>
std::shared_ptr<Box> make_box() {
  return std::allocate_shared<Box>(BoxAllocator<Box>());
}
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
  if (t->cuGreenCtxDestroy) t->cuGreenCtxDestroy(green);
}

ContextHandle make_green_context(CUgreenCtx green, int ordinal) {
  auto box = std::make_shared<ContextBox>(nullptr, ordinal, ContextKind::green, Owner{});
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
  if (owned)
    if (const auto* t = loaded()) t->cuStreamDestroy(stream);
}

StreamHandle create_stream(const ContextHandle& ctx, unsigned flags, const int* priority) {
  // The box first: should it fail to allocate, no stream is left behind.
  auto box = make_box<StreamBox>();
  box->ctx = ctx;
  const DriverTable& d = driver();
  CUstream h = nullptr;
  if (ctx->green && d.cuGreenCtxStreamCreate) {
    // The stream is the green context's whatever is current (a 12.4 driver,
    // which lacks this call, gets one from the green context made current).
    if (!(flags & CU_STREAM_NON_BLOCKING))
      throw std::invalid_argument(
          "StreamOptions.nonblocking = false: a green context's streams are non-blocking (cuGreenCtxStreamCreate "
          "requires CU_STREAM_NON_BLOCKING)");
    check(d.cuGreenCtxStreamCreate(&h, ctx->green, flags, priority ? *priority : 0), "cuGreenCtxStreamCreate");
  } else if (priority) {
    check(d.cuStreamCreateWithPriority(&h, flags, *priority), "cuStreamCreateWithPriority");
  } else {
    check(d.cuStreamCreate(&h, flags), "cuStreamCreate");
  }
  box->stream = h;
  box->owned = true;
  return box;
}

StreamHandle adopt_stream(CUstream stream, Owner owner) {
  auto box = make_box<StreamBox>();
  box->stream = stream;
  box->owner = std::move(owner);
  return box;
}

EventBox::~EventBox() {
  if (event)
    if (const auto* t = loaded()) t->cuEventDestroy(event);
}

EventHandle create_event(const ContextHandle& ctx, unsigned flags, const EventOptions& options) {
  auto box = make_box<EventBox>();
  box->ctx = ctx;
  box->options = options;
  CUevent e = nullptr;
  check(driver().cuEventCreate(&e, flags), "cuEventCreate");
  box->event = e;
  return box;
}

EventHandle open_ipc_event(const ContextHandle& ctx, const CUipcEventHandle& handle, const EventOptions& options) {
  auto box = make_box<EventBox>();
  box->ctx = ctx;
  box->options = options;
  CUevent e = nullptr;
  check(driver().cuIpcOpenEventHandle(&e, handle), "cuIpcOpenEventHandle");
  box->event = e;
  box->ipc_handle = handle;
  box->ipc_ready.store(true, std::memory_order_relaxed);  // published with the box
  return box;
}

PoolBox::~PoolBox() {
  if (owned)
    if (const auto* t = loaded()) t->cuMemPoolDestroy(pool);
}

PoolHandle create_pool(const CUmemPoolProps& props) {
  auto box = std::make_shared<PoolBox>();
  CUmemoryPool pool = nullptr;
  check(driver().cuMemPoolCreate(&pool, &props), "cuMemPoolCreate");
  box->pool = pool;
  box->owned = true;
  return box;
}

PoolHandle import_pool(int fd) {
  auto box = make_box<PoolBox>();  // recycled: a process importing pools again and again mallocs none
  CUmemoryPool pool = nullptr;
  // A POSIX descriptor travels as the handle's value, not through a pointer to it.
  void* handle = reinterpret_cast<void*>(static_cast<std::intptr_t>(fd));
  check(driver().cuMemPoolImportFromShareableHandle(&pool, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
        "cuMemPoolImportFromShareableHandle");
  box->pool = pool;
  box->owned = true;
  return box;
}

PoolHandle adopt_pool(CUmemoryPool pool) {
  auto box = std::make_shared<PoolBox>();
  box->pool = pool;
  return box;
}

LibraryBox::~LibraryBox() {
  if (library)
    if (const auto* t = loaded(); t && t->cuLibraryUnload) t->cuLibraryUnload(library);
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
