# The mission's example 1 (cached compile), written as for cuda.core: only the
# import lines differ (cuda.core -> cucore).
from cucore import Device, Program, ProgramOptions, ObjectCode
from cucore.utils import InMemoryProgramCache

d = Device(0)
d.set_current()

cuda_src = r"""
extern "C" __global__ void saxpy(
    float alpha, const float* __restrict__ x,
    const float* __restrict__ y, float* out, int n) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) out[idx] = alpha * x[idx] + y[idx];
}
"""

arch = f'sm_{d.compute_capability.major}{d.compute_capability.minor}'
cache = InMemoryProgramCache()
cache_key = f'saxpy_{arch}'

# First run: compile and put in the cache (~15 ms)
if cache.get(cache_key) is None:
    prog = Program(cuda_src, 'c++', options=ProgramOptions(arch=arch))
    cache[cache_key] = prog.compile('cubin')

# Every later run: from the cache (~0.05 ms)
kernel = ObjectCode.from_cubin(cache.get(cache_key)).get_kernel('saxpy')
print(f"kernel saxpy loaded from the cache for {arch}: {kernel}")
