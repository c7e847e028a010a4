"""Kernels as cuda.core 1.2 documents them: KernelAttributes are properties
read on the current device, or on the one attributes[device] (a Device or an
ordinal) is bound to, an ordinal with no device is ValueError, and
KernelOccupancy answers every query (block size with a constant amount of
dynamic shared memory or a C callable giving it per block size, clusters).
GPU tests (skipped without one)."""
import ctypes

import pytest

import cucore
from cucore import LaunchConfig, Program, ProgramOptions

SAXPY = r"""
template<typename T>
__global__ void saxpy(const T a, const T* x, const T* y, T* out, size_t N) {
    const unsigned int tid = threadIdx.x + blockIdx.x * blockDim.x;
    for (size_t i = tid; i < N; i += gridDim.x * blockDim.x) out[i] = a * x[i] + y[i];
}
"""

INT_ATTRIBUTES = ["max_threads_per_block", "shared_size_bytes", "const_size_bytes", "local_size_bytes", "num_regs",
                  "ptx_version", "binary_version", "max_dynamic_shared_size_bytes",
                  "preferred_shared_memory_carveout", "required_cluster_width", "required_cluster_height",
                  "required_cluster_depth", "cluster_scheduling_policy_preference"]
BOOL_ATTRIBUTES = ["cache_mode_ca", "cluster_size_must_be_set", "non_portable_cluster_size_allowed"]


@pytest.fixture
def saxpy(device):
    mod = Program(SAXPY, "c++", ProgramOptions(arch="sm_" + device.arch)).compile(
        "cubin", name_expressions=("saxpy<float>", "saxpy<double>"))
    return mod.get_kernel("saxpy<float>")


def test_attributes_are_properties_per_device(device, saxpy):
    # cuda.core 1.x: each attribute a property of the current device's view;
    # attributes[device] (a Device or an ordinal) binds another.
    attrs = saxpy.attributes
    for name in INT_ATTRIBUTES + BOOL_ATTRIBUTES:
        expected_type = bool if name in BOOL_ATTRIBUTES else int
        values = [getattr(attrs, name), getattr(attrs[device], name), getattr(attrs[device.device_id], name),
                  getattr(attrs[0], name)]
        assert len(set(values)) == 1, (name, values)
        assert all(type(v) is expected_type for v in values), (name, [type(v) for v in values])
        assert not callable(getattr(attrs, name)), name
    assert attrs.max_threads_per_block > 0 and 0 < attrs.num_regs <= 255


def test_occupancy_queries(device, saxpy):
    props = device.properties
    occ = saxpy.occupancy
    for block in (32, 128, 256):
        for smem in (0, 4096):
            n = occ.max_active_blocks_per_multiprocessor(block, smem)
            assert isinstance(n, int) and n > 0
            assert n * block <= props.max_threads_per_multiprocessor
    for limit in (0, 64, 96):
        r = occ.max_potential_block_size(32, limit)
        assert isinstance(r, tuple) and len(r) == 2 and r.min_grid_size > 0 and r.max_block_size > 0
        assert r.max_block_size <= (limit or props.max_threads_per_block)
    with pytest.raises(TypeError):
        occ.max_potential_block_size(Ellipsis, 0)
    # Dynamic shared memory as a C function of the block size (cuda.bindings'
    # CUoccupancyB2DSize: an object whose getPtr() is the function's address).
    b2d = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_int)(lambda block: 1024 * (block // 32))

    class B2DSize:
        def getPtr(self):
            return ctypes.cast(b2d, ctypes.c_void_p).value

    r = occ.max_potential_block_size(B2DSize(), 128)
    assert 0 < r.max_block_size <= 128 and r.min_grid_size > 0
    smem = occ.available_dynamic_shared_memory_per_block(2, 128)
    assert 0 < smem <= props.max_shared_memory_per_block_optin
    if device.compute_capability >= (9, 0):
        config = LaunchConfig(grid=128, block=64, cluster=2)
        for query in (occ.max_active_clusters, occ.max_potential_cluster_size):
            assert query(config) >= 0
            assert query(config, stream=device.default_stream) == query(config)
    for cls in (cucore.KernelAttributes, cucore.KernelOccupancy):
        with pytest.raises(RuntimeError, match="cannot be instantiated directly"):
            cls()
