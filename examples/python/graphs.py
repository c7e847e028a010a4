# CUDA graphs, written as for cuda.core (only the imports differ: cuda.core ->
# cucore): a chain of kernels captured once and replayed; the graph updated with
# new kernel arguments; a while loop on the device until a counter reaches a value.
import numpy as np
from cucore import Device, LaunchConfig, Program, ProgramOptions, launch

SRC = r"""
extern "C" __device__ __cudart_builtin__ void CUDARTAPI cudaGraphSetConditional(cudaGraphConditionalHandle handle,
                                                                                unsigned int value);
extern "C" __global__ void axpb(float* data, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = __fadd_rn(__fmul_rn(a, data[i]), b);  // no FMA: rounded as the host rounds
}
extern "C" __global__ void count_until(int* counter, int limit, cudaGraphConditionalHandle cond) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    int v = ++*counter;
    cudaGraphSetConditional(cond, v < limit ? 1u : 0u);
  }
}
"""

d = Device(0)
d.set_current()
stream = d.create_stream()
arch = f"sm_{d.compute_capability.major}{d.compute_capability.minor}"
code = Program(SRC, "c++", ProgramOptions(arch=arch)).compile("cubin")
axpb, count_until = code.get_kernel("axpb"), code.get_kernel("count_until")

n = 1 << 20
host = np.random.default_rng(7).uniform(-1, 1, n).astype(np.float32)
data = d.memory_resource.allocate(n * 4, stream=stream)
config = LaunchConfig(grid=(n + 255) // 256, block=256)

# 1. Twenty kernels captured once, replayed five times.
gb = stream.create_graph_builder().begin_building()
for i in range(20):
    launch(gb, config, axpb, data, np.float32(1.01), np.float32(0.001 * i), n)
chain = gb.end_building().complete()
data.copy_from(host, stream=stream)
for _ in range(5):
    chain.launch(stream)
want = host.copy()
for _ in range(5):
    for i in range(20):
        want = np.float32(1.01) * want + np.float32(0.001 * i)
got = np.empty_like(host)
data.copy_to(got, stream=stream)
stream.sync()
np.testing.assert_allclose(got, want, rtol=1e-5)
print(f"replayed chain: all {n} elements right")

# 2. New kernel arguments, applied to the executable graph.
gb2 = stream.create_graph_builder().begin_building()
for i in range(20):
    launch(gb2, config, axpb, data, np.float32(0.5), np.float32(1.0), n)
chain.update(gb2.end_building())
data.copy_from(host, stream=stream)
chain.launch(stream)
want = host.copy()
for _ in range(20):
    want = np.float32(0.5) * want + np.float32(1.0)
data.copy_to(got, stream=stream)
stream.sync()
np.testing.assert_allclose(got, want, rtol=1e-5)
print(f"updated graph: all {n} elements right")

# 3. A loop on the device until the counter reaches the limit.
limit = 100
counter = d.memory_resource.allocate(4, stream=stream)
counter.copy_from(np.zeros(1, np.int32), stream=stream)
loop = stream.create_graph_builder().begin_building()
more = loop.create_condition(1)
body = loop.while_loop(more)
body.begin_building()
launch(body, LaunchConfig(grid=1, block=1), count_until, counter, limit, more)
body.end_building()
loop.end_building().complete().launch(stream)
count = np.zeros(1, np.int32)
counter.copy_to(count, stream=stream)
stream.sync()
print(f"device loop: the counter reached {count[0]} (limit {limit})")
assert count[0] == limit
