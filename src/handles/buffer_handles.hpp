#pragma once
// A Buffer's box (handles.hpp's rules): one device pointer allocation, the
// share of the stream it is freed on, the object it belongs to (an Owner), and
// how it is freed, chosen by the maker when the box is made and never changed:
// `free` (a memory resource's deallocate, through `resource`, the resource's
// state kept alive with the box) for memory cucore owns or adopted, null for
// memory it only views or that an owner keeps (a mapped IPC Buffer's owner is
// its share of the mapping, which unmaps it). Type-erased, so this floor names
// no memory resource.
//
// The Buffer holds one share; whoever else needs the memory alive (a graph
// that uses it) may hold another, and the memory is freed when the last share
// goes. Buffer::close() frees at once when its share is the last (the usual
// case, and cuda.core's Buffer.close()); see buffer.hpp.
//
// An IPC pool's Buffer keeps its IPCBufferDescriptor in the box, made once by
// the first Buffer::shared_ipc_descriptor() (src/ipc/buffer_ipc.cpp) and kept
// for the allocation's life: every call, from any thread, any Buffer or graph
// sharing the box, gives that one descriptor; a new allocation (a new box)
// gets its own. The struct is the IPC layer's: this floor names it only.
//
// Made with make_box: allocating a Buffer mallocs nothing.
#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <utility>

#include "handles/box_allocator.hpp"
#include "handles/handles.hpp"

namespace cucore {
struct IPCBufferDescriptor;
}

namespace cucore::detail {

struct BufferBox;

// Frees `box`'s memory on `stream`; throws (CudaError, or what the memory
// resource throws) when refused, changing nothing. `dropping`: called from the
// box's destructor, on whatever thread let the last share go, where a free the
// driver refuses for want of a current context is made again in the stream's.
using BufferFree = void (*)(const BufferBox& box, CUstream stream, bool dropping);

struct BufferBox {
  // The memory; 0 once close() has freed it. Changed only by the one holder
  // (close, VirtualMemoryResource's growth), never while shared.
  CUdeviceptr ptr = 0;
  std::size_t size = 0;
  const BufferFree free;                 // null: never freed by cucore
  const std::shared_ptr<void> resource;  // what `free` frees through (a MemoryResource's state)
  // Where it is freed, and what keeps that stream alive when it is cucore's.
  // Changed only through a holder (Buffer::set_deallocation_stream), so never
  // while the last share is being let go.
  CUstream stream;
  StreamHandle stream_box;
  const Owner owner;                     // what the memory belongs to; a mapped Buffer's share of its mapping
  const bool mapped;                     // imported from another process (`owner` unmaps it)
  // The allocation's IPC descriptor: set once (under the IPC layer's lock),
  // then published by `ipc_ready` (release) and never changed; read only after
  // `ipc_ready` is seen (acquire).
  mutable std::atomic<bool> ipc_ready{false};
  mutable std::shared_ptr<const IPCBufferDescriptor> ipc_descriptor;

  BufferBox(CUdeviceptr p, std::size_t n, BufferFree f, std::shared_ptr<void>&& r, CUstream s, StreamHandle&& sb,
            Owner&& o, bool m) noexcept
      : ptr(p), size(n), free(f), resource(std::move(r)), stream(s), stream_box(std::move(sb)),
        owner(std::move(o)), mapped(m) {}
  BufferBox(const BufferBox&) = delete;
  BufferBox& operator=(const BufferBox&) = delete;
  ~BufferBox();  // frees what is left (free(..., dropping = true)); errors are swallowed
};
using BufferHandle = std::shared_ptr<BufferBox>;

// A box for `ptr`, freed through `free` on `stream` (null `free`: never
// freed). `resource` is moved from only once the box is made: should that
// fail (std::bad_alloc), the caller still has it to free the memory with.
inline BufferHandle make_buffer_box(CUdeviceptr ptr, std::size_t size, BufferFree free,
                                    std::shared_ptr<void>&& resource, CUstream stream, StreamHandle&& stream_box,
                                    Owner&& owner, bool mapped) {
  return make_box<BufferBox>(ptr, size, free, std::move(resource), stream, std::move(stream_box), std::move(owner),
                             mapped);
}

}  // namespace cucore::detail
