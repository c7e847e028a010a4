// Copies a rows x cols float array tile by tile through a TMA tensor map (sm_90+):
// each block loads one BOX_ROWS x BOX_COLS tile into shared memory with
// cp.async.bulk.tensor (completion counted on an mbarrier), then writes the
// tile's in-bounds elements to `out` (row-major). Used by the C++ and Python
// GPU tests of TensorMapDescriptor.
#ifndef BOX_ROWS
#define BOX_ROWS 32
#endif
#ifndef BOX_COLS
#define BOX_COLS 16
#endif

struct alignas(64) TensorMap {  // the driver's CUtensorMap: 128 opaque bytes
  unsigned long long opaque[16];
};

extern "C" __global__ void tma_tile_copy(const __grid_constant__ TensorMap map, float* out, int rows, int cols) {
  __shared__ alignas(128) float tile[BOX_ROWS * BOX_COLS];
  __shared__ alignas(8) unsigned long long barrier;
  const int col0 = blockIdx.x * BOX_COLS, row0 = blockIdx.y * BOX_ROWS;
  const unsigned smem_tile = static_cast<unsigned>(__cvta_generic_to_shared(tile));
  const unsigned smem_bar = static_cast<unsigned>(__cvta_generic_to_shared(&barrier));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_bar) : "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the init, seen by the TMA unit
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_bar),
                 "r"(static_cast<unsigned>(sizeof(tile)))
                 : "memory");
    // Coordinates innermost first: (column, row).
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
        ::"r"(smem_tile), "l"(reinterpret_cast<unsigned long long>(&map)), "r"(col0), "r"(row0), "r"(smem_bar)
        : "memory");
  }
  unsigned done = 0;
  while (!done) {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_bar), "r"(0u)
        : "memory");
  }
  for (int i = threadIdx.x; i < BOX_ROWS * BOX_COLS; i += blockDim.x) {
    const int r = row0 + i / BOX_COLS, c = col0 + i % BOX_COLS;
    if (r < rows && c < cols) out[static_cast<long long>(r) * cols + c] = tile[i];
  }
}
