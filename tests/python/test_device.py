"""Devices: one Device object per ordinal and thread, and a device's facts
(compute capability, properties, UUID, PCI bus id, context, memory resource,
default stream). GPU tests: skipped with a reason when no GPU is usable, failed instead under
CUCORE_REQUIRE_GPU=1."""
import threading

import pytest

import cucore
from cucore import Device, DeviceMemoryResource

np = pytest.importorskip("numpy")
pytestmark = pytest.mark.gpu


def test_device_singleton_per_thread(device):
    assert Device(0) is Device(0)
    assert Device() is Device(0)
    assert Device(device_id=0) is Device(0)
    assert Device(Device(0)) is Device(0)
    other = {}
    t = threading.Thread(target=lambda: other.setdefault("d", Device(0)))
    t.start()
    t.join()
    assert other["d"] is not Device(0) and other["d"] == Device(0)
    with pytest.raises(ValueError):
        Device(Device.count() + 7)
    with pytest.raises((ValueError, TypeError)):
        Device(-1)


def test_device_facts(device):
    cc = device.compute_capability
    assert cc.major >= 3 and (cc.major, cc.minor) == tuple(cc)
    assert device.arch == f"{cc.major}{cc.minor}"
    assert device.properties.multiprocessor_count > 0
    assert device.properties.warp_size == 32
    assert isinstance(device.properties.cooperative_launch, bool)
    assert len(device.uuid) == 36 and device.uuid.count("-") == 4
    assert ":" in device.pci_bus_id
    assert device.name
    assert device.device_id == 0 and int(device) == 0
    assert int(device.context.handle) != 0
    assert isinstance(device.memory_resource, DeviceMemoryResource)
    assert device.default_stream is cucore.LEGACY_DEFAULT_STREAM
    assert len(Device.get_all_devices()) == Device.count()
    device.sync()
