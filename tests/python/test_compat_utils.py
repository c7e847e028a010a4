"""cucore._utils.cuda_utils: the names code written for cuda.core imports from
its private cuda_utils (cuda.core's own tests: CUDAError, handle_return, the
cuda.bindings driver), on the CPU."""
from dataclasses import dataclass

import pytest

import cucore
from cucore._utils import cuda_utils
from cucore._utils.cuda_utils import CUDAError, NVRTCError, check_or_create_options, handle_return, is_sequence


def test_the_error_classes_are_cucores():
    assert CUDAError is cucore.CUDAError and NVRTCError is cucore.NVRTCError


def test_handle_return_unpacks_successful_results():
    nvrtc = pytest.importorskip("cuda.bindings.nvrtc")
    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
    assert handle_return((ok,)) is None
    assert handle_return((ok, 42)) == 42
    assert handle_return((ok, 1, "b", 3.0)) == (1, "b", 3.0)
    major, minor = handle_return(nvrtc.nvrtcVersion())  # a real call, through NVRTC
    assert major >= 12 and minor >= 0
    with pytest.raises(TypeError, match="result tuple"):
        handle_return(0)


def test_handle_return_raises_the_error_named():
    nvrtc = pytest.importorskip("cuda.bindings.nvrtc")
    with pytest.raises(NVRTCError, match="NVRTC_ERROR_INVALID_INPUT"):
        handle_return((nvrtc.nvrtcResult.NVRTC_ERROR_INVALID_INPUT,))
    driver = pytest.importorskip("cuda.bindings.driver")
    with pytest.raises(CUDAError, match="CUDA_ERROR_INVALID_VALUE"):
        handle_return((driver.CUresult.CUDA_ERROR_INVALID_VALUE, None))


def test_bindings_modules_load_on_first_use():
    driver = pytest.importorskip("cuda.bindings.driver")
    assert cuda_utils.driver is driver
    with pytest.raises(AttributeError):
        cuda_utils.no_such_name


def test_check_or_create_options_and_is_sequence():
    @dataclass
    class Opts:
        a: int = 1

    assert check_or_create_options(Opts, None) == Opts()
    assert check_or_create_options(Opts, None, keep_none=True) is None
    assert check_or_create_options(Opts, {"a": 5}) == Opts(5)
    o = Opts(3)
    assert check_or_create_options(Opts, o) is o
    with pytest.raises(TypeError, match="Opts"):
        check_or_create_options(Opts, 7, "Opts options")
    assert is_sequence([1]) and is_sequence((1,)) and not is_sequence("ab") and not is_sequence(3)
