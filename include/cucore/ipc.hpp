#pragma once
// Sharing GPU memory and events between processes (Linux, POSIX file
// descriptors), with cuda.core's objects:
//
//   exporter                                     importer
//   DeviceMemoryResource mr(dev, {.ipc_enabled = true});
//   AllocationHandle h = mr.allocation_handle();  --fd (ipc::send_handle)-->
//                                                 auto mapped = DeviceMemoryResource::from_allocation_handle(dev, h);
//   Buffer b = mr.allocate(n, stream);
//   IPCBufferDescriptor d = b.ipc_descriptor();  --bytes (to_bytes)-->
//                                                 Buffer in = Buffer::from_ipc_descriptor(mapped, d, stream);
//   Event e = stream.record({.ipc_enabled = true});
//   IPCEventDescriptor ed = e.ipc_descriptor();  --bytes-->
//                                                 stream.wait(Event::from_ipc_descriptor(ed));
//
// A mapped resource imports buffers and never allocates. Importing the same
// descriptor twice gives Buffers that share one mapping, unmapped once when
// the last of them closes; a mapped resource stays imported while any Buffer
// from it lives. The driver's rule stands: importers free their Buffers before
// the exporter frees the memory (docs/ipc.md).
#include <cuda.h>

#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <cucore/errors.hpp>

namespace cucore {

// A pool's identity between processes (what the registry is keyed by).
using Uuid = std::array<unsigned char, 16>;
Uuid random_uuid();                                   // version 4, from getrandom(2)
std::string uuid_to_string(const Uuid& uuid);         // "8-4-4-4-12" lowercase hex
Uuid uuid_from_string(std::string_view text);         // std::invalid_argument naming the text

// An IPC operation this object cannot do: the pool or event is not
// IPC-enabled, a UUID is not in the registry, a socket peer broke the
// protocol. (Python: RuntimeError, as cuda.core.)
class IpcError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

// A mapped resource (imported from another process) was asked to allocate or
// to export its pool. (Python: TypeError, as cuda.core.)
class MappedResourceError : public IpcError {
 public:
  using IpcError::IpcError;
};

// One open file descriptor, owned: closed when the object goes. Move-only.
class FileDescriptor {
 public:
  FileDescriptor() noexcept = default;  // none
  explicit FileDescriptor(int fd);       // adopts `fd` (std::invalid_argument when negative)
  // A new descriptor (close-on-exec) for the same file; `fd` stays the
  // caller's. std::system_error (EBADF) when `fd` is not open.
  static FileDescriptor duplicate(int fd);
  ~FileDescriptor() { close(); }
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.release()) {}
  FileDescriptor& operator=(FileDescriptor&& other) noexcept;
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;

  int get() const noexcept { return fd_; }  // -1 when closed
  bool is_closed() const noexcept { return fd_ < 0; }
  int release() noexcept;  // gives the descriptor up (the caller closes it)
  void close() noexcept;   // idempotent

 private:
  int fd_ = -1;
};

// A shareable handle to an IPC-enabled memory pool: an owned file descriptor
// and the pool's UUID. Made by DeviceMemoryResource/PinnedMemoryResource
// ::allocation_handle(), sent with ipc::send_handle (or any SCM_RIGHTS
// transport), turned back into a resource with from_allocation_handle.
class AllocationHandle {
 public:
  AllocationHandle() noexcept = default;  // closed
  // Adopts `fd` (std::invalid_argument when negative).
  explicit AllocationHandle(int fd, std::optional<Uuid> uuid = std::nullopt) : fd_(fd), uuid_(uuid) {}
  AllocationHandle(FileDescriptor fd, std::optional<Uuid> uuid) noexcept : fd_(std::move(fd)), uuid_(uuid) {}

  int fd() const noexcept { return fd_.get(); }  // -1 once closed
  bool is_closed() const noexcept { return fd_.is_closed(); }
  const std::optional<Uuid>& uuid() const noexcept { return uuid_; }
  AllocationHandle duplicate() const;  // its own descriptor, the same UUID (ClosedError when closed)
  int release() noexcept { return fd_.release(); }
  void close() noexcept { fd_.close(); }

 private:
  FileDescriptor fd_;
  std::optional<Uuid> uuid_;
};

// Describes one Buffer of an IPC-enabled pool to another process (the
// driver's export data, the size, the pool's UUID). Plain bytes: send it any
// way. The importer treats it as untrusted: the size is checked against the
// mapping, and a descriptor of another pool is refused.
struct IPCBufferDescriptor {
  static constexpr std::size_t kPayloadSize = sizeof(CUmemPoolPtrExportData);
  std::array<unsigned char, kPayloadSize> payload{};
  std::size_t size = 0;
  std::optional<Uuid> pool_uuid{};

  // A fixed layout: the payload, the size (8 bytes, little-endian), a byte
  // saying whether a UUID follows, the UUID (zeros when none).
  static constexpr std::size_t kSerializedSize = kPayloadSize + 8 + 1 + 16;
  std::array<std::byte, kSerializedSize> to_bytes() const;
  // std::invalid_argument naming the length or the flag byte when `bytes` is not such a record.
  static IPCBufferDescriptor from_bytes(std::span<const std::byte> bytes);
};

// Describes an IPC-enabled Event to another process (the driver's handle and
// whether it syncs by blocking). Two descriptors are equal when their handles are.
struct IPCEventDescriptor {
  std::array<unsigned char, CU_IPC_HANDLE_SIZE> handle{};
  bool blocking_sync = false;

  static constexpr std::size_t kSerializedSize = CU_IPC_HANDLE_SIZE + 1;
  std::array<std::byte, kSerializedSize> to_bytes() const;
  static IPCEventDescriptor from_bytes(std::span<const std::byte> bytes);
  friend bool operator==(const IPCEventDescriptor& a, const IPCEventDescriptor& b) noexcept {
    return a.handle == b.handle;
  }
};

// Passing file descriptors between processes over a connected Unix-domain
// socket (SCM_RIGHTS): what the peer receives are its own descriptors.
namespace ipc {

// The most descriptors one message carries (the kernel's SCM_MAX_FD).
inline constexpr std::size_t kMaxFds = 253;

// Sends `fds` with `data` in one message (a single zero byte when `data` is
// empty: a message carries at least one byte). std::system_error on a socket
// error; std::invalid_argument for more than kMaxFds descriptors.
void send_fds(int socket, std::span<const int> fds, std::span<const std::byte> data = {});

struct Received {
  std::vector<FileDescriptor> fds{};
  std::vector<std::byte> data{};
};
// Receives one message of exactly `data_size` bytes (1 when 0: the zero byte
// send_fds sends for no data) and at most `max_fds` descriptors, close-on-exec.
// A message with more descriptors, descriptors sent after its first byte, or
// a record longer than asked for (SOCK_SEQPACKET) is refused (IpcError) with
// every received descriptor closed; so is a peer that closes the socket early.
Received recv_fds(int socket, std::size_t max_fds, std::size_t data_size = 0);

// An AllocationHandle: its descriptor and its UUID.
void send_handle(int socket, const AllocationHandle& handle);
AllocationHandle recv_handle(int socket);

}  // namespace ipc
}  // namespace cucore
