#pragma once
// CUDA C++ sources of the kernels the graph tests and examples run (NVRTC).
namespace cucore::test {

inline constexpr const char* kGraphKernels = R"(
// Defined by the driver when the module loads (CUDA 12.4+): no header, no device runtime link.
extern "C" __device__ __cudart_builtin__ void CUDARTAPI cudaGraphSetConditional(cudaGraphConditionalHandle handle,
                                                                                unsigned int value);

extern "C" __global__ void saxpy(float a, const float* x, const float* y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __fadd_rn(__fmul_rn(a, x[i]), y[i]);  // no FMA: rounded as the host rounds
}
extern "C" __global__ void axpb(float* data, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = __fadd_rn(__fmul_rn(a, data[i]), b);  // no FMA: rounded as the host rounds
}
extern "C" __global__ void add_int(int* data, int v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] += v;
}
extern "C" __global__ void sum4(float* out, const float* a, const float* b, const float* c, const float* d, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i] + c[i] + d[i];
}
// One step of a device-side loop: counts, and keeps looping while below the limit.
extern "C" __global__ void count_until(int* counter, int limit, cudaGraphConditionalHandle cond) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    int v = ++*counter;
    cudaGraphSetConditional(cond, v < limit ? 1u : 0u);
  }
}
// Sets the condition from device memory.
extern "C" __global__ void set_condition(cudaGraphConditionalHandle cond, const int* value) {
  if (threadIdx.x == 0 && blockIdx.x == 0) cudaGraphSetConditional(cond, (unsigned)*value);
}
)";

}  // namespace cucore::test
