// IPC against the fake driver and real file descriptors: allocation handles,
// mapped resources and the registry, Buffer and Event descriptors (their
// validation, their sharing of one mapping), the typed errors, and that
// nothing leaks (no descriptor, no pool, no mapping) after any of it.
//
// The fake's IPC half behaves as the driver documents: an exported pool is a
// memfd (a real descriptor the fake recognizes by inode); an imported pointer
// is a new address, listed in the fake's ledger as an allocation of the
// imported pool (so it must be freed exactly once, before that pool goes),
// and a second import of a pointer still mapped is recorded as a violation
// (the driver does not count imports: nvbug 5570902). Like the driver, every
// IPC entry refuses a thread with no current context (CUDA_ERROR_INVALID_CONTEXT),
// and counts its calls, so the tests see what cucore asks of the driver.
#include <cucore/buffer.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/event.hpp>
#include <cucore/ipc.hpp>
#include <cucore/memory.hpp>
#include <cucore/stream.hpp>

#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "common/fake_driver.hpp"

using namespace cucore;
using cucore::test::FakeDriver;

namespace {

// Open descriptors of this process.
int open_fds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
  }
  return n - 1;  // the directory's own descriptor
}

std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

// ---- the fake driver's IPC half ---------------------------------------------------

struct FakeIpc {
  struct Export {  // what an export data payload names
    std::uintptr_t ptr;
    CUmemoryPool pool;
    std::size_t size;
  };
  static inline std::map<ino_t, CUmemoryPool> exported;       // memfd inode -> the pool it exports
  static inline std::map<CUmemoryPool, CUmemoryPool> source;  // imported pool -> the exporting pool
  static inline std::map<std::uintptr_t, std::uintptr_t> mapped_of;  // live mapping -> exported pointer
  static inline std::map<std::uintptr_t, std::size_t> extent;        // live mapping -> its size
  static inline std::atomic<int> pool_exports{0}, pool_imports{0}, ptr_imports{0}, event_opens{0};
  static inline std::atomic<int> ptr_exports{0}, event_exports{0};
  static inline std::map<std::uint64_t, CUevent> ipc_events;  // handle id -> exported event

  // Whether no context is current on this thread (the driver then refuses).
  static bool no_context() {
    CUcontext c = nullptr;
    cucore::detail::driver().cuCtxGetCurrent(&c);
    return !c;
  }

  static void reset() {
    std::lock_guard lock(FakeDriver::live_mutex);
    exported.clear();
    source.clear();
    mapped_of.clear();
    extent.clear();
    ipc_events.clear();
    pool_exports = pool_imports = ptr_imports = event_opens = ptr_exports = event_exports = 0;
  }

  static CUresult export_pool(void* out, CUmemoryPool pool, CUmemAllocationHandleType type, unsigned long long) {
    if (no_context()) return CUDA_ERROR_INVALID_CONTEXT;
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
    int fd = memfd_create("fake-pool", MFD_CLOEXEC);
    if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    struct stat st{};
    fstat(fd, &st);
    std::lock_guard lock(FakeDriver::live_mutex);
    if (!FakeDriver::live_pools.count(pool)) {
      ::close(fd);
      FakeDriver::violations.push_back("export of pool " + hex(pool) + ", which is not alive");
      return CUDA_ERROR_INVALID_VALUE;
    }
    exported[st.st_ino] = pool;
    *static_cast<int*>(out) = fd;
    ++pool_exports;
    return CUDA_SUCCESS;
  }

  static CUresult import_pool(CUmemoryPool* out, void* handle, CUmemAllocationHandleType type, unsigned long long) {
    if (no_context()) return CUDA_ERROR_INVALID_CONTEXT;
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
    int fd = static_cast<int>(reinterpret_cast<std::intptr_t>(handle));
    struct stat st{};
    if (fstat(fd, &st) != 0) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard lock(FakeDriver::live_mutex);
    auto it = exported.find(st.st_ino);
    if (it == exported.end()) return CUDA_ERROR_INVALID_VALUE;  // open, but no pool's handle
    *out = reinterpret_cast<CUmemoryPool>(std::malloc(8));
    FakeDriver::live_pools.insert(*out);
    ++FakeDriver::pools_created;
    source[*out] = it->second;
    ++pool_imports;
    return CUDA_SUCCESS;
  }

  static CUresult export_pointer(CUmemPoolPtrExportData* out, CUdeviceptr ptr) {
    if (no_context()) return CUDA_ERROR_INVALID_CONTEXT;
    ++ptr_exports;
    std::lock_guard lock(FakeDriver::live_mutex);
    auto it = FakeDriver::live.find(ptr);
    if (it == FakeDriver::live.end()) return CUDA_ERROR_INVALID_VALUE;
    Export e{ptr, it->second.pool, it->second.size};
    std::memset(out->reserved, 0, sizeof out->reserved);
    std::memcpy(out->reserved, &e, sizeof e);
    return CUDA_SUCCESS;
  }

  static CUresult import_pointer(CUdeviceptr* out, CUmemoryPool pool, CUmemPoolPtrExportData* data) {
    if (no_context()) return CUDA_ERROR_INVALID_CONTEXT;
    Export e;
    std::memcpy(&e, data->reserved, sizeof e);
    std::lock_guard lock(FakeDriver::live_mutex);
    auto src = source.find(pool);
    if (src == source.end() || src->second != e.pool) return CUDA_ERROR_INVALID_VALUE;  // another pool's pointer
    for (const auto& [m, exported_ptr] : mapped_of)
      if (exported_ptr == e.ptr)
        FakeDriver::violations.push_back("pointer " + hex(reinterpret_cast<void*>(e.ptr)) +
                                         " imported again while mapped at " + hex(reinterpret_cast<void*>(m)));
    void* m = std::malloc(e.size ? e.size : 1);
    *out = reinterpret_cast<CUdeviceptr>(m);
    FakeDriver::live[*out] = {e.size, pool};
    mapped_of[*out] = e.ptr;
    extent[*out] = e.size;
    ++ptr_imports;
    return CUDA_SUCCESS;
  }

  static inline PFN_cuMemFreeAsync_v11020 base_free = nullptr;
  static CUresult free_async(CUdeviceptr p, CUstream s) {
    {
      std::lock_guard lock(FakeDriver::live_mutex);
      if (mapped_of.count(p) && no_context()) return CUDA_ERROR_INVALID_CONTEXT;  // an unmap: IPC's to handle
      mapped_of.erase(p);
      extent.erase(p);
    }
    return base_free(p, s);
  }

  static inline PFN_cuPointerGetAttribute_v4000 base_attribute = nullptr;
  static CUresult pointer_attribute(void* v, CUpointer_attribute a, CUdeviceptr p) {
    if (a == CU_POINTER_ATTRIBUTE_RANGE_SIZE) {
      if (no_context()) return CUDA_ERROR_INVALID_CONTEXT;
      std::lock_guard lock(FakeDriver::live_mutex);
      auto it = extent.find(p);
      if (it == extent.end()) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<std::size_t*>(v) = it->second;
      return CUDA_SUCCESS;
    }
    return base_attribute(v, a, p);
  }

