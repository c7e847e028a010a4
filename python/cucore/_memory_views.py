"""Live set views over driver state: ManagedBuffer.accessed_by and
DeviceMemoryResource.peer_accessible_by (cuda.core's AccessedBySetProxy and
PeerAccessibleBySetProxy). Nothing is mirrored: every read asks the driver."""
from __future__ import annotations

from collections.abc import MutableSet
from typing import Any, Iterable, Iterator

from cucore import _core
from cucore._host import Host

__all__ = ["AccessedBySetProxy", "PeerAccessibleBySetProxy"]


class AccessedBySetProxy(MutableSet):
    """The locations with ``set_accessed_by`` advice over a managed buffer."""

    __slots__ = ("_buf",)

    def __init__(self, buf) -> None:
        self._buf = buf

    @classmethod
    def _from_iterable(cls, it: Iterable[Any]) -> set:
        return set(it)

    def __contains__(self, location: object) -> bool:
        if not isinstance(location, (_core.Device, Host)):
            return False
        return location in self._buf._accessed_by()

    def __iter__(self) -> Iterator:
        return iter(self._buf._accessed_by())

    def __len__(self) -> int:
        return len(self._buf._accessed_by())

    def add(self, location) -> None:
        if not isinstance(location, (_core.Device, Host)):
            raise TypeError(f"expected Device or Host, got {type(location).__name__}")
        self._buf._advise_accessed_by(location, True)

    def discard(self, location) -> None:
        if not isinstance(location, (_core.Device, Host)):
            return
        if isinstance(location, Host) and (location.numa_id is not None or location.is_numa_current):
            return  # never in the set: accessed_by takes devices and the generic host only
        self._buf._advise_accessed_by(location, False)

    def __repr__(self) -> str:
        return f"AccessedBySetProxy({set(self._buf._accessed_by())!r})"


def replace_accessed_by(buf, locations) -> None:
    target = set()
    for loc in locations:
        if not isinstance(loc, (_core.Device, Host)):
            raise TypeError(f"accessed_by entries must be Device or Host, got {type(loc).__name__}")
        if isinstance(loc, Host) and (loc.numa_id is not None or loc.is_numa_current):
            raise ValueError("accessed_by takes devices and Host() only (not a host NUMA node)")
        target.add(loc)
    current = set(buf._accessed_by())
    for loc in current - target:
        buf._advise_accessed_by(loc, False)
    for loc in target - current:
        buf._advise_accessed_by(loc, True)


def _device_id(value) -> int:
    if isinstance(value, _core.Device):
        return value.device_id
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected a Device or a device ordinal, got {type(value).__name__}")
    return value


class PeerAccessibleBySetProxy(MutableSet):
    """The devices granted access to a pool's allocations. Every bulk update is
    one cuMemPoolSetAccess; the owning device is ignored."""

    __slots__ = ("_mr",)

    def __init__(self, mr) -> None:
        self._mr = mr

    @classmethod
    def _from_iterable(cls, it: Iterable[Any]) -> set:
        return set(it)

    def _ids(self):
        return _core._pool_peer_ids(self._mr)

    def __contains__(self, value: object) -> bool:
        try:
            return _device_id(value) in self._ids()
        except TypeError:
            return False

    def __iter__(self) -> Iterator:
        return iter([_core.Device(i) for i in self._ids()])

    def __len__(self) -> int:
        return len(self._ids())

    def _apply(self, add, remove) -> None:
        add = sorted({_device_id(v) for v in add})
        remove = sorted({_device_id(v) for v in remove} - set(add))
        if add or remove:
            _core._pool_update_peer_access(self._mr, add, remove)

    def add(self, value) -> None:
        self._apply([value], [])

    def discard(self, value) -> None:
        self._apply([], [value])

    def clear(self) -> None:
        self._apply([], self._ids())

    def update(self, *others) -> None:
        self._apply([v for o in others for v in o], [])

    def difference_update(self, *others) -> None:
        self._apply([], [v for o in others for v in o])

    def intersection_update(self, *others) -> None:
        keep = set(self._ids())
        for o in others:
            keep &= {_device_id(v) for v in o}
        self._apply([], set(self._ids()) - keep)

    def symmetric_difference_update(self, other) -> None:
        current = set(self._ids())
        toggled = {_device_id(v) for v in other}
        self._apply(toggled - current, toggled & current)

    def __ior__(self, other):
        self.update(other)
        return self

    def __iand__(self, other):
        self.intersection_update(other)
        return self

    def __isub__(self, other):
        self.difference_update(other)
        return self

    def __ixor__(self, other):
        self.symmetric_difference_update(other)
        return self

    def __repr__(self) -> str:
        return f"PeerAccessibleBySetProxy({set(self)!r})"


def replace_peer_accessible_by(mr, devices) -> None:
    owner = mr.device_id
    target = {_device_id(v) for v in devices} - {owner}
    current = set(_core._pool_peer_ids(mr))
    add, remove = sorted(target - current), sorted(current - target)
    if add or remove:
        _core._pool_update_peer_access(mr, add, remove)
