"""IPC objects in Python: the cached allocation handle, and pickling as cuda.core does.

- IPCBufferDescriptor and IPCEventDescriptor pickle with plain pickle (bytes).
- An IPCAllocationHandle, an IPC-enabled DeviceMemoryResource or
  PinnedMemoryResource, and an IPC-enabled Event pickle through
  multiprocessing only (a Queue, a Pipe, Process arguments, a Pool), which
  carries the file descriptor into the receiver: a resource arrives mapped
  and registered there, an event opened.
- A memory resource pickled by plain pickle names its UUID: the receiver finds
  it in its registry (from_registry), where multiprocessing put it.
- A Buffer pickles as its memory resource and its IPCBufferDescriptor: the
  receiver imports it. Unpickle buffers from trusted peers only.
"""
from __future__ import annotations

import multiprocessing
import multiprocessing.reduction
import warnings

from cucore._core import (
    Buffer,
    DeviceMemoryResource,
    Event,
    IPCAllocationHandle,
    IPCBufferDescriptor,
    IPCEventDescriptor,
    PinnedMemoryResource,
)

_fork_warned = False


def _check_start_method():
    """Warns once when multiprocessing forks: a forked child cannot use CUDA."""
    global _fork_warned
    if _fork_warned:
        return
    # Process arguments: the child's own start method; a Queue or Pipe: the default one.
    popen = multiprocessing.context.get_spawning_popen()
    method = getattr(popen, "method", None) or multiprocessing.get_start_method(allow_none=True)
    if method == "fork":
        _fork_warned = True
        warnings.warn(
            "multiprocessing start method is 'fork', which CUDA does not support: forked subprocesses "
            "cannot use CUDA. Use multiprocessing.set_start_method('spawn').",
            UserWarning,
            stacklevel=3,
        )


# ---- allocation handles ------------------------------------------------------


def _reduce_allocation_handle(handle):
    if handle.is_closed:
        raise ValueError("Cannot pickle a closed IPCAllocationHandle")
    _check_start_method()
    return _rebuild_allocation_handle, (multiprocessing.reduction.DupFd(handle.handle), handle.uuid)


def _rebuild_allocation_handle(dup, uuid):
    return IPCAllocationHandle._init(dup.detach(), uuid)


# ---- memory resources --------------------------------------------------------


def _require_ipc(mr):
    if not mr.is_ipc_enabled:
        raise RuntimeError(f"Cannot pickle {type(mr).__name__}: the memory resource is not IPC-enabled")


# The reducers name module-level functions: pickle finds those by name.
def _device_resource_from_registry(uuid):
    return DeviceMemoryResource.from_registry(uuid)


def _pinned_resource_from_registry(uuid):
    return PinnedMemoryResource.from_registry(uuid)


def _map_device_resource(device_id, handle):
    return DeviceMemoryResource.from_allocation_handle(device_id, handle)


def _map_pinned_resource(handle):
    return PinnedMemoryResource.from_allocation_handle(handle)


def _reduce_device_resource_by_uuid(mr):
    _require_ipc(mr)
    return _device_resource_from_registry, (mr.uuid,)


def _reduce_pinned_resource_by_uuid(mr):
    _require_ipc(mr)
    return _pinned_resource_from_registry, (mr.uuid,)


def _reduce_device_resource(mr):
    _require_ipc(mr)
    _check_start_method()
    return _map_device_resource, (mr.device_id, mr.get_allocation_handle())


def _reduce_pinned_resource(mr):
    _require_ipc(mr)
    _check_start_method()
    return _map_pinned_resource, (mr.get_allocation_handle(),)


DeviceMemoryResource.__reduce__ = _reduce_device_resource_by_uuid
PinnedMemoryResource.__reduce__ = _reduce_pinned_resource_by_uuid

# ---- descriptors, buffers, events ----------------------------------------------


def _buffer_descriptor(payload, size, uuid):
    return IPCBufferDescriptor._init(payload, size, uuid)


def _event_descriptor(reserved, uses_blocking_sync):
    return IPCEventDescriptor._init(reserved, uses_blocking_sync)


def _import_buffer(mr, descriptor):
    return Buffer.from_ipc_descriptor(mr, descriptor)


def _open_event(descriptor):
    return Event.from_ipc_descriptor(descriptor)


def _reduce_buffer_descriptor(d):
    return _buffer_descriptor, (d._payload, d.size, d._uuid)


def _reduce_event_descriptor(d):
    return _event_descriptor, (d._reserved, d._uses_blocking_sync)


def _reduce_buffer(buffer):
    return _import_buffer, (buffer.memory_resource, buffer.get_ipc_descriptor())


def _reduce_event(event):
    _check_start_method()
    return _open_event, (event.get_ipc_descriptor(),)


IPCBufferDescriptor.__reduce__ = _reduce_buffer_descriptor
IPCEventDescriptor.__reduce__ = _reduce_event_descriptor
Buffer.__reduce__ = _reduce_buffer

multiprocessing.reduction.register(IPCAllocationHandle, _reduce_allocation_handle)
multiprocessing.reduction.register(DeviceMemoryResource, _reduce_device_resource)
multiprocessing.reduction.register(PinnedMemoryResource, _reduce_pinned_resource)
multiprocessing.reduction.register(Event, _reduce_event)
