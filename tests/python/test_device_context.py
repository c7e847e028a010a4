"""Device methods act in their device's context and leave the thread's current
context as they found it (cuda.core 1.3: create_stream, create_event,
create_opaque_array, create_mipmapped_array, create_texture_object,
create_surface_object, sync), and Stream.wait orders a stream after a stream
of another device. The current context is read from the driver itself
(cuCtxGetCurrent through ctypes), not from cucore. All GPU tests; the
two-device ones need a second GPU (CUCORE_REQUIRE_DEVICES=2 makes them fail
instead of skipping where there is none)."""
import ctypes
import os
import threading
import warnings

import pytest

import cucore
from cucore import ContextOptions, Device, SMResourceOptions
from cucore.texture import OpaqueArrayOptions, MipmappedArrayOptions, ResourceDescriptor

from conftest import require_gpu


def _cuda():
    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuCtxGetCurrent.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    return lib


def current_context():
    """The driver's current context on this thread (0: none)."""
    c = ctypes.c_void_p()
    assert _cuda().cuCtxGetCurrent(ctypes.byref(c)) == 0
    return c.value or 0


def set_current_context(handle):
    assert _cuda().cuCtxSetCurrent(ctypes.c_void_p(handle)) == 0


def in_thread(fn):
    """Runs fn on a fresh thread (no context current there) and re-raises what it raised."""
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - carried to the caller
            out["error"] = e

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out.get("value")


def require_devices(n):
    require_gpu()
    have = Device.count()
    if have >= n:
        return
    if int(os.environ.get("CUCORE_REQUIRE_DEVICES", "0") or 0) >= n:
        pytest.fail(f"CUCORE_REQUIRE_DEVICES={n} but this machine has {have} CUDA device(s)")
    pytest.skip(f"needs {n} CUDA devices; this machine has {have}")


def _ctx_handle(ctx):
    return int(ctx.handle)


def each_device_method(dev, check):
    """Calls every Device method cuda.core 1.3 runs in the device's context,
    `check(what, obj)` after each."""
    s = dev.create_stream()
    check("create_stream", s)
    check("create_event", dev.create_event())
    dev.sync()
    check("sync", None)
    arr = dev.create_opaque_array(OpaqueArrayOptions(shape=(16, 8), format="float32", num_channels=1,
                                                     is_surface_load_store=True))
    check("create_opaque_array", arr)
    check("create_mipmapped_array", dev.create_mipmapped_array(
        MipmappedArrayOptions(shape=(16, 16), format="float32", num_channels=1, num_levels=2)))
    check("create_texture_object", dev.create_texture_object(resource=ResourceDescriptor.from_opaque_array(arr)))
    check("create_surface_object", dev.create_surface_object(resource=ResourceDescriptor.from_opaque_array(arr)))


def test_device_methods_leave_no_context_current():
    require_gpu()

    def body():
        assert current_context() == 0
        dev = Device(0)

        def check(what, obj):
            assert current_context() == 0, f"{what} left a context current"
            if obj is not None:
                assert obj.device.device_id == 0, what
            if isinstance(obj, cucore.Stream):
                assert obj.context == dev.context

        each_device_method(dev, check)

    # What the methods made goes in the thread too, with no context current: a
    # texture or surface object is destroyed in its own context (cuda.core 1.3),
    # where the driver would refuse it and cucore warn.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        in_thread(body)
    failed = [str(w.message) for w in caught if issubclass(w.category, cucore.CUDAWarning)]
    assert not failed, failed


def test_device_methods_leave_another_context_of_the_device_current():
    require_gpu()

    def body():
        dev = Device(0)
        groups, _ = dev.resources.sm.split(SMResourceOptions(count=dev.resources.sm.min_partition_size))
        green = dev.create_context(ContextOptions([groups[0]]))
        set_current_context(_ctx_handle(green))
        try:

            def check(what, obj):
                assert current_context() == _ctx_handle(green), f"{what} changed the current context"
                if isinstance(obj, (cucore.Stream, cucore.Event)):
                    # Made in the device's primary context, not the green one that was current.
                    assert obj.context == dev.context and not obj.context.is_green, what

            each_device_method(dev, check)
        finally:
            set_current_context(0)

    in_thread(body)


def test_device_methods_on_device_1_leave_device_0_current():
    require_devices(2)

    def body():
        d0, d1 = Device(0), Device(1)
        for before in (None, d0):
            if before is not None:
                before.set_current()
            want = _ctx_handle(d0.context) if before is not None else 0

            def check(what, obj):
                assert current_context() == want, f"{what} changed the current context"
                if obj is not None:
                    assert obj.device.device_id == 1, what
                if isinstance(obj, (cucore.Stream, cucore.Event)):
                    assert obj.context == d1.context, what

            each_device_method(d1, check)
        set_current_context(0)

    in_thread(body)


def test_texture_over_another_devices_array_is_refused():
    require_devices(2)
    d0, d1 = Device(0), Device(1)
    d0.set_current()
    arr = d1.create_opaque_array(OpaqueArrayOptions(shape=(8,), format="float32", num_channels=1,
                                                    is_surface_load_store=True))
    res = ResourceDescriptor.from_opaque_array(arr)
    with pytest.raises(ValueError, match="belongs to device 1, not device 0"):
        d0.create_texture_object(resource=res)
    with pytest.raises(ValueError, match="belongs to device 1, not device 0"):
        d0.create_surface_object(resource=res)
    assert current_context() == _ctx_handle(d0.context)


def test_stream_waits_on_streams_and_events_of_another_device():
    require_devices(2)

    class Foreign:  # another library's stream, by the protocol
        def __init__(self, s):
            self.s = s

        def __cuda_stream__(self):
            return (0, int(self.s.handle))

    def body():
        d0, d1 = Device(0), Device(1)
        d0.set_current()
        s0, s1 = d0.create_stream(), d1.create_stream()
        want = _ctx_handle(d0.context)
        s0.wait(s1)  # the marking event is made in s1's context (cuEventRecord refuses one of d0's)
        s1.wait(s0)
        s0.wait(Foreign(s1))
        s0.wait(s1.record())
        assert current_context() == want
        set_current_context(0)
        s1.wait(s0)  # with nothing current
        assert current_context() == 0
        s0.sync()
        s1.sync()

    in_thread(body)
