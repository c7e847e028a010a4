"""cucore's exception classes: the hierarchy with cuda.core's names (CUDAError,
NVRTCError) and bases, and a machine without the driver raising
LibraryNotFoundError with what was searched. CPU only."""
import pytest

import cucore
from cucore import CompileError, CudaError, CUDAError, NVRTCError


def test_exception_hierarchy():
    assert issubclass(cucore.Error, RuntimeError)
    assert issubclass(CudaError, cucore.Error)
    assert CUDAError is CudaError and NVRTCError is CompileError
    assert issubclass(CompileError, CudaError)
    assert issubclass(cucore.LibraryNotFoundError, cucore.Error)
    assert issubclass(cucore.FeatureUnavailableError, cucore.Error)
    assert CompileError.__module__ == "cucore"


def test_no_driver_is_library_not_found():
    info = cucore.pathfinder.find("driver")
    if info.found:
        # A machine with the driver: devices count and Device(0) works.
        assert cucore.Device.count() >= 1
        assert cucore.Device(0).device_id == 0
        return
    with pytest.raises(cucore.LibraryNotFoundError) as ei:
        cucore.Device(0)
    assert "libcuda" in str(ei.value)
    assert ei.value.component
    assert isinstance(ei.value.searched, list) and ei.value.searched
