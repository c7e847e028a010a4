// IPC on the GPU machine, with real child processes (this executable run as a
// child role; tests/common/child_process.hpp): a parent's random data read
// and rewritten by a child, every element checked on both sides, each side's
// reads ordered after the other's writes by IPC events alone (each writer
// spins on the GPU first, so an unordered read would see old data); 8
// children mapping one pool at once; 1000 import/close cycles that leave the
// child's descriptor and device-mapping counts unchanged; typed errors on the
// real driver. Children are killed after a deadline, which fails the test.
#include <cucore/buffer.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/event.hpp>
#include <cucore/ipc.hpp>
#include <cucore/kernel.hpp>
#include <cucore/launch.hpp>
#include <cucore/memory.hpp>
#include <cucore/object_code.hpp>
#include <cucore/program.hpp>
#include <cucore/stream.hpp>

#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "support/child_process.hpp"
#include "common/gpu.hpp"
#include "common/random.hpp"
#include "loader/driver.hpp"

using namespace cucore;
using cucore::test::Child;
using cucore::test::random_floats;
using cucore::test::recv_value;
using cucore::test::send_value;

namespace {

constexpr auto kChildDeadline = std::chrono::seconds(90);

// Spins the stream for `ns` of GPU time (so work queued after it is late).
constexpr const char* kSpin = R"(
extern "C" __global__ void spin(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
}
)";
constexpr unsigned long long kSpinNs = 200'000'000;  // 0.2 s

Kernel spin_kernel(const Device& dev) {
  static std::optional<ObjectCode> code;
  if (!code) code = Program(kSpin, "c++", {.arch = "sm_" + dev.arch()}).compile(CodeType::cubin);
  return code->get_kernel("spin");
}

int open_fds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
  }
  return n - 1;
}

// Mappings of the driver's device files in this process.
int device_mappings() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);)
    if (line.find("/dev/nvidia") != std::string::npos) ++n;
  return n;
}

// The first element that differs, as text; empty when all match.
std::string first_mismatch(const std::vector<float>& got, const std::vector<float>& want, std::size_t from = 0) {
  for (std::size_t i = from; i < want.size(); ++i)
    if (got[i] != want[i])
      return "element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " + std::to_string(want[i]);
  return {};
}

struct ChildSetup {
  std::array<std::byte, IPCBufferDescriptor::kSerializedSize> buffer{};
  std::array<std::byte, IPCEventDescriptor::kSerializedSize> ready{};  // the parent's data is written
  unsigned long long n = 0;       // floats in the buffer
  unsigned long long begin = 0, end = 0;  // the child rewrites [begin, end)
  unsigned seed_in = 0, seed_out = 0;
  int pinned = 0;
};
struct Report {
  int ok = 0;
  char error[256] = {};
  std::array<std::byte, IPCEventDescriptor::kSerializedSize> done{};  // the child's writes are done
};

void set_error(Report& r, const std::string& what) { std::snprintf(r.error, sizeof r.error, "%s", what.c_str()); }

// Sends a child the pool's handle and the descriptors of `b` (`n` floats of
// seed `seed`) and of `ready`, which orders their writing.
void send_setup(Child& c, const DeviceMemoryResource& mr, const Buffer& b, const Event& ready, std::size_t n,
                unsigned seed) {
  ipc::send_handle(c.socket(), mr.allocation_handle());
  ChildSetup setup;
  setup.buffer = b.ipc_descriptor().to_bytes();
  setup.ready = ready.ipc_descriptor().to_bytes();
  setup.n = n;
  setup.seed_in = seed;
  send_value(c.socket(), setup);
}

// A Buffer over [begin, end) floats of `b` (a view: never freed by itself).
Buffer range_of(const Buffer& b, std::size_t begin, std::size_t end) {
  return Buffer::from_handle(b.handle() + begin * sizeof(float), (end - begin) * sizeof(float));
}