  static CUresult event_handle(CUipcEventHandle* h, CUevent e) {
    if (no_context()) return CUDA_ERROR_INVALID_CONTEXT;
    ++event_exports;
    std::lock_guard lock(FakeDriver::live_mutex);
    if (!FakeDriver::live_events.count(e)) return CUDA_ERROR_INVALID_HANDLE;
    std::uint64_t id = reinterpret_cast<std::uintptr_t>(e) ^ 0x5a5a5a5a5a5a5a5aull;
    std::memset(h->reserved, 0x11, sizeof h->reserved);
    std::memcpy(h->reserved, &id, sizeof id);
    ipc_events[id] = e;
    return CUDA_SUCCESS;
  }

  static CUresult open_event(CUevent* out, CUipcEventHandle h) {
    if (no_context()) return CUDA_ERROR_INVALID_CONTEXT;
    std::uint64_t id;
    std::memcpy(&id, h.reserved, sizeof id);
    std::lock_guard lock(FakeDriver::live_mutex);
    auto it = ipc_events.find(id);
    if (it == ipc_events.end() || !FakeDriver::live_events.count(it->second)) return CUDA_ERROR_INVALID_VALUE;
    *out = reinterpret_cast<CUevent>(std::malloc(8));
    FakeDriver::live_events.insert(*out);
    ++FakeDriver::events_created;
    ++event_opens;
    return CUDA_SUCCESS;
  }

  static void install(FakeDriver& fd) {
    reset();
    auto& t = fd.table;
    t.cuMemPoolExportToShareableHandle = &export_pool;
    t.cuMemPoolImportFromShareableHandle = &import_pool;
    t.cuMemPoolExportPointer = &export_pointer;
    t.cuMemPoolImportPointer = &import_pointer;
    base_free = t.cuMemFreeAsync;
    t.cuMemFreeAsync = &free_async;
    base_attribute = t.cuPointerGetAttribute;
    t.cuPointerGetAttribute = &pointer_attribute;
    t.cuMemPoolSetAccess = [](CUmemoryPool, const CUmemAccessDesc*, size_t) { return CUDA_SUCCESS; };
    t.cuIpcGetEventHandle = &event_handle;
    t.cuIpcOpenEventHandle = &open_event;
  }
};

class Ipc : public ::testing::Test {
 protected:
  void SetUp() override {
    fds_before_ = open_fds();
    FakeIpc::install(fake_);
  }
  void TearDown() override { FakeIpc::reset(); }
  // Everything made in the test is gone: no descriptor, no driver object, no violation.
  void expect_clean() {
    EXPECT_EQ(open_fds(), fds_before_) << "file descriptors leaked";
    EXPECT_EQ(FakeDriver::ledger_problems(), "");
  }
  FakeDriver fake_;
  int fds_before_ = 0;
};

std::vector<unsigned char> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng() | 1);  // never zero
  return v;
}

DeviceMemoryResourceOptions ipc_options() { return {.max_size = 1 << 21, .ipc_enabled = true}; }

// ---- UUIDs and descriptors --------------------------------------------------------

TEST(IpcUuid, RandomIsVersion4AndRoundTripsThroughText) {
  std::set<Uuid> seen;
  for (int i = 0; i < 100; ++i) {
    Uuid u = random_uuid();
    EXPECT_EQ(u[6] >> 4, 4);
    EXPECT_EQ(u[8] >> 6, 2);
    std::string s = uuid_to_string(u);
    ASSERT_EQ(s.size(), 36u);
    EXPECT_EQ(s[8], '-');
    EXPECT_EQ(uuid_from_string(s), u);
    seen.insert(u);
  }
  EXPECT_EQ(seen.size(), 100u);
  Uuid known{};
  for (int i = 0; i < 16; ++i) known[i] = static_cast<unsigned char>(0x10 * i + i);
  EXPECT_EQ(uuid_to_string(known), "00112233-4455-6677-8899-aabbccddeeff");
  EXPECT_EQ(uuid_from_string("00112233445566778899AABBCCDDEEFF"), known);
  for (const char* bad : {"", "0011", "00112233-4455-6677-8899-aabbccddeeffa", "zz112233-4455-6677-8899-aabbccddeeff"})
    EXPECT_THROW(uuid_from_string(bad), std::invalid_argument) << bad;
}

TEST(IpcDescriptor, BufferDescriptorBytesRoundTripAndRefuseBadRecords) {
  auto bytes = random_bytes(64, 7);
  IPCBufferDescriptor d;
  std::memcpy(d.payload.data(), bytes.data(), 64);
  d.size = 0x0123456789abcdefull;
  d.pool_uuid = random_uuid();
  auto flat = d.to_bytes();
  IPCBufferDescriptor back = IPCBufferDescriptor::from_bytes(flat);
  EXPECT_EQ(back.payload, d.payload);
  EXPECT_EQ(back.size, d.size);
  EXPECT_EQ(back.pool_uuid, d.pool_uuid);
  d.pool_uuid.reset();
  EXPECT_FALSE(IPCBufferDescriptor::from_bytes(d.to_bytes()).pool_uuid.has_value());

  try {
    IPCBufferDescriptor::from_bytes(std::span<const std::byte>(flat.data(), 8));
    FAIL() << "a short record was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("8 bytes"), std::string::npos) << e.what();
  }
  flat[64 + 8] = std::byte{7};
  EXPECT_THROW(IPCBufferDescriptor::from_bytes(flat), std::invalid_argument);

  IPCEventDescriptor ev;
  auto eb = random_bytes(CU_IPC_HANDLE_SIZE, 8);
  std::memcpy(ev.handle.data(), eb.data(), eb.size());
  ev.blocking_sync = true;
  IPCEventDescriptor ev2 = IPCEventDescriptor::from_bytes(ev.to_bytes());
  EXPECT_EQ(ev2, ev);
  EXPECT_TRUE(ev2.blocking_sync);
  auto evb = ev.to_bytes();
  evb.back() = std::byte{2};
  EXPECT_THROW(IPCEventDescriptor::from_bytes(evb), std::invalid_argument);
}

// ---- descriptors and their passing over a real socketpair ----------------------------

TEST(IpcFd, FileDescriptorOwnsAndDuplicates) {
  int before = open_fds();
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  {
    FileDescriptor r(p[0]), w(p[1]);
    FileDescriptor w2 = FileDescriptor::duplicate(w.get());
    EXPECT_NE(w2.get(), w.get());
    EXPECT_EQ(write(w2.get(), "x", 1), 1);
    char c = 0;
    EXPECT_EQ(read(r.get(), &c, 1), 1);
    EXPECT_EQ(c, 'x');
    FileDescriptor moved(std::move(w2));
    EXPECT_TRUE(w2.is_closed());  // NOLINT(bugprone-use-after-move)
    moved.close();
    moved.close();  // idempotent
    EXPECT_TRUE(moved.is_closed());
  }
  EXPECT_EQ(open_fds(), before);
  // A stale number: EBADF, nothing opened.
  try {
    FileDescriptor::duplicate(p[0]);
    FAIL() << "a closed descriptor was duplicated";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), EBADF);
    EXPECT_NE(std::string(e.what()).find(std::to_string(p[0])), std::string::npos) << e.what();
  }
  EXPECT_THROW(FileDescriptor(-3), std::invalid_argument);
  EXPECT_EQ(open_fds(), before);
}

