#pragma once
// Memory resources, shaped like RMM's: a MemoryResource is a copyable handle to
// shared state (its Impl; a pool's Impl holds the pool's box); copies allocate
// from the same pool, and every Buffer keeps the resource it came from alive.
// Adaptors (adaptors.hpp) wrap any resource.
#include <cuda.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <span>
#include <vector>

#include <cucore/stream.hpp>

namespace cucore {

class AllocationHandle;
class Buffer;
class Device;
class Stream;

class MemoryResource {
 public:
  // What a resource implements. cucore's resources and adaptors are Impls;
  // a user-defined allocator derives from Impl and is wrapped with
  // MemoryResource(std::make_shared<MyImpl>(...)).
  class Impl {
   public:
    virtual ~Impl() = default;
    virtual CUdeviceptr allocate(std::size_t size, StreamRef stream) = 0;
    virtual void deallocate(CUdeviceptr ptr, std::size_t size, StreamRef stream) = 0;
    virtual bool is_device_accessible() const noexcept = 0;
    virtual bool is_host_accessible() const noexcept = 0;
    virtual int device_id() const noexcept = 0;  // -1 when not tied to a device
    virtual bool is_managed() const noexcept { return false; }  // unified (managed) memory
    // Whether is_managed() holds for every allocation, so that a Buffer's
    // DLPack device (dlpack_device_of) needs no driver call. False for a
    // resource that may hand out managed memory without saying so (one
    // written in Python): the driver is asked, as Buffer::is_managed does.
    virtual bool reports_memory_kind() const noexcept { return true; }

    // A slot for the object a language binding presents this resource as
    // (the Python module keeps the address of its face's MemoryResource here
    // and finds the live face again through nanobind's instance table, so
    // that buffer.memory_resource is the object it came from); cucore never
    // reads it.
    const void* face() const noexcept { return face_.load(std::memory_order_relaxed); }
    void set_face(const void* face) const noexcept { face_.store(face, std::memory_order_relaxed); }

   private:
    mutable std::atomic<const void*> face_{nullptr};
  };

  MemoryResource() noexcept = default;  // empty: allocating throws
  explicit MemoryResource(std::shared_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}

  // Stream-ordered: the memory is usable by work queued on `stream` after this
  // call; the Buffer frees it on the same stream unless told otherwise. Given a
  // Stream, the Buffer keeps a share of it, so the Stream may go first; given
  // a StreamRef, the stream must outlive the Buffer (the default streams do).
  Buffer allocate(std::size_t size, StreamRef stream) const;
  Buffer allocate(std::size_t size, const Stream& stream) const;
  // `count` elements of T (count * sizeof(T) bytes; a product beyond size_t
  // is std::overflow_error): mr.allocate<float>(n, stream).as<float>() views
  // them. Defined in buffer.hpp, which a caller includes to use the Buffer.
  template <typename T>
  Buffer allocate(std::size_t count, StreamRef stream) const;
  template <typename T>
  Buffer allocate(std::size_t count, const Stream& stream) const;
  void deallocate(CUdeviceptr ptr, std::size_t size, StreamRef stream) const;

  bool is_device_accessible() const;
  bool is_host_accessible() const;
  bool is_managed() const;
  int device_id() const;

  explicit operator bool() const noexcept { return impl_ != nullptr; }
  Impl* impl() const noexcept { return impl_.get(); }
  friend bool operator==(const MemoryResource& a, const MemoryResource& b) noexcept { return a.impl_ == b.impl_; }

 protected:
  friend class Buffer;  // its box holds the resource's state, type-erased (buffer_handles.hpp)
  std::shared_ptr<Impl> impl_;
};

struct DeviceMemoryResourceOptions {
  std::size_t max_size = 0;  // 0: no cap beyond the device's memory
  bool ipc_enabled = false;  // pool exportable to other processes (POSIX file descriptors)
};

// cuMemPoolGetAttribute figures, in bytes.
struct MemoryPoolAttributes {
  std::uint64_t reserved_mem_current = 0;
  std::uint64_t reserved_mem_high = 0;
  std::uint64_t used_mem_current = 0;
  std::uint64_t used_mem_high = 0;
  std::uint64_t release_threshold = 0;
  // The pool's reuse policies (CU_MEMPOOL_ATTR_REUSE_*).
  bool reuse_follow_event_dependencies = false;
  bool reuse_allow_opportunistic = false;
  bool reuse_allow_internal_dependencies = false;
};

// Stream-ordered device memory from a CUDA memory pool: the device's current
// pool (no options) or a pool of its own. The release threshold is raised so
// freed memory is kept for reuse instead of returned to the OS at each sync.
class DeviceMemoryResource : public MemoryResource {
 public:
  explicit DeviceMemoryResource(const Device& device);
  explicit DeviceMemoryResource(int device_id);
  DeviceMemoryResource(const Device& device, const DeviceMemoryResourceOptions& options);
  DeviceMemoryResource(int device_id, const DeviceMemoryResourceOptions& options);
  // Adopts an existing pool (not destroyed by cucore).
  static DeviceMemoryResource from_handle(CUmemoryPool pool, int device_id);

  CUmemoryPool handle() const noexcept;  // null once closed
  MemoryPoolAttributes attributes() const;
  bool is_ipc_enabled() const noexcept;
  bool owns_pool() const noexcept;  // false for the device's default pool and adopted pools
  void trim_to(std::size_t min_bytes_to_keep) const;
  // Drops this resource's share of a pool it owns (the pool goes once the
  // Buffers from it are freed); no effect on a pool it does not own, as in
  // cuda.core. Idempotent.
  void close() noexcept;

