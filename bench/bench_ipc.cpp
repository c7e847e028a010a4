// IPC and checkpointing, cucore against the raw driver calls in one run:
//  - export of a pool and a buffer (allocation_handle + ipc_descriptor) and of
//    an event, in the exporting process;
//  - import of the pool, mapping of the buffer and its unmapping (and the same
//    for an event), in a child process, which times both sides alternately;
//  - lock / checkpoint / restore / unlock of a child holding 1, 8 and 32 GiB
//    (tests/gpu/checkpoint_worker.hpp), each step's time and GiB per second.
// Goal: each within 1.05x of the raw calls. cucore's buffer and event
// descriptors are made once per object (the peers ask the driver every time,
// as code without such a cache does). Where cucore's semantics need more than
// the bare calls, the peer does it too and the bench says what it costs; and
// both sides run once more over stubbed entry points, to print what cucore's
// own code costs around the driver's work.
#include <cucore/buffer.hpp>
#include <cucore/checkpoint.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/event.hpp>
#include <cucore/ipc.hpp>
#include <cucore/memory.hpp>
#include <cucore/stream.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/child_process.hpp"
#include "support/checkpoint_worker.hpp"
#include "common.hpp"
#include "loader/driver.hpp"

using namespace cucore;
using cucore::test::Child;
using cucore::test::recv_value;
using cucore::test::send_value;

namespace {

struct Exports {
  std::array<std::byte, IPCBufferDescriptor::kSerializedSize> buffer{};
  std::array<std::byte, IPCEventDescriptor::kSerializedSize> event{};
};
struct Result {
  double buffer_cucore = 0, buffer_raw = 0, buffer_bare = 0, event_cucore = 0, event_raw = 0;
  double size_check = 0, keep_descriptor = 0, get_current = 0;  // what cucore's semantics add, ns each
  double buffer_own = 0, event_own = 0;  // cucore's own code around the driver calls (StubbedDriver), ns each
  char error[256] = {};
};

// The median of 21 samples of `inner` calls of `fn`, in ns per call.
double median_ns(const std::function<void()>& fn, int inner) {
  std::vector<double> t;
  for (int i = 0; i < 21; ++i) t.push_back(bench::time_ns(fn, inner));
  return bench::median(t);
}

// The driver's entry points of an import and an event's open, stubbed (the
// test seam), so timing cucore's calls against the raw calls under it leaves
// what cucore's own code costs on this machine, apart from the driver's work.
// The rest of the table is the real driver's; installed for its scope.
class StubbedDriver {
 public:
  StubbedDriver(std::size_t range_size) {
    real_ = &detail::driver();
    (void)real_->cuCtxGetCurrent(&current_);
    range_size_ = range_size;
    table_ = *real_;
    table_.cuCtxGetCurrent = [](CUcontext* c) {
      *c = current_;
      return CUDA_SUCCESS;
    };
    table_.cuIpcOpenEventHandle = [](CUevent* e, CUipcEventHandle) {
      *e = reinterpret_cast<CUevent>(std::uintptr_t{0x1000});
      return CUDA_SUCCESS;
    };
    table_.cuEventDestroy = [](CUevent) { return CUDA_SUCCESS; };
    table_.cuMemPoolImportFromShareableHandle = [](CUmemoryPool* p, void*, CUmemAllocationHandleType,
                                                   unsigned long long) {
      *p = reinterpret_cast<CUmemoryPool>(std::uintptr_t{0x2000});
      return CUDA_SUCCESS;
    };
    table_.cuMemPoolImportPointer = [](CUdeviceptr* p, CUmemoryPool, CUmemPoolPtrExportData*) {
      *p = 0x3000;
      return CUDA_SUCCESS;
    };
    table_.cuPointerGetAttribute = [](void* v, CUpointer_attribute, CUdeviceptr) {
      *static_cast<std::size_t*>(v) = range_size_;
      return CUDA_SUCCESS;
    };
    table_.cuMemFreeAsync = [](CUdeviceptr, CUstream) { return CUDA_SUCCESS; };
    table_.cuMemPoolDestroy = [](CUmemoryPool) { return CUDA_SUCCESS; };
    detail::set_driver_table_for_testing(&table_);
  }
  ~StubbedDriver() { detail::set_driver_table_for_testing(real_); }
  StubbedDriver(const StubbedDriver&) = delete;
  StubbedDriver& operator=(const StubbedDriver&) = delete;