struct SocketPair {
  int a = -1, b = -1;
  explicit SocketPair(int type = SOCK_STREAM) {
    int sv[2];
    if (socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sv) == 0) a = sv[0], b = sv[1];
  }
  ~SocketPair() {
    if (a >= 0) ::close(a);
    if (b >= 0) ::close(b);
  }
};

TEST(IpcFd, DescriptorsAndDataCrossASocketAndReachTheSameFiles) {
  int before = open_fds();
  {
    SocketPair sp;
    ASSERT_GE(sp.a, 0);
    std::vector<int> reads, writes;
    for (int i = 0; i < 3; ++i) {
      int p[2];
      ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
      reads.push_back(p[0]);
      writes.push_back(p[1]);
    }
    auto data = random_bytes(100, 3);
    ipc::send_fds(sp.a, writes, std::as_bytes(std::span(data)));
    ipc::Received r = ipc::recv_fds(sp.b, 3, data.size());
    ASSERT_EQ(r.fds.size(), 3u);
    ASSERT_EQ(r.data.size(), data.size());
    EXPECT_EQ(std::memcmp(r.data.data(), data.data(), data.size()), 0);
    for (int i = 0; i < 3; ++i) {
      EXPECT_NE(r.fds[i].get(), writes[i]);  // the receiver's own descriptor
      EXPECT_EQ(fcntl(r.fds[i].get(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
      unsigned char c = data[i];
      ASSERT_EQ(write(r.fds[i].get(), &c, 1), 1);
      unsigned char got = 0;
      ASSERT_EQ(read(reads[i], &got, 1), 1);
      EXPECT_EQ(got, c) << "descriptor " << i << " reached another file";
    }
    for (int fd : reads) ::close(fd);
    for (int fd : writes) ::close(fd);
  }
  EXPECT_EQ(open_fds(), before);
}

TEST(IpcFd, RefusedMessagesCloseEveryDescriptorThatArrived) {
  int before = open_fds();
  {
    SocketPair sp;
    int p[2];
    ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
    // More descriptors than the receiver takes.
    int two[2] = {p[0], p[1]};
    ipc::send_fds(sp.a, two);
    try {
      ipc::recv_fds(sp.b, 1);
      FAIL() << "two descriptors were taken for max_fds 1";
    } catch (const IpcError& e) {
      EXPECT_NE(std::string(e.what()).find("max_fds (1)"), std::string::npos) << e.what();
    }
    EXPECT_EQ(open_fds(), before + 4);  // the pipe and the socket pair, nothing received
    {
      // Records: descriptors with a second record, after the first byte; a
      // record longer than asked for (its tail would be lost).
      SocketPair rec(SOCK_SEQPACKET);
      const std::byte ten[10] = {};
      ipc::send_fds(rec.a, {}, ten);
      ipc::send_fds(rec.a, two, ten);
      try {
        ipc::recv_fds(rec.b, 2, 20);
        FAIL() << "descriptors of a second message were taken";
      } catch (const IpcError& e) {
        EXPECT_NE(std::string(e.what()).find("after the message's first byte"), std::string::npos) << e.what();
      }
      EXPECT_EQ(open_fds(), before + 6);
      ipc::send_fds(rec.a, two, ten);
      EXPECT_THROW(ipc::recv_fds(rec.b, 2, 4), IpcError);
      EXPECT_EQ(open_fds(), before + 6);
    }
    // A peer that goes away mid-message.
    const std::byte ten[10] = {};
    ipc::send_fds(sp.a, {}, std::span<const std::byte>(ten, 4));
    ::shutdown(sp.a, SHUT_WR);
    try {
      ipc::recv_fds(sp.b, 0, 10);
      FAIL() << "a short message was taken";
    } catch (const IpcError& e) {
      EXPECT_NE(std::string(e.what()).find("after 4 of 10 bytes"), std::string::npos) << e.what();
    }
    ::close(p[0]);
    ::close(p[1]);
  }
  EXPECT_EQ(open_fds(), before);
  int bad = -1;
  EXPECT_THROW(ipc::send_fds(0, std::span<const int>(&bad, 1)), std::invalid_argument);
  std::vector<int> many(ipc::kMaxFds + 1, 0);
  EXPECT_THROW(ipc::send_fds(0, many), std::invalid_argument);
}

TEST(IpcFd, AllocationHandlesTravelWithTheirUuid) {
  int before = open_fds();
  {
    SocketPair sp(SOCK_SEQPACKET);
    ASSERT_GE(sp.a, 0);
    int fd = memfd_create("handle", MFD_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, "cucore", 6), 6);
    Uuid u = random_uuid();
    AllocationHandle h(fd, u);
    ipc::send_handle(sp.a, h);
    AllocationHandle got = ipc::recv_handle(sp.b);
    ASSERT_TRUE(got.uuid().has_value());
    EXPECT_EQ(*got.uuid(), u);
    struct stat s1{}, s2{};
    fstat(h.fd(), &s1);
    fstat(got.fd(), &s2);
    EXPECT_EQ(s1.st_ino, s2.st_ino);
    AllocationHandle none(FileDescriptor::duplicate(fd), std::nullopt);
    ipc::send_handle(sp.a, none);
    EXPECT_FALSE(ipc::recv_handle(sp.b).uuid().has_value());
    // A message without a descriptor is no handle.
    std::byte msg[17] = {};
    ipc::send_fds(sp.a, {}, msg);
    EXPECT_THROW(ipc::recv_handle(sp.b), IpcError);
    AllocationHandle closed;
    EXPECT_THROW(ipc::send_handle(sp.a, closed), ClosedError);
    EXPECT_THROW(closed.duplicate(), ClosedError);
  }
  EXPECT_EQ(open_fds(), before);
}

// ---- pools: handles, mapped resources, the registry -----------------------------------

TEST_F(Ipc, AnIpcPoolExportsHandlesWithItsUuid) {
  {
    DeviceMemoryResource mr(0, ipc_options());
    EXPECT_TRUE(mr.is_ipc_enabled());
    EXPECT_FALSE(mr.is_mapped());
    ASSERT_TRUE(mr.uuid().has_value());
    AllocationHandle h1 = mr.allocation_handle();
    AllocationHandle h2 = mr.allocation_handle();
    EXPECT_GE(h1.fd(), 0);
    EXPECT_NE(h1.fd(), h2.fd());  // each its own descriptor
    EXPECT_EQ(h1.uuid(), mr.uuid());
    EXPECT_EQ(h2.uuid(), mr.uuid());
    EXPECT_EQ(FakeIpc::pool_exports.load(), 2);

    DeviceMemoryResource plain(0, DeviceMemoryResourceOptions{});
    EXPECT_FALSE(plain.uuid().has_value());
    for (const DeviceMemoryResource& r : {plain, DeviceMemoryResource(0)}) {
      try {
        (void)r.allocation_handle();
        FAIL() << "a pool without IPC exported a handle";
      } catch (const IpcError& e) {
        EXPECT_STREQ(e.what(), "Memory resource is not IPC-enabled");
      }
    }
    PinnedMemoryResource pinned({.ipc_enabled = true});
    EXPECT_TRUE(pinned.is_ipc_enabled());
    AllocationHandle hp = pinned.allocation_handle();
    EXPECT_EQ(hp.uuid(), pinned.uuid());
    EXPECT_NE(pinned.uuid(), mr.uuid());
  }
  expect_clean();
}

TEST_F(Ipc, AMappedResourceImportsButNeverAllocatesAndIsRegistered) {
  {
    DeviceMemoryResource mr(0, ipc_options());
    AllocationHandle h = mr.allocation_handle();
    // The importer's side (the same process here: the fake does not mind).
    DeviceMemoryResource mapped = DeviceMemoryResource::from_allocation_handle(Device(0), h);
    EXPECT_TRUE(mapped.is_mapped());
    EXPECT_TRUE(mapped.is_ipc_enabled());
    EXPECT_TRUE(mapped.owns_pool());
    EXPECT_EQ(mapped.uuid(), mr.uuid());
    EXPECT_FALSE(h.is_closed()) << "the handle stays the caller's";
    try {
      (void)mapped.allocate(64, Stream::legacy_default());
      FAIL() << "a mapped resource allocated";
    } catch (const MappedResourceError& e) {
      EXPECT_STREQ(e.what(), "Cannot allocate from a mapped IPC-enabled memory resource");
    }
    // Registered under the handle's UUID: found, and not imported twice.
    EXPECT_TRUE(DeviceMemoryResource::from_registry(*mr.uuid()) == mapped);
    EXPECT_TRUE(DeviceMemoryResource::from_allocation_handle(Device(0), h) == mapped);
    EXPECT_EQ(FakeIpc::pool_imports.load(), 1);
    // A mapped resource passes its pool on (a duplicate of what it was mapped from).
    AllocationHandle onward = mapped.allocation_handle();
    EXPECT_EQ(onward.uuid(), mr.uuid());
    struct stat s1{}, s2{};
    fstat(h.fd(), &s1);
    fstat(onward.fd(), &s2);
    EXPECT_EQ(s1.st_ino, s2.st_ino);
    // The registry is per kind.
    EXPECT_THROW(PinnedMemoryResource::from_registry(*mr.uuid()), std::invalid_argument);
    // A raw descriptor maps without registering.
    DeviceMemoryResource raw = DeviceMemoryResource::from_allocation_handle(Device(0), h.fd());
    EXPECT_FALSE(raw == mapped);
    EXPECT_FALSE(raw.uuid().has_value());
    EXPECT_EQ(FakeIpc::pool_imports.load(), 2);
  }
  // Gone with its last user: the registry no longer finds it.
  Uuid u = random_uuid();
  EXPECT_THROW(DeviceMemoryResource::from_registry(u), IpcError);
  expect_clean();
}

TEST_F(Ipc, RegisterKeepsTheFirstAndRefusesPoolsWithoutIpc) {
  {
    DeviceMemoryResource mr(0, ipc_options());
    AllocationHandle h = mr.allocation_handle();
    DeviceMemoryResource a = DeviceMemoryResource::from_allocation_handle(Device(0), h.fd());
    DeviceMemoryResource b = DeviceMemoryResource::from_allocation_handle(Device(0), h.fd());
    Uuid key = random_uuid();
    EXPECT_TRUE(a.register_as(key) == a);
    EXPECT_TRUE(b.register_as(key) == a) << "the resource registered first is returned";
    EXPECT_EQ(a.uuid(), key);
    EXPECT_FALSE(b.uuid().has_value());
    try {
      (void)DeviceMemoryResource::from_registry(random_uuid());
      FAIL();
    } catch (const IpcError& e) {
      EXPECT_NE(std::string(e.what()).find("was not found"), std::string::npos) << e.what();
    }
    DeviceMemoryResource plain(0, DeviceMemoryResourceOptions{});
    Uuid other = random_uuid();
    EXPECT_THROW(plain.register_as(other), IpcError);
    EXPECT_THROW(DeviceMemoryResource::from_registry(other), IpcError) << "a refused registration leaves nothing";
    // An IPC pool has its own UUID: another one is refused.
    EXPECT_THROW(mr.register_as(random_uuid()), std::invalid_argument);
    EXPECT_TRUE(mr.register_as(*mr.uuid()) == mr);
  }
  expect_clean();
}

TEST_F(Ipc, ClosedStaleAndForeignHandlesAreTypedErrorsThatLeakNothing) {
  {
    DeviceMemoryResource mr(0, ipc_options());
    AllocationHandle h = mr.allocation_handle();
    int stale = h.fd();
    AllocationHandle copy = h.duplicate();
    h.close();
    EXPECT_TRUE(h.is_closed());
    EXPECT_THROW(DeviceMemoryResource::from_allocation_handle(Device(0), h), ClosedError);
    // The closed number: refused before the driver sees it.
    try {
      (void)DeviceMemoryResource::from_allocation_handle(Device(0), stale);
      FAIL() << "a stale descriptor was imported";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code().value(), EBADF);
    }
    // Open, but no pool's handle: the driver's error, and no pool left behind.
    int p[2];
    ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
    try {
      (void)DeviceMemoryResource::from_allocation_handle(Device(0), p[0]);
      FAIL() << "a pipe was imported as a pool";
    } catch (const CudaError& e) {
      EXPECT_EQ(e.code(), CUDA_ERROR_INVALID_VALUE);
      EXPECT_EQ(e.call(), "cuMemPoolImportFromShareableHandle");
    }
    ::close(p[0]);
    ::close(p[1]);
    EXPECT_EQ(FakeIpc::pool_imports.load(), 0);
    // A closed mapped resource: found no more, imports nothing, re-imported fresh.
    DeviceMemoryResource mapped = DeviceMemoryResource::from_allocation_handle(Device(0), copy);
    DeviceMemoryResource other_copy = mapped;
    const auto pool_uuid = *mapped.uuid();
    mapped.close();
    EXPECT_TRUE(mapped.is_closed());
    EXPECT_TRUE(other_copy.is_closed()) << "an IPC pool closed through one copy is closed in every copy";
    EXPECT_THROW(DeviceMemoryResource::from_registry(pool_uuid), IpcError);
    Buffer src = mr.allocate(64, Stream::legacy_default());
    IPCBufferDescriptor d = src.ipc_descriptor();
    EXPECT_THROW(Buffer::from_ipc_descriptor(mapped, d, Stream(Device(0).context(), {})), ClosedError);
    EXPECT_THROW(mapped.allocation_handle(), ClosedError);
    EXPECT_THROW(mapped.register_as(pool_uuid), ClosedError);
    EXPECT_THROW(other_copy.allocation_handle(), ClosedError);
    DeviceMemoryResource again = DeviceMemoryResource::from_allocation_handle(Device(0), copy);
    EXPECT_FALSE(again == mapped);
    EXPECT_FALSE(again.is_closed());
    EXPECT_EQ(FakeIpc::pool_imports.load(), 2);
  }
  expect_clean();
}

// ---- buffers -----------------------------------------------------------------------

TEST_F(Ipc, ImportedBuffersShareOneMappingFreedOnceAfterTheLast) {
  {
    DeviceMemoryResource mr(0, ipc_options());
    Stream s(Device(0).context(), {});
    Buffer src = mr.allocate(4096, s);
    IPCBufferDescriptor d = src.ipc_descriptor();
    EXPECT_EQ(d.size, 4096u);
    EXPECT_EQ(d.pool_uuid, mr.uuid());
    EXPECT_FALSE(src.is_mapped());

    std::optional<DeviceMemoryResource> mapped =
        DeviceMemoryResource::from_allocation_handle(Device(0), mr.allocation_handle());
    std::optional<Buffer> a = Buffer::from_ipc_descriptor(*mapped, d, s);
    std::optional<Buffer> b = Buffer::from_ipc_descriptor(*mapped, d, s);
    EXPECT_TRUE(a->is_mapped());
    EXPECT_EQ(a->handle(), b->handle()) << "a second import shares the first's mapping";
    EXPECT_NE(a->handle(), src.handle());
    EXPECT_EQ(a->size(), 4096u);
    EXPECT_TRUE(a->memory_resource() == *mapped);
    EXPECT_EQ(FakeIpc::ptr_imports.load(), 1);
    // Re-export: the descriptor it came from.
    IPCBufferDescriptor again = b->ipc_descriptor();
    EXPECT_EQ(again.payload, d.payload);
    EXPECT_EQ(again.pool_uuid, d.pool_uuid);

    CUdeviceptr m = a->handle();
    mapped.reset();  // the resource first: its pool stays while the buffers map from it
    a->close();
    {
      std::lock_guard lock(FakeDriver::live_mutex);
      EXPECT_EQ(FakeDriver::live.count(m), 1u) << "unmapped while another import still uses it";
    }
    EXPECT_EQ(FakeDriver::pools_destroyed.load(), 0);
    b.reset();
    {
      std::lock_guard lock(FakeDriver::live_mutex);
      EXPECT_EQ(FakeDriver::live.count(m), 0u) << "not unmapped after the last import";
    }
    EXPECT_EQ(FakeDriver::pools_destroyed.load(), 1) << "the mapped pool goes with its last buffer";
    // Mapped again after that: a new import.
    DeviceMemoryResource mapped2 = DeviceMemoryResource::from_allocation_handle(Device(0), mr.allocation_handle());
    Buffer c = Buffer::from_ipc_descriptor(mapped2, d, s);
    EXPECT_EQ(FakeIpc::ptr_imports.load(), 2);
  }
  expect_clean();
}

// An import the driver refuses leaves no entry behind: the next import of the
// same descriptor asks the driver again and maps the pointer.
TEST_F(Ipc, ARefusedImportLeavesNothingAndTheNextOneMaps) {
  {
    DeviceMemoryResource mr(0, ipc_options());
    Stream s(Device(0).context(), {});
    Buffer src = mr.allocate(4096, s);
    IPCBufferDescriptor d = src.ipc_descriptor();
    DeviceMemoryResource mapped = DeviceMemoryResource::from_allocation_handle(Device(0), mr.allocation_handle());
    static std::atomic<int> refusals{0};
    refusals = 0;
    const auto real = fake_.table.cuMemPoolImportPointer;
    fake_.table.cuMemPoolImportPointer = [](CUdeviceptr*, CUmemoryPool, CUmemPoolPtrExportData*) {
      ++refusals;
      return CUDA_ERROR_OUT_OF_MEMORY;
    };
    EXPECT_THROW((void)Buffer::from_ipc_descriptor(mapped, d, s), CudaError);
    EXPECT_THROW((void)Buffer::from_ipc_descriptor(mapped, d, s), CudaError);
    EXPECT_EQ(refusals.load(), 2) << "a refused import was remembered as a mapping";
    fake_.table.cuMemPoolImportPointer = real;
    Buffer b = Buffer::from_ipc_descriptor(mapped, d, s);
    EXPECT_NE(b.handle(), 0u);
    EXPECT_EQ(FakeIpc::ptr_imports.load(), 1);
    b.close();
  }
  expect_clean();
}

// A mapped Buffer on the stream its mapping is freed on needs no share of that
// stream of its own (the mapping keeps it); one on another stream keeps its own.
// The ledger records a free on a stream that is gone.
TEST_F(Ipc, MappedBuffersKeepTheStreamsTheyAreFreedOnAlive) {
  {
    DeviceMemoryResource mr(0, ipc_options());
    Stream s0(Device(0).context(), {});
    std::optional<Stream> s1(std::in_place, Device(0).context(), StreamOptions{});
    std::optional<Stream> s2(std::in_place, Device(0).context(), StreamOptions{});
    Buffer src = mr.allocate(4096, s0);
    IPCBufferDescriptor d = src.ipc_descriptor();
    DeviceMemoryResource mapped = DeviceMemoryResource::from_allocation_handle(Device(0), mr.allocation_handle());
    Buffer a = Buffer::from_ipc_descriptor(mapped, d, *s1);  // makes the mapping: freed on s1
    Buffer b = Buffer::from_ipc_descriptor(mapped, d, *s2);  // shares it, on another stream
    const CUstream h1 = s1->handle(), h2 = s2->handle();
    EXPECT_EQ(a.stream().handle(), h1);
    EXPECT_EQ(b.stream().handle(), h2);
    s1.reset();
    s2.reset();
    auto alive = [](CUstream h) {
      std::lock_guard lock(FakeDriver::live_mutex);
      return FakeDriver::live_streams.count(h) == 1;
    };
    EXPECT_TRUE(alive(h1)) << "the mapping keeps the stream it is freed on";
    EXPECT_TRUE(alive(h2)) << "a Buffer on another stream keeps that one";
    b.close();
    EXPECT_FALSE(alive(h2)) << "b's stream outlived its last user";
    EXPECT_TRUE(alive(h1)) << "a still uses the mapping";
    a.close();  // the last use: unmapped on s1, which goes after
    EXPECT_FALSE(alive(h1));
  }
  expect_clean();
}

TEST_F(Ipc, DescriptorsAreValidatedAndFailuresUnmapWhatTheyMapped) {
  {
    DeviceMemoryResource mr(0, ipc_options());
    DeviceMemoryResource other(0, ipc_options());
    Stream s(Device(0).context(), {});
    Buffer src = mr.allocate(256, s);
    Buffer foreign = other.allocate(256, s);
    DeviceMemoryResource mapped = DeviceMemoryResource::from_allocation_handle(Device(0), mr.allocation_handle());

    // Another pool's descriptor: named, refused before the driver is asked.
    try {
      (void)Buffer::from_ipc_descriptor(mapped, foreign.ipc_descriptor(), s);
      FAIL() << "another pool's descriptor was imported";
    } catch (const CudaError& e) {
      EXPECT_EQ(e.code(), CUDA_ERROR_INVALID_VALUE);
      EXPECT_NE(std::string(e.what()).find(uuid_to_string(*other.uuid())), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(uuid_to_string(*mr.uuid())), std::string::npos) << e.what();
    }
    // Without UUIDs the driver refuses it.
    IPCBufferDescriptor anonymous = foreign.ipc_descriptor();
    anonymous.pool_uuid.reset();
    EXPECT_THROW(Buffer::from_ipc_descriptor(mapped, anonymous, s), CudaError);
    EXPECT_EQ(FakeIpc::ptr_imports.load(), 0);

    // A size beyond the mapping: refused, and the mapping made to learn it is undone.
    IPCBufferDescriptor big = src.ipc_descriptor();
    big.size = 256 * 100;
    try {
      (void)Buffer::from_ipc_descriptor(mapped, big, s);
      FAIL() << "an oversized descriptor was taken";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("exceeds mapped allocation extent (256 bytes)"), std::string::npos)
          << e.what();
    }
    EXPECT_EQ(FakeIpc::ptr_imports.load(), 1);
    {
      std::lock_guard lock(FakeDriver::live_mutex);
      EXPECT_TRUE(FakeIpc::mapped_of.empty()) << "the refused import stayed mapped";
    }
    // A smaller size is a view of the front.
    IPCBufferDescriptor small = src.ipc_descriptor();
    small.size = 100;
    EXPECT_EQ(Buffer::from_ipc_descriptor(mapped, small, s).size(), 100u);

    // Resources that cannot import.
    DeviceMemoryResource plain(0, DeviceMemoryResourceOptions{});
    EXPECT_THROW(Buffer::from_ipc_descriptor(plain, src.ipc_descriptor(), s), IpcError);
    EXPECT_THROW(Buffer::from_ipc_descriptor(ManagedMemoryResource(), src.ipc_descriptor(), s), std::invalid_argument);
    Stream closed(Device(0).context(), {});
    closed.close();
    EXPECT_THROW(Buffer::from_ipc_descriptor(mapped, src.ipc_descriptor(), closed), ClosedError);
    // Buffers that cannot be described.
    Buffer plain_buffer = plain.allocate(64, s);
    EXPECT_THROW(plain_buffer.ipc_descriptor(), IpcError);
    Buffer closed_buffer = mr.allocate(64, s);
    closed_buffer.close();
    EXPECT_THROW(closed_buffer.ipc_descriptor(), ClosedError);
  }
  expect_clean();
}

