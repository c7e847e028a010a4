"""Streams and events as cuda.core 1.2 documents them: the RuntimeError texts
for timing misuse, operators events refuse, waits on what is not an event or
a stream, stream equality by handle. GPU tests (skipped without one)."""
import ctypes
import time

import pytest

import cucore
from cucore import EventOptions, Stream, StreamOptions



def test_timing_errors(device):
    s = device.create_stream()
    timed = EventOptions(timing_enabled=True)
    untimed = EventOptions(timing_enabled=False)
    a = s.record(options=timed)
    b = s.record(options=untimed)
    s.sync()
    with pytest.raises(RuntimeError, match="^Both Events must be created with timing enabled"):
        b - a
    with pytest.raises(RuntimeError, match="^Both Events must be created with timing enabled"):
        a - b
    never = device.create_event(options=timed)
    with pytest.raises(RuntimeError, match="^Both Events must be recorded"):
        never - a
    with pytest.raises(RuntimeError, match="^Both Events must be recorded"):
        a - never
    with pytest.raises(TypeError):
        1 - a
    with pytest.raises(TypeError):
        a - 1
    c = s.record(options=timed)
    time.sleep(0.05)
    d = s.record(options=timed)
    d.sync()
    ms = d - c
    assert isinstance(ms, float) and 0 <= ms < 1000
    c2 = c
    c2 -= c  # __isub__ falls back to __sub__ for two events, as in cuda.core
    assert isinstance(c2, float) and c2 == 0.0


def test_incomplete_events_say_so(device):
    # A kernel that spins until the host writes its flag keeps the second
    # event pending.
    src = r'''
    extern "C" __global__ void wait(volatile int* flag) { while (*flag == 0) { } }
    '''
    kernel = cucore.Program(src, "c++", cucore.ProgramOptions(arch="sm_" + device.arch)).compile("cubin").get_kernel("wait")
    flag_mr = cucore.LegacyPinnedMemoryResource()
    flag = flag_mr.allocate(4)
    ctypes.c_int.from_address(flag.handle).value = 0
    s = device.create_stream()
    timed = EventOptions(timing_enabled=True)
    e1 = s.record(options=timed)
    cucore.launch(s, cucore.LaunchConfig(grid=1, block=1), kernel, flag)
    e2 = s.record(options=timed)
    try:
        with pytest.raises(RuntimeError, match="^One or both events have not completed"):
            e2 - e1
    finally:
        ctypes.c_int.from_address(flag.handle).value = 1
        e2.sync()
    assert e2 - e1 >= 0


def test_stream_waits_and_equality(device):
    s1, s2 = device.create_stream(), device.create_stream()
    s2.wait(s1.record())
    s2.wait(s1)
    with pytest.raises(ValueError):
        s2.wait(event_or_stream="invalid_event")
    twin = Stream.from_handle(int(s1.handle))
    assert s1 == twin and hash(s1) == hash(twin) and s1 != s2
    assert (s1 == "not a stream") is False and (s1 == 123) is False and (s1 == device) is False
    cache = {s1: "v1"}
    cache[twin] = "v2"
    assert len(cache) == 1 and cache[s1] == "v2"
    assert device.default_stream == device.default_stream
    with pytest.raises(ValueError):
        device.create_stream(options=StreamOptions(priority=1))
    assert device.create_stream(options=StreamOptions(nonblocking=True, priority=0)).priority == 0
    s2.sync()
