"""Shared fixtures for cucore's Python tests.

GPU tests use the `gpu` fixture: they skip with a reason when no GPU is usable,
and fail instead when CUCORE_REQUIRE_GPU=1 (the GPU machine's check).
"""
import os

import pytest

SAXPY_SRC = r"""
extern "C" __global__ void saxpy(float alpha, const float* __restrict__ x,
                                 const float* __restrict__ y, float* out, int n) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) out[idx] = alpha * x[idx] + y[idx];
}
"""

TEMPLATE_SRC = r"""
template <typename T>
__global__ void scale(T* x, T factor, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= factor;
}
"""

REQUIRE_GPU = os.environ.get("CUCORE_REQUIRE_GPU", "") not in ("", "0")


def _gpu_status():
    try:
        import cucore

        n = cucore.Device.count()
    except Exception as e:  # no driver
        return False, f"no usable CUDA driver ({str(e).splitlines()[0]})"
    if n == 0:
        return False, "no CUDA device"
    return True, ""


HAS_GPU, NO_GPU_REASON = _gpu_status()


def require_gpu():
    if HAS_GPU:
        return
    if REQUIRE_GPU:
        pytest.fail(f"CUCORE_REQUIRE_GPU=1 but {NO_GPU_REASON}")
    pytest.skip(NO_GPU_REASON)


@pytest.fixture
def gpu():
    require_gpu()


@pytest.fixture
def device(gpu):
    import cucore

    d = cucore.Device(0)
    d.set_current()
    return d


@pytest.fixture
def arch():
    """The current device's arch, else sm_90 (CPU machines compile for it)."""
    if HAS_GPU:
        import cucore

        d = cucore.Device(0)
        return f"sm_{d.compute_capability.major}{d.compute_capability.minor}"
    return "sm_90"


# SAXPY compiled for the GPU (module scope: once a test file), and its kernel.
@pytest.fixture(scope="module")
def saxpy_cubin():
    from cucore import Device, Program, ProgramOptions

    require_gpu()
    d = Device(0)
    d.set_current()
    arch = f"sm_{d.compute_capability.major}{d.compute_capability.minor}"
    return Program(SAXPY_SRC, "c++", ProgramOptions(arch=arch)).compile("cubin").code


@pytest.fixture(scope="module")
def saxpy(saxpy_cubin):
    from cucore import ObjectCode

    return ObjectCode.from_cubin(saxpy_cubin).get_kernel("saxpy")