TEST_F(Ipc, AThousandExportImportCloseCyclesLeaveNothingBehind) {
  DeviceMemoryResource mr(0, ipc_options());
  Stream s(Device(0).context(), {});
  Buffer src = mr.allocate(1024, s);
  int fds = open_fds();
  int pools = FakeDriver::pools_created.load();
  for (int i = 0; i < 1000; ++i) {
    AllocationHandle h = mr.allocation_handle();
    DeviceMemoryResource mapped = DeviceMemoryResource::from_allocation_handle(Device(0), h);
    Buffer b = Buffer::from_ipc_descriptor(mapped, src.ipc_descriptor(), s);
    Event e(Device(0).context(), {.ipc_enabled = true});
    Event opened = Event::from_ipc_descriptor(e.ipc_descriptor());
    ASSERT_EQ(b.size(), 1024u);
  }
  EXPECT_EQ(open_fds(), fds);
  EXPECT_EQ(FakeDriver::pools_created.load() - pools, 1000);
  EXPECT_EQ(FakeDriver::pools_destroyed.load(), 1000);
  EXPECT_EQ(FakeIpc::ptr_imports.load(), 1000);
  {
    std::lock_guard lock(FakeDriver::live_mutex);
    EXPECT_TRUE(FakeIpc::mapped_of.empty());
    EXPECT_EQ(FakeDriver::live_events.size(), 0u);
  }
  src.close();
  s.close();
}

