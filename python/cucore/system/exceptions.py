"""The exceptions of cucore.system, named as cuda.core.system names them.

An NVML failure raises the class of its return code (nvmlReturn_t), each a
subclass of NvmlError, itself a cucore.Error. Attributes: code (the
nvmlReturn_t), name ("NVML_ERROR_NO_PERMISSION"), description (NVML's text),
call (the NVML function). A query the GPU does not support raises
NotSupportedError, as in cuda.core.system.

The classes are made from libcucore's one table of return codes
(src/loader/nvml_returns.inc: code, class name, docstring), so a code added
there is a class here. A class exported under a builtin's name (TimeoutError,
MemoryError) is named NvmlTimeoutError / NvmlMemoryError, as cuda.bindings
names the classes cuda.core.system exports, so that a traceback never reads
as the builtin.
"""
import builtins

from cucore import _core
from cucore._core import Error as _Error
from cucore._core._system import _nvml_returns


class NvmlError(_Error):
    """An NVML call failed."""


_BY_CODE = {}
for _code, _name, _extra_base, _doc in _nvml_returns():
    _bases = (NvmlError, getattr(_core, _extra_base)) if _extra_base else (NvmlError,)
    _cls_name = "Nvml" + _name if hasattr(builtins, _name) else _name
    _BY_CODE[_code] = globals()[_name] = type(_cls_name, _bases, {"__doc__": _doc, "__module__": __name__})
del _code, _name, _extra_base, _doc, _bases, _cls_name


def _exception_for_code(code: int) -> type:
    """The class raised for an nvmlReturn_t (cucore's C++ layer calls this)."""
    return _BY_CODE.get(code, NvmlError)


__all__ = ["NvmlError"] + [name for _code, name, _base, _doc in _nvml_returns()]
