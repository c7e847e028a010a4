#pragma once
// CUDA C++ sources of the kernels the launch tests run (compiled with NVRTC at
// run time, for the device present).
namespace cucore::test {

inline constexpr const char* kLaunchKernels = R"(
extern "C" __global__ void saxpy(float a, const float* __restrict__ x, const float* __restrict__ y,
                                 float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}

extern "C" __global__ void empty_kernel() {}

template <typename T>
__global__ void scale(T* data, T factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= factor;
}

struct Affine {
  float a;
  float b;
  int n;
};
extern "C" __global__ void affine(Affine p, const float* x, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p.n) out[i] = p.a * x[i] + p.b;
}

// Reverses each block's slice through dynamic shared memory (any size).
extern "C" __global__ void reverse_shared(const float* in, float* out, int per_block) {
  extern __shared__ float s[];
  const float* src = in + (size_t)blockIdx.x * per_block;
  float* dst = out + (size_t)blockIdx.x * per_block;
  for (int i = threadIdx.x; i < per_block; i += blockDim.x) s[i] = src[i];
  __syncthreads();
  for (int i = threadIdx.x; i < per_block; i += blockDim.x) dst[i] = s[per_block - 1 - i];
}

// 1 KB of static shared memory.
extern "C" __global__ void static_shared(float* out) {
  __shared__ float buf[256];
  buf[threadIdx.x] = (float)threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = buf[255 - threadIdx.x];
}

extern "C" __global__ void __launch_bounds__(128) bounded(float* out) {
  out[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f;
}
)";

// Needs sm_90: each block writes its cluster rank, cluster size, cluster id,
// cluster count and the grid size in blocks.
inline constexpr const char* kClusterKernel = R"(
extern "C" __global__ void cluster_info(unsigned* out) {
  unsigned rank, size, cid, ncid;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(size));
  asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(cid));
  asm volatile("mov.u32 %0, %%nclusterid.x;" : "=r"(ncid));
  if (threadIdx.x == 0) {
    unsigned* o = out + 8 * blockIdx.x;
    o[0] = rank;
    o[1] = size;
    o[2] = cid;
    o[3] = ncid;
    o[4] = gridDim.x;
  }
}
)";

// A grid-wide barrier (cooperative groups): each block reads what its
// neighbour block wrote before the barrier. Only correct when every block is
// resident at once, which a cooperative launch guarantees.
inline constexpr const char* kCooperativeKernel = R"(
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void grid_exchange(int* data, int* out) {
  cg::grid_group grid = cg::this_grid();
  const int b = blockIdx.x, n = gridDim.x;
  if (threadIdx.x == 0) data[b] = b * 3 + 1;
  grid.sync();
  if (threadIdx.x == 0) out[b] = data[(b + 1) % n];
}
)";

}  // namespace cucore::test