TEST_F(Ipc, ConcurrentImportsAndClosesNeverImportAMappedPointerTwice) {
  {
    DeviceMemoryResource mr(0, ipc_options());
    Stream s(Device(0).context(), {});
    std::vector<Buffer> srcs;
    std::vector<IPCBufferDescriptor> descs;
    for (int i = 0; i < 4; ++i) {
      srcs.push_back(mr.allocate(512, s));
      descs.push_back(srcs.back().ipc_descriptor());
    }
    DeviceMemoryResource mapped = DeviceMemoryResource::from_allocation_handle(Device(0), mr.allocation_handle());
    std::vector<std::thread> threads;
    std::atomic<int> wrong{0}, ready{0};
    for (int t = 0; t < 8; ++t)
      threads.emplace_back([&, t] {
        std::mt19937 rng(t);
        std::vector<Buffer> held;  // a few imports alive at once, in every thread
        ++ready;
        while (ready.load() < 8) std::this_thread::yield();
        for (int i = 0; i < 400; ++i) {
          const auto& d = descs[rng() % descs.size()];
          held.push_back(Buffer::from_ipc_descriptor(mapped, d, s));
          if (held.back().size() != 512 || !held.back().is_mapped()) ++wrong;
          if (held.size() > 3) {
            std::size_t k = rng() % held.size();
            if (rng() % 2) held[k].close();
            held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
          }
        }
      });
    for (auto& th : threads) th.join();
    EXPECT_EQ(wrong.load(), 0);
    {
      std::lock_guard lock(FakeDriver::live_mutex);
      EXPECT_TRUE(FakeIpc::mapped_of.empty());
    }
    EXPECT_GE(FakeIpc::ptr_imports.load(), 4);
  }
  expect_clean();  // includes "imported again while mapped" violations
}

