"""cuda.core's ``_utils.cuda_utils`` names that code outside cuda.core uses:
the error classes (cucore's), ``handle_return`` for cuda.bindings results,
``check_or_create_options``, ``is_sequence``, and cuda.bindings' ``driver``,
``runtime`` and ``nvrtc`` modules (imported on first use: cucore itself does
not need cuda.bindings)."""
from __future__ import annotations

import importlib
from collections.abc import Sequence

from cucore import CUDAError, NVRTCError

__all__ = [
    "CUDAError",
    "NVRTCError",
    "check_or_create_options",
    "driver",
    "handle_return",
    "is_sequence",
    "nvrtc",
    "runtime",
]

_BINDINGS = {"driver": "cuda.bindings.driver", "runtime": "cuda.bindings.runtime", "nvrtc": "cuda.bindings.nvrtc"}


def __getattr__(name):
    if name in _BINDINGS:
        module = importlib.import_module(_BINDINGS[name])
        globals()[name] = module
        return module
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _error_text(code) -> str:
    """The name and description of a cuda.bindings error code, as cuda.core words them."""
    module = type(code).__module__ or ""
    try:
        if "nvrtc" in module:
            nvrtc = __getattr__("nvrtc")
            return nvrtc.nvrtcGetErrorString(code)[1].decode()
        if type(code).__name__ == "cudaError_t":
            rt = __getattr__("runtime")
            name, desc = rt.cudaGetErrorName(code)[1], rt.cudaGetErrorString(code)[1]
        else:
            drv = __getattr__("driver")
            name, desc = drv.cuGetErrorName(code)[1], drv.cuGetErrorString(code)[1]
        return f"{name.decode()}: {desc.decode()}"
    except Exception:  # an unknown code, or no driver: say what we have
        return f"{getattr(code, 'name', code)}"


def handle_return(result, handle=None):
    """Checks a cuda.bindings call's ``(error, *values)`` tuple: raises
    ``CUDAError`` (``NVRTCError`` for NVRTC) when the code is not success,
    else returns nothing, the one value, or the tuple of values."""
    if not isinstance(result, tuple) or not result:
        raise TypeError(f"handle_return expects a cuda.bindings result tuple, got {result!r}")
    code = result[0]
    if int(code) != 0:
        text = _error_text(code)
        if "nvrtc" in (type(code).__module__ or ""):
            raise NVRTCError(text)
        raise CUDAError(text)
    if len(result) == 1:
        return None
    if len(result) == 2:
        return result[1]
    return result[1:]


def check_or_create_options(cls, options, options_description="", *, keep_none=False):
    """``options`` as an instance of ``cls``: None gives ``cls()`` (or None with
    ``keep_none``), a dict ``cls(**options)``; anything else is TypeError."""
    if options is None:
        return None if keep_none else cls()
    if isinstance(options, dict):
        return cls(**options)
    if not isinstance(options, cls):
        what = options_description or cls.__name__
        raise TypeError(f"The {what} must be provided as an object of type {cls.__name__} or as a dict with valid "
                        f"{what}. The provided object is '{options}'.")
    return options


def is_sequence(obj) -> bool:
    """A list, tuple or other Sequence that is not a string."""
    return isinstance(obj, Sequence) and not isinstance(obj, (str, bytes, bytearray))