// Maps the parent's pool and buffer, checks every element once the parent's
// event says they are written, rewrites its range late (after a spin), and
// tells the parent by an event; closes once the parent has waited on it.
CUCORE_CHILD_ROLE(ipc_import_check_write) {
  Device dev(0);
  dev.set_current();
  AllocationHandle handle = ipc::recv_handle(socket);
  ChildSetup setup = recv_value<ChildSetup>(socket);
  Report report;
  Stream s = dev.create_stream();
  MemoryResource mr = setup.pinned ? MemoryResource(PinnedMemoryResource::from_allocation_handle(handle))
                                   : MemoryResource(DeviceMemoryResource::from_allocation_handle(dev, handle));
  std::optional<Buffer> b = Buffer::from_ipc_descriptor(mr, IPCBufferDescriptor::from_bytes(setup.buffer), s);
  s.wait(Event::from_ipc_descriptor(IPCEventDescriptor::from_bytes(setup.ready)));
  std::vector<float> got(setup.n);
  b->copy_to(std::span(got), s);
  s.sync();
  std::string bad = first_mismatch(got, random_floats(setup.n, setup.seed_in));
  if (!bad.empty()) set_error(report, "child read " + bad);
  std::vector<float> out = random_floats(setup.n, setup.seed_out);
  launch(s, {.grid = 1, .block = 1}, spin_kernel(dev), kSpinNs);
  Buffer mine = range_of(*b, setup.begin, setup.end);
  mine.copy_from(std::span<const float>(out.data() + setup.begin, setup.end - setup.begin), s);
  Event done = s.record({.ipc_enabled = true});
  report.done = done.ipc_descriptor().to_bytes();
  report.ok = bad.empty();
  send_value(socket, report);
  (void)recv_value<int>(socket);  // the parent has waited on `done`: the buffer may go
  b.reset();  // importers free before the exporter does (the driver's rule)
  s.sync();
  return report.ok ? 0 : 1;
}