// ---- events -------------------------------------------------------------------------

TEST_F(Ipc, EventsTravelAsDescriptorsAndOpenedEventsAreDestroyedOnce) {
  {
    Context ctx = Device(0).context();
    Event plain(ctx, {});
    try {
      (void)plain.ipc_descriptor();
      FAIL();
    } catch (const IpcError& e) {
      EXPECT_STREQ(e.what(), "Event is not IPC-enabled");
    }
    EXPECT_THROW(Event(ctx, {.timing_enabled = true, .ipc_enabled = true}), std::invalid_argument);
    Event shared(ctx, {.busy_waited_sync = true, .ipc_enabled = true});
    IPCEventDescriptor d = shared.ipc_descriptor();
    EXPECT_TRUE(d.blocking_sync);
    EXPECT_EQ(d, shared.ipc_descriptor());
    Event opened = Event::from_ipc_descriptor(d);
    EXPECT_NE(opened.handle(), shared.handle());
    EXPECT_TRUE(opened.is_ipc_enabled());
    EXPECT_FALSE(opened.is_timing_enabled());
    EXPECT_TRUE(opened.is_sync_busy_waited());
    EXPECT_EQ(opened.context(), ctx);
    EXPECT_EQ(FakeIpc::event_opens.load(), 1);
    Event copy = opened;
    opened.close();
    EXPECT_THROW(opened.ipc_descriptor(), ClosedError);
    EXPECT_EQ(FakeDriver::events_destroyed.load(), 0);
    copy.close();
    EXPECT_EQ(FakeDriver::events_destroyed.load(), 1);
    IPCEventDescriptor junk;
    junk.handle.fill(0x42);
    EXPECT_THROW(Event::from_ipc_descriptor(junk), CudaError);
  }
  expect_clean();
}

