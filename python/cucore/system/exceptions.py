"""The exceptions of cucore.system, named as cuda.core.system names them.

An NVML failure raises the class of its return code (nvmlReturn_t), each a
subclass of NvmlError, itself a cucore.Error. Attributes: code (the
nvmlReturn_t), name ("NVML_ERROR_NO_PERMISSION"), description (NVML's text),
call (the NVML function). A value the GPU does not report is None rather than
NotSupportedError; NotSupportedError remains for actions (register_events).
"""
from cucore._core import Error as _Error
from cucore._core import LibraryNotFoundError as _CucoreLibraryNotFoundError


class NvmlError(_Error):
    """An NVML call failed."""


class UninitializedError(NvmlError):
    """NVML was not initialized."""


class InvalidArgumentError(NvmlError):
    """A supplied argument is invalid (for a device: no device has that index)."""


class NotSupportedError(NvmlError):
    """The requested operation is not available on the target device."""


class NoPermissionError(NvmlError):
    """The current user does not have permission for the operation."""


class AlreadyInitializedError(NvmlError):
    """NVML is already initialized (deprecated by NVML's reference counting)."""


class NotFoundError(NvmlError):
    """A query to find an object (a device by UUID or PCI bus id, a process) found none."""


class InsufficientSizeError(NvmlError):
    """An input argument is not large enough."""


class InsufficientPowerError(NvmlError):
    """A device's external power cables are not properly attached."""


class DriverNotLoadedError(NvmlError):
    """The NVIDIA driver is not loaded."""


class TimeoutError(NvmlError):  # noqa: A001 (cuda.core's name)
    """A timeout passed (DeviceEvents.wait)."""


class IrqIssueError(NvmlError):
    """The NVIDIA kernel detected an interrupt issue with a GPU."""


class LibraryNotFoundError(NvmlError, _CucoreLibraryNotFoundError):
    """NVML (libnvidia-ml.so.1) could not be loaded. Attributes: component, searched."""


class FunctionNotFoundError(NvmlError):
    """The loaded NVML (an older driver's) does not implement the function."""


class CorruptedInforomError(NvmlError):
    """The infoROM is corrupted."""


class GpuIsLostError(NvmlError):
    """The GPU has fallen off the bus or has otherwise become inaccessible."""


class ResetRequiredError(NvmlError):
    """The GPU requires a reset before it can be used again."""


class OperatingSystemError(NvmlError):
    """The GPU control device has been blocked by the operating system or cgroups."""


class LibRmVersionMismatchError(NvmlError):
    """The NVML library does not match the kernel driver's version."""


class InUseError(NvmlError):
    """The operation cannot be performed because the GPU is in use."""


class MemoryError(NvmlError):  # noqa: A001 (cuda.core's name)
    """NVML ran out of memory."""


class NoDataError(NvmlError):
    """No data."""


class VgpuEccNotSupportedError(NvmlError):
    """The vGPU operation is not available because ECC is enabled."""


class InsufficientResourcesError(NvmlError):
    """NVML ran out of critical resources other than memory."""


class FreqNotSupportedError(NvmlError):
    """The frequency is not supported."""


class ArgumentVersionMismatchError(NvmlError):
    """The version of a versioned argument is invalid or unsupported."""


class DeprecatedError(NvmlError):
    """The requested functionality has been deprecated."""


class NotReadyError(NvmlError):
    """The system is not ready for the request."""


class GpuNotFoundError(NvmlError):
    """No GPUs were found."""


class InvalidStateError(NvmlError):
    """The resource is not in the state the operation needs."""


class ResetTypeNotSupportedError(NvmlError):
    """The reset type is not supported for the device."""


class UnknownError(NvmlError):
    """An internal driver error occurred."""


_BY_CODE = {
    1: UninitializedError,
    2: InvalidArgumentError,
    3: NotSupportedError,
    4: NoPermissionError,
    5: AlreadyInitializedError,
    6: NotFoundError,
    7: InsufficientSizeError,
    8: InsufficientPowerError,
    9: DriverNotLoadedError,
    10: TimeoutError,
    11: IrqIssueError,
    12: LibraryNotFoundError,
    13: FunctionNotFoundError,
    14: CorruptedInforomError,
    15: GpuIsLostError,
    16: ResetRequiredError,
    17: OperatingSystemError,
    18: LibRmVersionMismatchError,
    19: InUseError,
    20: MemoryError,
    21: NoDataError,
    22: VgpuEccNotSupportedError,
    23: InsufficientResourcesError,
    24: FreqNotSupportedError,
    25: ArgumentVersionMismatchError,
    26: DeprecatedError,
    27: NotReadyError,
    28: GpuNotFoundError,
    29: InvalidStateError,
    30: ResetTypeNotSupportedError,
    999: UnknownError,
}


def _exception_for_code(code: int) -> type:
    """The class raised for an nvmlReturn_t (cucore's C++ layer calls this)."""
    return _BY_CODE.get(code, NvmlError)


__all__ = ["NvmlError"] + [cls.__name__ for cls in _BY_CODE.values()]