// Runs `fn` on a new thread, where no context is current (as in a
// multiprocessing Queue's feeder thread). Returns what went wrong: the thread
// had a context, `fn` threw, or it left a context current; empty when nothing.
template <typename F>
std::string on_thread_without_context(F&& fn) {
  std::string error;
  std::thread([&] {
    try {
      CUcontext ctx = nullptr;
      detail::check(detail::driver().cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
      if (ctx) error += "the new thread had a current context; ";
      fn();
      detail::check(detail::driver().cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
      if (ctx) error += "an IPC call left a context current on the thread; ";
    } catch (const std::exception& e) {
      error += std::string("an IPC call failed on a thread with no current context: ") + e.what();
    }
  }).join();
  return error;
}

// The parent's side: `children` children each rewrite an equal share of one
// buffer of random floats from an IPC-enabled pool (device or pinned). With
// `export_elsewhere`, the buffer's and the event's descriptors and a handle
// are first made on a thread with no current context.
void share_with_children(int children, bool pinned, bool export_elsewhere = false) {
  Device dev(0);
  dev.set_current();
  const std::size_t n = std::size_t(1) << 20;  // 4 MiB of floats
  std::optional<DeviceMemoryResource> dmr;
  std::optional<PinnedMemoryResource> pmr;
  MemoryResource mr;
  if (pinned) {
    pmr.emplace(PinnedMemoryResourceOptions{.ipc_enabled = true});
    mr = *pmr;
  } else {
    dmr.emplace(dev, DeviceMemoryResourceOptions{.ipc_enabled = true});
    mr = *dmr;
  }
  Stream s = dev.create_stream();
  Buffer b = mr.allocate(n * sizeof(float), s);
  std::vector<float> in = random_floats(n, 101);
  launch(s, {.grid = 1, .block = 1}, spin_kernel(dev), kSpinNs);  // so an unordered read sees no data
  b.copy_from(std::span<const float>(in), s);
  Event ready = s.record({.ipc_enabled = true});
  if (export_elsewhere) {
    std::optional<IPCBufferDescriptor> d;
    std::optional<IPCEventDescriptor> ed;
    std::string error = on_thread_without_context([&] {
      d = b.ipc_descriptor();
      ed = ready.ipc_descriptor();
      AllocationHandle h = pinned ? pmr->allocation_handle() : dmr->allocation_handle();
      if (h.fd() < 0) throw std::runtime_error("allocation_handle gave no descriptor");
    });
    ASSERT_EQ(error, "");
    ASSERT_TRUE(d && ed);
    // Made once: what this thread is given now is what that thread was.
    EXPECT_EQ(b.ipc_descriptor().payload, d->payload);
    EXPECT_EQ(b.ipc_descriptor().size, n * sizeof(float));
    EXPECT_EQ(ready.ipc_descriptor(), *ed);
  }

  std::vector<std::unique_ptr<Child>> kids;
  for (int i = 0; i < children; ++i) kids.push_back(std::make_unique<Child>("ipc_import_check_write"));
  for (int i = 0; i < children; ++i) {
    ipc::send_handle(kids[i]->socket(), pinned ? pmr->allocation_handle() : dmr->allocation_handle());
    ChildSetup setup;
    setup.buffer = b.ipc_descriptor().to_bytes();
    setup.ready = ready.ipc_descriptor().to_bytes();
    setup.n = n;
    setup.begin = n * i / children;
    setup.end = n * (i + 1) / children;
    setup.seed_in = 101;
    setup.seed_out = 200 + i;
    setup.pinned = pinned;
    send_value(kids[i]->socket(), setup);
  }
  std::vector<float> want(n);
  for (int i = 0; i < children; ++i) {
    Report r = recv_value<Report>(kids[i]->socket());
    EXPECT_TRUE(r.ok) << "child " << i << ": " << r.error;
    s.wait(Event::from_ipc_descriptor(IPCEventDescriptor::from_bytes(r.done)));
    std::vector<float> theirs = random_floats(n, 200 + i);
    for (std::size_t k = n * i / children; k < n * (i + 1) / children; ++k) want[k] = theirs[k];
  }
  std::vector<float> got(n);
  b.copy_to(std::span(got), s);
  s.sync();
  std::string bad = first_mismatch(got, want);
  EXPECT_TRUE(bad.empty()) << "the parent read " << bad << " (the children's writes were not ordered before it)";
  for (auto& k : kids) send_value(k->socket(), 1);
  for (int i = 0; i < children; ++i) EXPECT_EQ(kids[i]->wait(kChildDeadline), 0) << "child " << i;
  b.close();
  s.sync();
}

TEST(IpcGpu, AChildReadsEveryElementAndTheParentSeesItsWritesOrderedByIpcEvents) {
  CUCORE_REQUIRE_GPU();
  share_with_children(1, false);
}

TEST(IpcGpu, EightChildrenMapOnePoolAtOnce) {
  CUCORE_REQUIRE_GPU();
  share_with_children(8, false);
}

TEST(IpcGpu, APinnedPoolIsSharedToo) {
  CUCORE_REQUIRE_GPU();
  share_with_children(2, true);
}

// The descriptors a child uses (its data checked, its writes ordered by the
// events) were made on a thread with no current context.
TEST(IpcGpu, DescriptorsMadeOnAThreadWithNoCurrentContextWork) {
  CUCORE_REQUIRE_GPU();
  share_with_children(1, false, true);
  share_with_children(1, true, true);
}

// A child that maps the parent's pool, imports its buffer and opens its event
// on a thread with no current context, checks every element (on its main
// thread), and unmaps the buffer on another such thread.
CUCORE_CHILD_ROLE(ipc_import_on_thread_without_context) {
  Device dev(0);
  dev.set_current();  // on the main thread only
  AllocationHandle handle = ipc::recv_handle(socket);
  ChildSetup setup = recv_value<ChildSetup>(socket);
  Report report;
  Stream s = dev.create_stream();
  std::optional<DeviceMemoryResource> mr;
  std::optional<Buffer> b;
  std::optional<Event> ready;
  std::string error = on_thread_without_context([&] {
    mr = DeviceMemoryResource::from_allocation_handle(dev, handle);
    b = Buffer::from_ipc_descriptor(*mr, IPCBufferDescriptor::from_bytes(setup.buffer), s);
    ready = Event::from_ipc_descriptor(IPCEventDescriptor::from_bytes(setup.ready));
    if (ready->context() != dev.context()) throw std::runtime_error("the opened event is not in device 0's context");
  });
  if (error.empty()) {
    s.wait(*ready);
    std::vector<float> got(setup.n);
    b->copy_to(std::span(got), s);
    s.sync();
    error = first_mismatch(got, random_floats(setup.n, setup.seed_in));
    if (!error.empty()) error = "child read " + error;
    error += on_thread_without_context([&] { b->close(); });  // unmapped there
    s.sync();
  }
  set_error(report, error);
  report.ok = error.empty();
  send_value(socket, report);
  return report.ok ? 0 : 1;
}

TEST(IpcGpu, ImportOpenAndCloseOnAThreadWithNoCurrentContext) {
  CUCORE_REQUIRE_GPU();
  Device dev(0);
  dev.set_current();
  DeviceMemoryResource mr(dev, DeviceMemoryResourceOptions{.ipc_enabled = true});
  Stream s = dev.create_stream();
  const std::size_t n = 1 << 16;
  Buffer b = mr.allocate(n * sizeof(float), s);
  launch(s, {.grid = 1, .block = 1}, spin_kernel(dev), kSpinNs);  // so an unordered read sees no data
  std::vector<float> data = random_floats(n, 31);
  b.copy_from(std::span<const float>(data), s);
  Event ready = s.record({.ipc_enabled = true});
  Child c("ipc_import_on_thread_without_context");
  send_setup(c, mr, b, ready, n, 31);
  Report r = recv_value<Report>(c.socket());
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(c.wait(kChildDeadline), 0);
  b.close();
  s.sync();
}

// ---- 1000 cycles -----------------------------------------------------------------------

struct CycleReport {
  int fds_before = 0, fds_after = 0, maps_before = 0, maps_after = 0, bad_cycles = 0;
  char error[256] = {};
};

// Maps the pool, imports the buffer and opens the event anew 1000 times
// (from the raw descriptor: no registry hit), checking every element each time.
CUCORE_CHILD_ROLE(ipc_cycles) {
  Device dev(0);
  dev.set_current();
  AllocationHandle handle = ipc::recv_handle(socket);
  ChildSetup setup = recv_value<ChildSetup>(socket);
  CycleReport r;
  Stream s = dev.create_stream();
  IPCBufferDescriptor d = IPCBufferDescriptor::from_bytes(setup.buffer);
  IPCEventDescriptor ed = IPCEventDescriptor::from_bytes(setup.ready);
  std::vector<float> want = random_floats(setup.n, setup.seed_in), got(setup.n);
  auto cycle = [&] {
    DeviceMemoryResource mr = DeviceMemoryResource::from_allocation_handle(dev, handle.fd());
    Buffer b = Buffer::from_ipc_descriptor(mr, d, s);
    s.wait(Event::from_ipc_descriptor(ed));
    b.copy_to(std::span(got), s);
    s.sync();
    if (!first_mismatch(got, want).empty()) ++r.bad_cycles;
    b.close();
    s.sync();
  };
  try {
    for (int i = 0; i < 10; ++i) cycle();  // the driver's own first-use allocations
    r.fds_before = open_fds();
    r.maps_before = device_mappings();
    for (int i = 0; i < 1000; ++i) cycle();
    r.fds_after = open_fds();
    r.maps_after = device_mappings();
  } catch (const std::exception& e) {
    std::snprintf(r.error, sizeof r.error, "%s", e.what());
  }
  send_value(socket, r);
  return 0;
}

TEST(IpcGpu, AThousandImportCloseCyclesLeaveNoDescriptorOrMapping) {
  CUCORE_REQUIRE_GPU();
  Device dev(0);
  dev.set_current();
  DeviceMemoryResource mr(dev, DeviceMemoryResourceOptions{.ipc_enabled = true});
  Stream s = dev.create_stream();
  const std::size_t n = 16384;
  Buffer b = mr.allocate(n * sizeof(float), s);
  b.copy_from(std::span<const float>(random_floats(n, 7)), s);
  Event ready = s.record({.ipc_enabled = true});
  s.sync();
  // The exporter's side: 1000 handles made and closed.
  for (int i = 0; i < 10; ++i) (void)mr.allocation_handle();
  int fds = open_fds();
  for (int i = 0; i < 1000; ++i) {
    AllocationHandle h = mr.allocation_handle();
    ASSERT_GE(h.fd(), 0);
    (void)b.ipc_descriptor();
    (void)ready.ipc_descriptor();
  }
  EXPECT_EQ(open_fds(), fds) << "exporting leaked descriptors";

  Child c("ipc_cycles");
  send_setup(c, mr, b, ready, n, 7);
  CycleReport r = recv_value<CycleReport>(c.socket());
  EXPECT_STREQ(r.error, "");
  EXPECT_EQ(r.bad_cycles, 0);
  EXPECT_EQ(r.fds_after, r.fds_before) << "the importer's descriptors";
  EXPECT_EQ(r.maps_after, r.maps_before) << "the importer's mappings of /dev/nvidia*";
  EXPECT_EQ(c.wait(kChildDeadline), 0);
  b.close();
  s.sync();
}

// ---- errors on the real driver ------------------------------------------------------------

struct ErrorReport {
  int checks = 0, passed = 0;
  char failures[512] = {};
};

CUCORE_CHILD_ROLE(ipc_errors) {
  Device dev(0);
  dev.set_current();
  AllocationHandle handle = ipc::recv_handle(socket);
  ChildSetup setup = recv_value<ChildSetup>(socket);  // .buffer: a buffer of ANOTHER pool
  ErrorReport r;
  std::string failures;
  auto expect = [&](bool ok, const std::string& what) {
    ++r.checks;
    if (ok) ++r.passed;
    else failures += what + "; ";
  };
  Stream s = dev.create_stream();
  int fds = open_fds();
  DeviceMemoryResource mr = DeviceMemoryResource::from_allocation_handle(dev, handle);
  // At least the mapped pool's own copy of the descriptor (the driver may hold one of its own).
  expect(open_fds() >= fds + 1, "descriptors after mapping: " + std::to_string(open_fds()) + ", expected at least " +
                                    std::to_string(fds + 1));
  // Every error path, three times: the first round may open what the driver opens once per process
  // (its IPC import machinery); the later rounds must not open one more descriptor.
  int after_first = 0;
  for (int round = 0; round < 3; ++round) {
    if (round == 1) after_first = open_fds();
    IPCBufferDescriptor foreign = IPCBufferDescriptor::from_bytes(setup.buffer);
    try {
      (void)Buffer::from_ipc_descriptor(mr, foreign, s);
      expect(false, "another pool's descriptor was imported");
    } catch (const CudaError& e) {
      expect(e.code() == CUDA_ERROR_INVALID_VALUE && std::string(e.what()).find("pool") != std::string::npos,
             std::string("foreign descriptor: ") + e.what());
    }
    foreign.pool_uuid.reset();  // the driver's own check
    try {
      (void)Buffer::from_ipc_descriptor(mr, foreign, s);
      expect(false, "another pool's descriptor without a UUID was imported");
    } catch (const CudaError& e) {
      expect(true, e.what());
    }
    int p[2];
    if (pipe2(p, O_CLOEXEC) == 0) {
      try {
        (void)DeviceMemoryResource::from_allocation_handle(dev, p[0]);
        expect(false, "a pipe was imported as a pool");
      } catch (const CudaError& e) {
        expect(true, e.what());
      }
      ::close(p[0]);
      ::close(p[1]);
      try {
        (void)DeviceMemoryResource::from_allocation_handle(dev, p[0]);
        expect(false, "a closed descriptor was imported");
      } catch (const std::system_error& e) {
        expect(e.code().value() == EBADF, e.what());
      }
    }
    try {
      (void)mr.allocate(64, s);
      expect(false, "a mapped resource allocated");
    } catch (const MappedResourceError&) {
      expect(true, "");
    }
  }
  expect(open_fds() == after_first, "descriptors after two more rounds of errors: " + std::to_string(open_fds()) +
                                        ", after the first: " + std::to_string(after_first));
  std::snprintf(r.failures, sizeof r.failures, "%s", failures.c_str());
  send_value(socket, r);
  return 0;
}

// On the real driver: a Buffer's and an Event's descriptor is one object,
// made once by the first of eight threads' calls at once (each thread with no
// current context), the same for every later call; refused once closed (the
// Buffer, its pool, the Event) while a held one stays whole; a new allocation
// (often at the freed one's address) has its own.
TEST(IpcGpu, EachAllocationAndEventKeepsOneDescriptorOnTheRealDriver) {
  CUCORE_REQUIRE_GPU();
  Device dev(0);
  dev.set_current();
  DeviceMemoryResource mr(dev, DeviceMemoryResourceOptions{.ipc_enabled = true});
  Stream s = dev.create_stream();
  const std::size_t n = 1 << 16;
  std::optional<Buffer> b(mr.allocate(n, s));
  Event e = s.record({.ipc_enabled = true});
  s.sync();
  constexpr int kThreads = 8;
  std::vector<std::shared_ptr<const IPCBufferDescriptor>> bd(kThreads);
  std::vector<std::shared_ptr<const IPCEventDescriptor>> ed(kThreads);
  std::vector<std::string> errors(kThreads);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      ++ready;
      while (ready.load() < kThreads) std::this_thread::yield();
      try {
        bd[i] = b->shared_ipc_descriptor();
        ed[i] = e.shared_ipc_descriptor();
      } catch (const std::exception& x) {
        errors[i] = x.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_EQ(errors[i], "") << "thread " << i;
    EXPECT_EQ(bd[i], bd[0]) << "thread " << i << " got another buffer descriptor";
    EXPECT_EQ(ed[i], ed[0]) << "thread " << i << " got another event descriptor";
  }
  ASSERT_NE(bd[0], nullptr);
  EXPECT_EQ(bd[0]->size, n);
  EXPECT_EQ(bd[0]->pool_uuid, mr.uuid());
  EXPECT_EQ(b->shared_ipc_descriptor(), bd[0]);
  EXPECT_EQ(b->ipc_descriptor().to_bytes(), bd[0]->to_bytes());
  EXPECT_EQ(e.shared_ipc_descriptor(), ed[0]);
  EXPECT_EQ(Event(e).shared_ipc_descriptor(), ed[0]);
  const auto bytes = bd[0]->to_bytes();
  const auto event_bytes = ed[0]->to_bytes();

  const CUdeviceptr old = b->handle();
  b->close();
  EXPECT_THROW((void)b->shared_ipc_descriptor(), ClosedError);
  b.reset();
  EXPECT_EQ(bd[0]->to_bytes(), bytes) << "a held descriptor changed when its Buffer went";
  Buffer next = mr.allocate(n / 2, s);
  const auto& nd = next.shared_ipc_descriptor();
  EXPECT_NE(nd, bd[0]) << (next.handle() == old ? "at the freed allocation's address" : "elsewhere");
  EXPECT_EQ(nd->size, n / 2);
  EXPECT_EQ(next.shared_ipc_descriptor(), nd);
  e.close();
  EXPECT_THROW((void)e.shared_ipc_descriptor(), ClosedError);
  EXPECT_EQ(ed[0]->to_bytes(), event_bytes);
  s.sync();
  DeviceMemoryResource(mr).close();
  EXPECT_THROW((void)next.shared_ipc_descriptor(), ClosedError) << "a Buffer of a closed pool was described";
}

TEST(IpcGpu, ForeignDescriptorsStaleAndWrongDescriptorsAreTypedErrorsOnTheRealDriver) {
  CUCORE_REQUIRE_GPU();
  Device dev(0);
  dev.set_current();
  DeviceMemoryResource mr(dev, DeviceMemoryResourceOptions{.ipc_enabled = true});
  DeviceMemoryResource other(dev, DeviceMemoryResourceOptions{.ipc_enabled = true});
  DeviceMemoryResource plain(dev, DeviceMemoryResourceOptions{});
  Stream s = dev.create_stream();
  Buffer theirs = other.allocate(4096, s);
  s.sync();
  EXPECT_THROW(plain.allocation_handle(), IpcError);
  EXPECT_THROW(plain.allocate(64, s).ipc_descriptor(), IpcError);
  EXPECT_THROW(dev.create_event().ipc_descriptor(), IpcError);
  Child c("ipc_errors");
  ipc::send_handle(c.socket(), mr.allocation_handle());
  ChildSetup setup;
  setup.buffer = theirs.ipc_descriptor().to_bytes();
  send_value(c.socket(), setup);
  ErrorReport r = recv_value<ErrorReport>(c.socket());
  EXPECT_EQ(r.passed, r.checks) << r.failures;
  EXPECT_GE(r.checks, 3 * 5 + 2);
  EXPECT_EQ(c.wait(kChildDeadline), 0);
  theirs.close();
  s.sync();
}

}  // namespace