// ---- threads with no current context; descriptors made once -------------------------

// Runs `fn` on a new thread, where no context is current (as in a
// multiprocessing Queue's feeder thread), and checks it is still none after.
template <typename F>
void on_thread_without_context(F&& fn) {
  std::thread([&] {
    CUcontext before = nullptr, after = nullptr;
    detail::driver().cuCtxGetCurrent(&before);
    EXPECT_EQ(before, nullptr) << "a new thread had a current context";
    try {
      fn();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "an IPC call failed on a thread with no current context: " << e.what();
    }
    detail::driver().cuCtxGetCurrent(&after);
    EXPECT_EQ(after, nullptr) << "an IPC call left a context current on the thread";
  }).join();
}

// What a descriptor's payload names (the fake's export data).
FakeIpc::Export named_by(const IPCBufferDescriptor& d) {
  FakeIpc::Export e;
  std::memcpy(&e, d.payload.data(), sizeof e);
  return e;
}

TEST_F(Ipc, EveryIpcCallWorksOnAThreadWithNoCurrentContextAndLeavesItSo) {
  {
    DeviceMemoryResource mr(0, ipc_options());
    PinnedMemoryResource pinned({.ipc_enabled = true});
    Stream s(Device(0).context(), {});
    Buffer src = mr.allocate(4096, s);
    Buffer psrc = pinned.allocate(512, s);
    Event e(Device(0).context(), {.busy_waited_sync = true, .ipc_enabled = true});
    on_thread_without_context([&] {
      // The first exports of each: the driver is asked on this thread.
      IPCBufferDescriptor d = src.ipc_descriptor();
      IPCBufferDescriptor pd = psrc.ipc_descriptor();
      IPCEventDescriptor ed = e.ipc_descriptor();
      EXPECT_EQ(named_by(d).ptr, src.handle());
      EXPECT_EQ(named_by(pd).ptr, psrc.handle());
      EXPECT_TRUE(ed.blocking_sync);
      AllocationHandle h = mr.allocation_handle();
      AllocationHandle ph = pinned.allocation_handle();
      DeviceMemoryResource mapped = DeviceMemoryResource::from_allocation_handle(Device(0), h);
      PinnedMemoryResource pmapped = PinnedMemoryResource::from_allocation_handle(ph);
      Buffer b = Buffer::from_ipc_descriptor(mapped, d, s);
      Buffer pb = Buffer::from_ipc_descriptor(pmapped, pd, s);
      EXPECT_EQ(b.size(), 4096u);
      EXPECT_EQ(pb.size(), 512u);
      Event opened = Event::from_ipc_descriptor(ed);
      EXPECT_TRUE(opened.context() == Device(0).context()) << "opened in device 0's primary context";
      b.close();  // unmapped here; pb by its destructor
    });
    EXPECT_EQ(FakeIpc::ptr_exports.load(), 2);
    EXPECT_EQ(FakeIpc::event_exports.load(), 1);
    EXPECT_EQ(FakeIpc::ptr_imports.load(), 2);
    EXPECT_EQ(FakeIpc::event_opens.load(), 1);
    std::lock_guard lock(FakeDriver::live_mutex);
    EXPECT_TRUE(FakeIpc::mapped_of.empty()) << "an import was not unmapped";
  }
  expect_clean();
}

TEST_F(Ipc, ABuffersAndAnEventsDescriptorsAreAskedOfTheDriverOnce) {
  {
    Context ctx = Device(0).context();
    DeviceMemoryResource mr(0, ipc_options());
    Stream s(ctx, {});
    Buffer b = mr.allocate(2048, s);
    Event e(ctx, {.ipc_enabled = true});
    // Eight threads' first looks at once.
    constexpr int kThreads = 8;
    std::vector<IPCBufferDescriptor> bd(kThreads);
    std::vector<IPCEventDescriptor> ed(kThreads);
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i)
      threads.emplace_back([&, i] {
        ++ready;
        while (ready.load() < kThreads) std::this_thread::yield();
        try {
          bd[i] = b.ipc_descriptor();
          ed[i] = e.ipc_descriptor();
        } catch (const std::exception& x) {
          ADD_FAILURE() << "thread " << i << ": " << x.what();
        }
      });
    for (auto& t : threads) t.join();
    EXPECT_EQ(FakeIpc::ptr_exports.load(), 1);
    EXPECT_EQ(FakeIpc::event_exports.load(), 1);
    EXPECT_EQ(named_by(bd[0]).ptr, b.handle());
    EXPECT_EQ(named_by(bd[0]).size, 2048u);
    for (int i = 0; i < kThreads; ++i) {
      EXPECT_EQ(bd[i].payload, bd[0].payload) << i;
      EXPECT_EQ(bd[i].size, 2048u) << i;
      EXPECT_EQ(bd[i].pool_uuid, mr.uuid()) << i;
      EXPECT_EQ(ed[i], ed[0]) << i;
    }
    // A moved Buffer keeps its descriptor; the moved-from one has none.
    Buffer moved = std::move(b);
    EXPECT_EQ(moved.ipc_descriptor().payload, bd[0].payload);
    EXPECT_THROW((void)b.ipc_descriptor(), ClosedError);
    Buffer assigned = mr.allocate(64, s);
    (void)assigned.ipc_descriptor();
    assigned = std::move(moved);  // its own descriptor goes with its memory
    EXPECT_EQ(assigned.ipc_descriptor().payload, bd[0].payload);
    EXPECT_EQ(FakeIpc::ptr_exports.load(), 2);
    // Another allocation is asked anew.
    Buffer other = mr.allocate(2048, s);
    EXPECT_EQ(named_by(other.ipc_descriptor()).ptr, other.handle());
    EXPECT_EQ(FakeIpc::ptr_exports.load(), 3);
    // An opened event gives the descriptor it was opened from, without asking.
    Event opened = Event::from_ipc_descriptor(ed[0]);
    EXPECT_EQ(opened.ipc_descriptor(), ed[0]);
    EXPECT_EQ(FakeIpc::event_exports.load(), 1);
    // Closed: the Event, the Buffer, the pool (through any copy) refuse, made once or not.
    Event copy = e;
    e.close();
    EXPECT_THROW((void)e.ipc_descriptor(), ClosedError);
    EXPECT_EQ(copy.ipc_descriptor(), ed[0]);
    other.close();
    EXPECT_THROW((void)other.ipc_descriptor(), ClosedError);
    DeviceMemoryResource(mr).close();
    try {
      (void)assigned.ipc_descriptor();
      FAIL() << "a Buffer of a closed pool was described";
    } catch (const ClosedError& x) {
      EXPECT_NE(std::string(x.what()).find("DeviceMemoryResource"), std::string::npos) << x.what();
    }
  }
  expect_clean();
}

