#pragma once
// The Impl of the pool-backed resources (DeviceMemoryResource,
// PinnedMemoryResource): a CUDA memory pool through its box. Allocation and
// free are stream-ordered; the pool outlives every Buffer from it (they hold
// this Impl, which holds the box). src/ipc/ shares these pools with other
// processes: a mapped pool (imported from another process) never allocates.
#include <cucore/errors.hpp>
#include <cucore/ipc.hpp>
#include <cucore/memory.hpp>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <typeinfo>

#include "handles/handles.hpp"
#include "loader/driver.hpp"
#include "runtime/stream_context.hpp"

namespace cucore::detail {

class PoolImpl final : public MemoryResource::Impl {
 public:
  using Uuid = std::array<unsigned char, 16>;
  // `mapped_from`: the descriptor another process's pool was mapped from (this
  // pool's own copy, to export it onward); closed for a pool made here.
  PoolImpl(PoolHandle pool, int device, bool ipc, bool host, FileDescriptor mapped_from = {})
      : box_(std::move(pool)), pool_(box_->pool), device_(device), ipc_(ipc), host_(host),
        mapped_from_(std::move(mapped_from)) {}
  bool mapped() const noexcept { return !mapped_from_.is_closed(); }  // another process's pool
  CUdeviceptr allocate(std::size_t size, StreamRef stream) override {
    if (mapped() || closed_.load(std::memory_order_relaxed)) [[unlikely]]
      refuse_allocation();
    StreamContextGuard guard(stream, "MemoryResource::allocate");
    CUdeviceptr p = 0;
    check(driver().cuMemAllocFromPoolAsync(&p, size, pool_, stream.handle()), "cuMemAllocFromPoolAsync");
    return p;
  }
  void deallocate(CUdeviceptr ptr, std::size_t, StreamRef stream) override {
    StreamContextGuard guard(stream, "MemoryResource::deallocate");
    check(driver().cuMemFreeAsync(ptr, stream.handle()), "cuMemFreeAsync");
  }
  bool is_device_accessible() const noexcept override { return true; }
  bool is_host_accessible() const noexcept override { return host_; }
  int device_id() const noexcept override { return host_ ? -1 : device_; }

  // Throws ClosedError naming `object` and `operation` once closed.
  void require_open(const char* object, const char* operation) const {
    if (closed_.load(std::memory_order_acquire)) [[unlikely]]
      throw_closed(object, operation);
  }
  // A pool's UUID is set once (at creation, or when a mapped pool is
  // registered: the registry refuses a second, different one), so reading it
  // takes no lock.
  std::optional<Uuid> uuid() const {
    if (!has_uuid_.load(std::memory_order_acquire)) return std::nullopt;
    return uuid_;
  }
  void set_uuid(const Uuid& uuid) {
    std::lock_guard lock(uuid_mutex_);
    if (has_uuid_.load(std::memory_order_relaxed)) return;  // the same one again
    uuid_ = uuid;
    has_uuid_.store(true, std::memory_order_release);
  }

  PoolHandle box_;
  CUmemoryPool pool_;  // box_->pool, kept here for the allocation path
  int device_;
  bool ipc_, host_;
  int numa_ = -1;  // a host pool's NUMA node, -1 where the OS places it
  // An IPC-enabled pool closed through any copy: every copy refuses it, the registry forgets it.
  std::atomic<bool> closed_{false};
  const FileDescriptor mapped_from_;
  // The handle get_allocation_handle gives: made once, kept with the pool,
  // replaced once its holder closed it (src/ipc/pool_ipc.cpp).
  mutable std::mutex handle_mutex_;
  mutable std::shared_ptr<AllocationHandle> handle_;
  // The driver refuses cuMemPoolExportPointer (CUDA_ERROR_INVALID_VALUE) on a pool that was never
  // exported as a shareable handle; a pointer exported first exports the pool once (src/ipc/pool_ipc.cpp).
  void prepare_pointer_export() const;

 private:
  [[noreturn]] void refuse_allocation() const;
  std::mutex uuid_mutex_;  // writers only
  std::atomic<bool> has_uuid_{false};
  Uuid uuid_{};
  mutable std::once_flag exported_once_;
};

// `mr`'s PoolImpl, or null when it is another kind of resource (PoolImpl is
// final: its exact type says, which costs less than a dynamic_cast).
inline PoolImpl* pool_impl(const MemoryResource& mr) noexcept {
  MemoryResource::Impl* impl = mr.impl();
  return impl && typeid(*impl) == typeid(PoolImpl) ? static_cast<PoolImpl*>(impl) : nullptr;
}

}  // namespace cucore::detail