 private:
  static inline CUcontext current_ = nullptr;
  static inline std::size_t range_size_ = 0;
  const detail::DriverTable* real_;
  detail::DriverTable table_;
};

// The importing side: times import+map+unmap of the pool and buffer, and
// open+destroy of the event, through cucore and through the raw driver.
CUCORE_CHILD_ROLE(bench_importer) {
  Result r;
  try {
    Device dev(0);
    dev.set_current();
    AllocationHandle handle = ipc::recv_handle(socket);
    Exports ex = recv_value<Exports>(socket);
    IPCBufferDescriptor d = IPCBufferDescriptor::from_bytes(ex.buffer);
    IPCEventDescriptor ed = IPCEventDescriptor::from_bytes(ex.event);
    Stream s = dev.create_stream();
    const auto& drv = detail::driver();
    const int fd = handle.fd();
    auto ours = [&] {
      DeviceMemoryResource mr = DeviceMemoryResource::from_allocation_handle(dev, fd);
      Buffer b = Buffer::from_ipc_descriptor(mr, d, s);
      b.close();
    };
    // Like for like, the peer does what the semantics need beyond the bare
    // calls: a mapped resource keeps its own copy of the pool's descriptor
    // (to export it onward; cuda.core keeps a dup too), and a descriptor's
    // size is the peer process's word, checked against what was mapped.
    auto map_raw = [&](CUmemoryPool& pool) {  // the pool, then the buffer's pointer
      detail::check(drv.cuMemPoolImportFromShareableHandle(&pool, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                    "cuMemPoolImportFromShareableHandle");
      CUmemPoolPtrExportData data;
      std::memcpy(data.reserved, d.payload.data(), sizeof data.reserved);
      CUdeviceptr p = 0;
      detail::check(drv.cuMemPoolImportPointer(&p, pool, &data), "cuMemPoolImportPointer");
      return p;
    };
    auto raw_with = [&](bool safe) {
      int own = safe ? ::fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
      if (safe && own < 0) throw std::runtime_error("fcntl(F_DUPFD_CLOEXEC) failed");
      CUmemoryPool pool = nullptr;
      CUdeviceptr p = map_raw(pool);
      if (safe) {
        std::size_t extent = 0;
        detail::check(drv.cuPointerGetAttribute(&extent, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p), "cuPointerGetAttribute");
        if (d.size > extent) throw std::runtime_error("the descriptor's size exceeds the mapping");
      }
      detail::check(drv.cuMemFreeAsync(p, s.handle()), "cuMemFreeAsync");
      detail::check(drv.cuMemPoolDestroy(pool), "cuMemPoolDestroy");
      if (safe) ::close(own);
    };
    auto raw = [&] { raw_with(true); };
    auto bare = [&] { raw_with(false); };
    auto c = bench::compare("ipc import+map+unmap buffer", "raw driver", ours, raw, 21, 50, 3);
    r.buffer_cucore = c.cucore;
    r.buffer_raw = c.peer;
    r.buffer_bare = bench::compare("ipc import+map+unmap buffer", "bare driver calls", ours, bare, 11, 50, 2).peer;
    // The two additions on their own.
    {
      CUmemoryPool pool = nullptr;
      CUdeviceptr p = map_raw(pool);
      std::size_t extent = 0;
      r.size_check = median_ns([&] { (void)drv.cuPointerGetAttribute(&extent, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p); },
                               1000);
      detail::check(drv.cuMemFreeAsync(p, s.handle()), "cuMemFreeAsync");
      s.sync();
      detail::check(drv.cuMemPoolDestroy(pool), "cuMemPoolDestroy");
      r.keep_descriptor = median_ns([&] { ::close(::fcntl(fd, F_DUPFD_CLOEXEC, 0)); }, 1000);
    }
    CUipcEventHandle eh;
    std::memcpy(eh.reserved, ed.handle.data(), sizeof eh.reserved);
    auto ev_ours = [&] { Event e = Event::from_ipc_descriptor(ed); };
    auto ev_raw = [&] {
      CUevent e = nullptr;
      detail::check(drv.cuIpcOpenEventHandle(&e, eh), "cuIpcOpenEventHandle");
      detail::check(drv.cuEventDestroy(e), "cuEventDestroy");
    };
    auto ce = bench::compare("ipc open+close event", "raw driver", ev_ours, ev_raw, 21, 200, 3);
    r.event_cucore = ce.cucore;
    r.event_raw = ce.peer;
    // cucore's one call more: which context is current (the opened event's, kept in its box).
    CUcontext current = nullptr;
    r.get_current = median_ns([&] { (void)drv.cuCtxGetCurrent(&current); }, 10000);
    {
      // cucore's own code: both sides again over the stubbed entry points (the
      // raw sides through the table as installed, not `drv`).
      StubbedDriver stubbed(d.size);
      auto stub_raw = [&] {
        const auto& t = detail::driver();
        int own = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
        CUmemoryPool pool = nullptr;
        (void)t.cuMemPoolImportFromShareableHandle(&pool, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                                   CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
        CUmemPoolPtrExportData data;
        std::memcpy(data.reserved, d.payload.data(), sizeof data.reserved);
        CUdeviceptr p = 0;
        (void)t.cuMemPoolImportPointer(&p, pool, &data);
        std::size_t extent = 0;
        (void)t.cuPointerGetAttribute(&extent, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p);
        if (d.size > extent) throw std::runtime_error("the descriptor's size exceeds the mapping");
        (void)t.cuMemFreeAsync(p, s.handle());
        (void)t.cuMemPoolDestroy(pool);
        ::close(own);
      };
      auto stub_ev_raw = [&] {
        const auto& t = detail::driver();
        CUevent e = nullptr;
        detail::check(t.cuIpcOpenEventHandle(&e, eh), "cuIpcOpenEventHandle");
        detail::check(t.cuEventDestroy(e), "cuEventDestroy");
      };
      auto cb = bench::compare("ipc import+map+unmap buffer (stubbed)", "raw", ours, stub_raw, 21, 200, 3);
      r.buffer_own = cb.cucore - cb.peer;
      auto ce2 = bench::compare("ipc open+close event (stubbed)", "raw", ev_ours, stub_ev_raw, 21, 2000, 3);
      r.event_own = ce2.cucore - ce2.peer;
    }
    s.sync();
  } catch (const std::exception& e) {
    std::snprintf(r.error, sizeof r.error, "%s", e.what());
  }
  send_value(socket, r);
  return 0;
}

CUCORE_CHILD_ROLE(bench_checkpoint_worker) { return cucore::test::checkpoint_worker::run(socket, args); }

void exports(DeviceMemoryResource& mr, Buffer& b, Event& e) {
  const auto& drv = detail::driver();
  auto ours = [&] {
    AllocationHandle h = mr.allocation_handle();
    (void)b.ipc_descriptor();
  };
  auto raw = [&] {
    int fd = -1;
    detail::check(drv.cuMemPoolExportToShareableHandle(&fd, mr.handle(), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                  "cuMemPoolExportToShareableHandle");
    CUmemPoolPtrExportData data;
    detail::check(drv.cuMemPoolExportPointer(&data, b.handle()), "cuMemPoolExportPointer");
    ::close(fd);
  };
  bench::report(bench::compare("ipc export pool+buffer", "raw driver", ours, raw, 21, 200, 3), 1.05);
  auto bx_ours = [&] { (void)b.ipc_descriptor(); };
  auto bx_raw = [&] {
    CUmemPoolPtrExportData data;
    detail::check(drv.cuMemPoolExportPointer(&data, b.handle()), "cuMemPoolExportPointer");
  };
  bench::report(bench::compare("ipc export buffer descriptor", "raw driver", bx_ours, bx_raw, 21, 200, 3), 1.05);
  auto ev_ours = [&] { (void)e.ipc_descriptor(); };
  auto ev_raw = [&] {
    CUipcEventHandle h;
    detail::check(drv.cuIpcGetEventHandle(&h, e.handle()), "cuIpcGetEventHandle");
  };
  bench::report(bench::compare("ipc export event", "raw driver", ev_ours, ev_raw, 21, 1000, 3), 1.05);
}

void imports(DeviceMemoryResource& mr, Buffer& b, Event& e) {
  Child c("bench_importer");
  ipc::send_handle(c.socket(), mr.allocation_handle());
  Exports ex{b.ipc_descriptor().to_bytes(), e.ipc_descriptor().to_bytes()};
  send_value(c.socket(), ex);
  Result r = recv_value<Result>(c.socket());
  c.wait(std::chrono::seconds(60));
  if (r.error[0]) {
    std::printf("ipc import: the child failed: %s\n", r.error);
    return;
  }
  bench::report({"ipc import+map+unmap buffer", "ns", r.buffer_cucore, r.buffer_raw, "raw driver"}, 1.05);
  bench::report({"ipc import+map+unmap buffer", "ns", r.buffer_cucore, r.buffer_bare, "bare driver calls"});
  bench::report_value("  of which: size check (RANGE_SIZE)", r.size_check, "ns");
  bench::report_value("  of which: pool descriptor dup+close", r.keep_descriptor, "ns");
  bench::report_value("  cucore's own code (driver calls stubbed)", r.buffer_own, "ns");
  bench::report({"ipc open+close event", "ns", r.event_cucore, r.event_raw, "raw driver"}, 1.05);
  bench::report_value("  of which: cuCtxGetCurrent", r.get_current, "ns");
  bench::report_value("  cucore's own code (driver calls stubbed)", r.event_own, "ns");
}

template <typename F>
double ms(F&& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void checkpoints() {
  namespace w = cucore::test::checkpoint_worker;
  std::size_t free_bytes = 0, total = 0;
  detail::check(detail::driver().cuMemGetInfo(&free_bytes, &total), "cuMemGetInfo");
  // CUCORE_BENCH_CHECKPOINT_GIB: the largest size to checkpoint (0: none), for
  // runs that measure only the IPC calls.
  const char* limit_env = std::getenv("CUCORE_BENCH_CHECKPOINT_GIB");
  const std::size_t limit = limit_env ? std::strtoull(limit_env, nullptr, 10) : 32;
  for (std::size_t gib : {1, 8, 32}) {
    if (gib > limit) break;
    std::size_t bytes = gib << 30;
    if (bytes + (std::size_t(2) << 30) > free_bytes) {
      std::printf("checkpoint %zu GiB: skipped (%.1f GiB free on the device)\n", gib, free_bytes / 1073741824.0);
      continue;
    }
    Child c("bench_checkpoint_worker", {std::to_string(bytes), "777"}, std::chrono::seconds(600));
    auto ready = recv_value<w::Ready>(c.socket());
    if (!ready.ok) {
      std::printf("checkpoint %zu GiB: the worker failed: %s\n", gib, ready.error);
      continue;
    }
    checkpoint::Process p(c.pid());
    double lock = 0, save = 0, restore = 0, unlock = 0;
    try {
      lock = ms([&] { p.lock(60'000); });
      save = ms([&] { p.checkpoint(); });
      restore = ms([&] { p.restore(); });
      unlock = ms([&] { p.unlock(); });
    } catch (const std::exception& e) {
      std::printf("checkpoint %zu GiB: refused: %s\n", gib, e.what());
      send_value(c.socket(), char(w::quit));
      c.wait(std::chrono::seconds(60));
      return;  // the platform refuses it: no larger size will do better
    }
    send_value(c.socket(), char(w::verify));
    auto st = recv_value<w::Status>(c.socket());
    std::string tag = "checkpoint[" + std::to_string(gib) + " GiB] ";
    bench::report_value(tag + "lock", lock, "ms");
    bench::report_value(tag + "checkpoint", save, "ms");
    bench::report_value(tag + "restore", restore, "ms");
    bench::report_value(tag + "unlock", unlock, "ms");
    bench::report_value(tag + "checkpoint rate", gib / (save / 1000.0), "GiB/s");
    bench::report_value(tag + "restore rate", gib / (restore / 1000.0), "GiB/s");
    if (st.mismatches != 0) std::printf("%sTHE DATA CHANGED: %llu words differ\n", tag.c_str(), st.mismatches);
    send_value(c.socket(), char(w::quit));
    c.wait(std::chrono::seconds(120));
  }
}

}  // namespace

int main() {
  if (!bench::have_gpu("bench_ipc")) return 0;
  Device dev(0);
  dev.set_current();
  DeviceMemoryResource mr(dev, DeviceMemoryResourceOptions{.ipc_enabled = true});
  Stream s = dev.create_stream();
  Buffer b = mr.allocate(1 << 20, s);
  Event e = s.record({.ipc_enabled = true});
  s.sync();
  exports(mr, b, e);
  imports(mr, b, e);
  checkpoints();
  b.close();
  s.sync();
  return 0;
}