// Each allocation and each event keeps one descriptor object (its box holds
// it): the first calls, from threads at once, make one; every later call, a
// moved Buffer, a copy of the Event give that one; it outlives its Buffer; a
// new allocation, an import, another event each have their own; the checks
// (closed, not IPC-enabled, a closed pool) are made on every call.
TEST_F(Ipc, EachAllocationAndEventKeepsOneDescriptorObject) {
  {
    Context ctx = Device(0).context();
    DeviceMemoryResource mr(0, ipc_options());
    Stream s(ctx, {});
    std::mt19937 rng(7);
    const std::size_t n = 1024 + 8 * (rng() % 512);
    Buffer b = mr.allocate(n, s);
    Event e(ctx, {.busy_waited_sync = true, .ipc_enabled = true});
    constexpr int kThreads = 8;
    std::vector<std::shared_ptr<const IPCBufferDescriptor>> bd(kThreads);
    std::vector<std::shared_ptr<const IPCEventDescriptor>> ed(kThreads);
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i)
      threads.emplace_back([&, i] {
        ++ready;
        while (ready.load() < kThreads) std::this_thread::yield();
        try {
          bd[i] = b.shared_ipc_descriptor();
          ed[i] = e.shared_ipc_descriptor();
        } catch (const std::exception& x) {
          ADD_FAILURE() << "thread " << i << ": " << x.what();
        }
      });
    for (auto& t : threads) t.join();
    ASSERT_NE(bd[0], nullptr);
    ASSERT_NE(ed[0], nullptr);
    for (int i = 0; i < kThreads; ++i) {
      EXPECT_EQ(bd[i], bd[0]) << "thread " << i << " got another buffer descriptor object";
      EXPECT_EQ(ed[i], ed[0]) << "thread " << i << " got another event descriptor object";
    }
    EXPECT_EQ(FakeIpc::ptr_exports.load(), 1);
    EXPECT_EQ(FakeIpc::event_exports.load(), 1);
    EXPECT_EQ(named_by(*bd[0]).ptr, b.handle());
    EXPECT_EQ(bd[0]->size, n);
    EXPECT_EQ(bd[0]->pool_uuid, mr.uuid());
    EXPECT_TRUE(ed[0]->blocking_sync);
    // Later calls, by value or shared, and after a move: the same object, the driver not asked.
    EXPECT_EQ(b.shared_ipc_descriptor(), bd[0]);
    EXPECT_EQ(b.ipc_descriptor().payload, bd[0]->payload);
    Buffer moved = std::move(b);
    EXPECT_EQ(moved.shared_ipc_descriptor(), bd[0]);
    EXPECT_THROW((void)b.shared_ipc_descriptor(), ClosedError);
    Event copy = e;
    EXPECT_EQ(copy.shared_ipc_descriptor(), ed[0]) << "copies of an Event share its event and its descriptor";
    EXPECT_EQ(e.ipc_descriptor(), *ed[0]);
    EXPECT_EQ(FakeIpc::ptr_exports.load(), 1);
    EXPECT_EQ(FakeIpc::event_exports.load(), 1);

    // A Buffer that goes leaves its descriptor intact with whoever holds it;
    // the next allocation (often at the same address) is described anew.
    const CUdeviceptr old_ptr = moved.handle();
    const auto old_payload = bd[0]->payload;
    moved.close();
    EXPECT_THROW((void)moved.shared_ipc_descriptor(), ClosedError);
    EXPECT_EQ(bd[0]->payload, old_payload);
    EXPECT_EQ(bd[0]->size, n);
    EXPECT_EQ(named_by(*bd[0]).ptr, old_ptr);
    Buffer next = mr.allocate(n / 2, s);
    const auto& nd = next.shared_ipc_descriptor();
    EXPECT_NE(nd, bd[0]);
    EXPECT_EQ(nd->size, n / 2) << "described by a predecessor";
    EXPECT_EQ(named_by(*nd).ptr, next.handle());
    EXPECT_EQ(FakeIpc::ptr_exports.load(), 2);

    // Imports: each its own object, its own size, the payload it came from; no export asked.
    DeviceMemoryResource mapped = DeviceMemoryResource::from_allocation_handle(Device(0), mr.allocation_handle());
    IPCBufferDescriptor part = *nd;
    part.size = 100;
    Buffer whole = Buffer::from_ipc_descriptor(mapped, *nd, s);
    Buffer front = Buffer::from_ipc_descriptor(mapped, part, s);
    const auto wd = whole.shared_ipc_descriptor();
    const auto fd = front.shared_ipc_descriptor();
    EXPECT_EQ(whole.shared_ipc_descriptor(), wd);
    EXPECT_EQ(front.shared_ipc_descriptor(), fd);
    EXPECT_NE(wd, fd);
    EXPECT_NE(wd, nd);
    EXPECT_EQ(wd->payload, nd->payload);
    EXPECT_EQ(fd->payload, nd->payload);
    EXPECT_EQ(wd->size, n / 2);
    EXPECT_EQ(fd->size, 100u) << "an import is described by its own size";
    EXPECT_EQ(wd->pool_uuid, mr.uuid());
    EXPECT_EQ(FakeIpc::ptr_exports.load(), 2);
    whole.close();
    front.close();

    // An opened event: its own object, from the handle it was opened from (no export).
    Event opened = Event::from_ipc_descriptor(*ed[0]);
    const auto od = opened.shared_ipc_descriptor();
    EXPECT_EQ(opened.shared_ipc_descriptor(), od);
    EXPECT_NE(od, ed[0]);
    EXPECT_EQ(*od, *ed[0]);
    EXPECT_TRUE(od->blocking_sync);
    EXPECT_EQ(FakeIpc::event_exports.load(), 1);
    // Another event: another object.
    Event other(ctx, {.ipc_enabled = true});
    EXPECT_NE(other.shared_ipc_descriptor(), ed[0]);
    EXPECT_FALSE(other.shared_ipc_descriptor()->blocking_sync);
    EXPECT_FALSE(*other.shared_ipc_descriptor() == *ed[0]);
    EXPECT_EQ(FakeIpc::event_exports.load(), 2);

    // Refused on every call, made or not.
    Event plain_event(ctx, {});
    DeviceMemoryResource plain(0, DeviceMemoryResourceOptions{});
    Buffer plain_buffer = plain.allocate(64, s);
    for (int i = 0; i < 2; ++i) {
      EXPECT_THROW((void)plain_event.shared_ipc_descriptor(), IpcError);
      EXPECT_THROW((void)plain_buffer.shared_ipc_descriptor(), IpcError);
    }
    copy.close();
    EXPECT_EQ(e.shared_ipc_descriptor(), ed[0]);
    e.close();
    EXPECT_THROW((void)e.shared_ipc_descriptor(), ClosedError);
    EXPECT_EQ(*ed[0], *od) << "a descriptor outlives its Event";
    DeviceMemoryResource(mr).close();
    EXPECT_THROW((void)next.shared_ipc_descriptor(), ClosedError) << "a Buffer of a closed pool was described";
  }
  expect_clean();
}

TEST_F(Ipc, AnOldDriverWithoutPoolSharingIsAFeatureError) {
  fake_.table.cuMemPoolExportToShareableHandle = nullptr;
  fake_.table.cuMemPoolImportPointer = nullptr;
  {
    DeviceMemoryResource mr(0, ipc_options());
    EXPECT_THROW(mr.allocation_handle(), FeatureUnavailableError);
  }
  expect_clean();
}

}  // namespace
