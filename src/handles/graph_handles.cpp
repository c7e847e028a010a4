#include "handles/graph_handles.hpp"

#include <cucore/errors.hpp>

#include <condition_variable>
#include <cstdio>
#include <deque>
#include <thread>

#include "errors/release.hpp"
#include "loader/driver.hpp"

namespace cucore::detail {

namespace {
const DriverTable* loaded() noexcept { return g_driver.load(std::memory_order_acquire); }

// The release thread. Its queue is never destroyed, so a driver callback that
// comes during the process's exit still finds it.
struct ReleaseQueue {
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::vector<Owner>*> queue;
  unsigned long long queued = 0, released = 0;
  bool started = false;
};
ReleaseQueue& release_queue() {
  static auto* q = new ReleaseQueue;
  return *q;
}

void release_loop() {
  // Frees made here must not break a global-mode capture another thread runs:
  // this thread's calls are exempt from it (relaxed), as they are unrelated.
  if (const auto* t = loaded(); t && t->cuThreadExchangeStreamCaptureMode) {
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    t->cuThreadExchangeStreamCaptureMode(&mode);
  }
  ReleaseQueue& q = release_queue();
  std::unique_lock lock(q.mutex);
  for (;;) {
    q.cv.wait(lock, [&] { return !q.queue.empty(); });
    std::vector<Owner>* owners = q.queue.front();
    q.queue.pop_front();
    lock.unlock();
    delete owners;  // may unload libraries, free Buffers, take the GIL
    lock.lock();
    ++q.released;
    q.cv.notify_all();
  }
}

// Started from a user thread (attach), so a driver callback never has to.
void ensure_release_thread() {
  ReleaseQueue& q = release_queue();
  std::lock_guard lock(q.mutex);
  if (q.started) return;
  std::thread(release_loop).detach();
  q.started = true;
}

void CUDA_CB destroy_owners(void* owners) { release_later(static_cast<std::vector<Owner>*>(owners)); }
}  // namespace

void release_later(std::vector<Owner>* owners) noexcept {
  ReleaseQueue& q = release_queue();
  try {
    std::lock_guard lock(q.mutex);
    q.queue.push_back(owners);
    ++q.queued;
  } catch (...) {
    // No memory to queue: keeping the objects is safer than releasing them here.
    std::fputs("cucore: could not queue a graph's objects for release; they are kept\n", stderr);
    return;
  }
  q.cv.notify_all();
}

void drain_releases_for_testing() {
  ReleaseQueue& q = release_queue();
  std::unique_lock lock(q.mutex);
  const auto target = q.queued;
  q.cv.wait(lock, [&] { return q.released >= target; });
}

GraphBox::~GraphBox() {
  if (release == Release::destroy && graph)
    if (const auto* t = loaded()) report_release(t->cuGraphDestroy(graph), "cuGraphDestroy");
}

void GraphBox::retain(Owner owner, const void* key) {
  if (!owner) return;
  if (!key) key = owner.get();
  GraphBox& r = top();
  bool now;
  {
    std::lock_guard lock(r.mutex);
    if (r.last_key == key) return;
    r.last_key = key;
    r.pending.push_back(std::move(owner));
    now = r.graph != nullptr;
  }
  if (now) r.attach();
}

void GraphBox::attach() {
  GraphBox& r = top();
  std::vector<Owner>* batch = nullptr;
  CUgraph g = nullptr;
  {
    std::lock_guard lock(r.mutex);
    if (r.pending.empty() || !r.graph) return;
    g = r.graph;
    batch = new std::vector<Owner>(std::move(r.pending));
    r.pending.clear();
  }
  auto put_back = [&] {
    std::lock_guard lock(r.mutex);
    r.pending.insert(r.pending.begin(), batch->begin(), batch->end());
    r.last_key = nullptr;  // held by nobody yet: a repeat must not be skipped
  };
  const DriverTable& d = driver();
  if (!d.cuUserObjectCreate || !d.cuGraphRetainUserObject) {
    put_back();
    delete batch;
    require(nullptr, 11030, "graph user objects (cuUserObjectCreate)");
  }
  ensure_release_thread();
  CUuserObject object = nullptr;
  if (CUresult r1 = d.cuUserObjectCreate(&object, batch, destroy_owners, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC);
      r1 != CUDA_SUCCESS) {
    put_back();
    delete batch;
    throw_cuda_error(r1, "cuUserObjectCreate");
  }
  if (CUresult r2 = d.cuGraphRetainUserObject(g, object, 1, CU_GRAPH_USER_OBJECT_MOVE); r2 != CUDA_SUCCESS) {
    put_back();  // copies: the user object's own go with it
    d.cuUserObjectRelease(object, 1);
    throw_cuda_error(r2, "cuGraphRetainUserObject");
  }
}

void retain_in_graph(CUgraph graph, std::vector<Owner>&& owners) {
  if (owners.empty()) return;
  const DriverTable& d = driver();
  if (!d.cuUserObjectCreate || !d.cuGraphRetainUserObject || !d.cuUserObjectRelease)
    require(nullptr, 11030, "graph user objects (cuUserObjectCreate)");
  ensure_release_thread();
  auto* batch = new std::vector<Owner>(std::move(owners));
  CUuserObject object = nullptr;
  if (CUresult r = d.cuUserObjectCreate(&object, batch, destroy_owners, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC);
      r != CUDA_SUCCESS) {
    delete batch;
    throw_cuda_error(r, "cuUserObjectCreate");
  }
  if (CUresult r = d.cuGraphRetainUserObject(graph, object, 1, CU_GRAPH_USER_OBJECT_MOVE); r != CUDA_SUCCESS) {
    d.cuUserObjectRelease(object, 1);  // the last reference: the batch goes with it (on the release thread)
    throw_cuda_error(r, "cuGraphRetainUserObject");
  }
}

NodeHandle node_box(const GraphHandle& graph, CUgraphNode node) {
  GraphBox& r = graph->top();
  std::lock_guard lock(r.mutex);
  std::weak_ptr<NodeBox>& slot = r.node_boxes[node];
  if (NodeHandle live = slot.lock()) return live;
  auto box = std::make_shared<NodeBox>(graph, node);
  slot = box;
  // Entries of nodes nobody holds any more: swept each time the registry has
  // doubled, so it stays within twice the nodes held (amortized O(1) a node).
  if (r.node_boxes.size() >= 2 * r.node_boxes_swept + 64) {
    std::erase_if(r.node_boxes, [](const auto& e) { return e.second.expired(); });
    r.node_boxes_swept = r.node_boxes.size();
  }
  return box;
}

void forget_node(NodeBox& box) noexcept {
  if (!box.node) return;
  GraphBox& r = box.graph->top();
  std::lock_guard lock(r.mutex);
  if (auto it = r.node_boxes.find(box.node); it != r.node_boxes.end()) {
    // Only this box's entry: a dropped box's expired entry may still be there.
    NodeHandle held = it->second.lock();
    if (!held || held.get() == &box) r.node_boxes.erase(it);
  }
  box.node = nullptr;
}

GraphHandle create_graph() {
  auto box = std::make_shared<GraphBox>(Release::destroy);
  CUgraph g = nullptr;
  check(driver().cuGraphCreate(&g, 0), "cuGraphCreate");
  box->graph = g;
  return box;
}

GraphHandle capture_root() { return std::make_shared<GraphBox>(Release::destroy); }

GraphHandle own_graph(CUgraph graph) {
  auto box = std::make_shared<GraphBox>(Release::destroy);
  box->graph = graph;
  return box;
}

GraphHandle view_graph(CUgraph graph, GraphHandle root) {
  auto box = std::make_shared<GraphBox>(Release::none);
  box->graph = graph;
  box->root = root->root ? root->root : std::move(root);
  return box;
}

ExecOwnersStage::ExecOwnersStage(CUgraph graph) : graph_(graph) {
  const DriverTable& d = driver();
  if (!d.cuUserObjectCreate || !d.cuGraphRetainUserObject || !d.cuGraphReleaseUserObject || !d.cuUserObjectRelease)
    return;  // no user objects: no list, and no executable-node updates either (CUDA 12.2+)
  ensure_release_thread();
  auto* owners = new std::vector<Owner>;
  if (CUresult r = d.cuUserObjectCreate(&object_, owners, destroy_owners, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC);
      r != CUDA_SUCCESS) {
    delete owners;
    throw_cuda_error(r, "cuUserObjectCreate");
  }
  if (CUresult r = d.cuGraphRetainUserObject(graph, object_, 1, CU_GRAPH_USER_OBJECT_MOVE); r != CUDA_SUCCESS) {
    d.cuUserObjectRelease(object_, 1);  // the last reference: the (empty) list goes with it
    throw_cuda_error(r, "cuGraphRetainUserObject");
  }
  owners_ = owners;
}

ExecOwnersStage::~ExecOwnersStage() {
  if (owners_) report_release(driver().cuGraphReleaseUserObject(graph_, object_, 1), "cuGraphReleaseUserObject");
}

GraphExecBox::~GraphExecBox() {
  if (exec)
    if (const auto* t = loaded()) report_release(t->cuGraphExecDestroy(exec), "cuGraphExecDestroy");
}

}  // namespace cucore::detail