  // Peer access: the other devices that may use this pool's allocations, read
  // from the driver each time (cuMemPoolGetAccess), in ordinal order.
  std::vector<int> peer_accessible_by() const;
  // Grants `add` and revokes `remove` in one cuMemPoolSetAccess (the owning
  // device is ignored; a device in both is granted). A device that cannot
  // access this one (Device::can_access_peer) or does not exist throws before
  // anything changes.
  void update_peer_access(std::span<const int> add, std::span<const int> remove) const;
  // Exactly `devices` (beside the owner) get access afterwards.
  void set_peer_accessible_by(std::span<const int> devices) const;

  // ---- sharing with other processes (ipc.hpp, docs/ipc.md) ----
  // A new handle (a descriptor of its own) to this IPC-enabled pool, with the
  // pool's UUID (IpcError when not IPC-enabled). A mapped resource passes on
  // a copy of the descriptor it was mapped from, so a third process can map it.
  AllocationHandle allocation_handle() const;
  // The resource's own handle, made on first use and kept with the pool (every
  // copy of the resource gives the same one); a new one once its holder closed it.
  std::shared_ptr<AllocationHandle> get_allocation_handle() const;
  // Another process's pool mapped into this one ("mapped resource"): it
  // imports Buffers (Buffer::from_ipc_descriptor) and never allocates. The
  // handle's descriptor stays the caller's. A handle whose UUID is registered
  // gives the registered resource; a new mapping is registered under it.
  static DeviceMemoryResource from_allocation_handle(const Device& device, const AllocationHandle& handle);
  static DeviceMemoryResource from_allocation_handle(const Device& device, int fd);  // no UUID, not registered
  bool is_mapped() const noexcept;
  // IPC-enabled pools: the UUID made with the pool, or the one it was mapped from / registered under.
  std::optional<std::array<unsigned char, 16>> uuid() const;
  // The registry (per process): registers this IPC-enabled resource under
  // `uuid` and returns it, or returns the resource already registered there.
  DeviceMemoryResource register_as(const std::array<unsigned char, 16>& uuid) const;
  static DeviceMemoryResource from_registry(const std::array<unsigned char, 16>& uuid);  // IpcError when absent
  // Closed (close() on this copy, or on any copy of an IPC-enabled pool,
  // which every copy then refuses and the registry forgets).
  bool is_closed() const noexcept;

 private:
  DeviceMemoryResource() = default;
};

struct PinnedMemoryResourceOptions {
  std::size_t max_size = 0;
  bool ipc_enabled = false;
  // The host NUMA node the pool's memory lives on. Unset: the OS places it,
  // except with ipc_enabled, which needs a node: the current device's
  // host_numa_id then.
  std::optional<int> numa_id{};
};

// Stream-ordered page-locked host memory from a host-located memory pool
// (needs a CUDA 12.6 driver), device- and host-accessible.
// With ipc_enabled the pool is located on the current device's host NUMA node
// (CU_MEM_LOCATION_TYPE_HOST_NUMA), which sharing needs.
class PinnedMemoryResource : public MemoryResource {
 public:
  explicit PinnedMemoryResource(const PinnedMemoryResourceOptions& options = {});
  CUmemoryPool handle() const noexcept;  // null once closed
  MemoryPoolAttributes attributes() const;
  bool is_ipc_enabled() const noexcept;
  int numa_id() const noexcept;  // the host NUMA node, or -1 where the OS places the memory
  void close() noexcept;         // drops this share of the pool (see DeviceMemoryResource::close)

  // Sharing with other processes, as DeviceMemoryResource's.
  AllocationHandle allocation_handle() const;
  std::shared_ptr<AllocationHandle> get_allocation_handle() const;
  static PinnedMemoryResource from_allocation_handle(const AllocationHandle& handle);
  static PinnedMemoryResource from_allocation_handle(int fd);
  bool is_mapped() const noexcept;
  std::optional<std::array<unsigned char, 16>> uuid() const;
  PinnedMemoryResource register_as(const std::array<unsigned char, 16>& uuid) const;
  static PinnedMemoryResource from_registry(const std::array<unsigned char, 16>& uuid);
  bool is_closed() const noexcept;

 private:
  explicit PinnedMemoryResource(std::shared_ptr<Impl> impl) noexcept : MemoryResource(std::move(impl)) {}
};

// Page-locked host memory from cuMemAllocHost (synchronous, works everywhere).
class LegacyPinnedMemoryResource : public MemoryResource {
 public:
  LegacyPinnedMemoryResource();
};

struct ManagedMemoryResourceOptions {
  // Where the memory prefers to live (cuMemAdvise SET_PREFERRED_LOCATION on
  // each allocation), as cuda.core reads the pair: with no type, a device
  // ordinal, -1 for the host, or unset for no preference; with a type,
  // "device" (an ordinal), "host" (no id) or "host_numa" (a NUMA node, or
  // unset for the current device's host_numa_id).
  std::optional<int> preferred_location{};
  std::string preferred_location_type{};
  bool attach_global = true;  // CU_MEM_ATTACH_GLOBAL, else CU_MEM_ATTACH_HOST
};

// A managed resource's preferred location: "device", "host" or "host_numa",
// and the ordinal or node (none for "host").
struct ManagedLocation {
  std::string type{};
  std::optional<int> id{};
  bool operator==(const ManagedLocation&) const = default;
};

// Unified (managed) memory, migrated on demand between host and device.
class ManagedMemoryResource : public MemoryResource {
 public:
  // Throws std::invalid_argument for a preferred location cuda.core refuses.
  explicit ManagedMemoryResource(const ManagedMemoryResourceOptions& options = {});
  explicit ManagedMemoryResource(const Device& device, const ManagedMemoryResourceOptions& options = {});
  // nullopt: no preference (the driver decides).
  std::optional<ManagedLocation> preferred_location() const;
};

}  // namespace cucore
