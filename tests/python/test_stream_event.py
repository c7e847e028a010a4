"""Streams and events: creation with options, recording, timing, waits,
wrapping a handle or a __cuda_stream__ object, close, and timing refused on
events made without it. GPU tests: skipped with a reason when no GPU is usable, failed instead under
CUCORE_REQUIRE_GPU=1."""
import pytest

from cucore import EventOptions, Stream, StreamOptions

np = pytest.importorskip("numpy")
pytestmark = pytest.mark.gpu


def test_streams_and_events(device):
    s = device.create_stream()
    assert int(s.handle) != 0 and s.is_nonblocking
    assert s.__cuda_stream__() == (0, int(s.handle))
    assert s.device is device
    s2 = device.create_stream(options=StreamOptions(nonblocking=False))
    assert not s2.is_nonblocking
    e1 = s.record(options=EventOptions(timing_enabled=True))
    e2 = device.create_event(EventOptions(timing_enabled=True))
    s.record(e2)
    s.sync()
    ms = e2 - e1
    assert isinstance(ms, float) and ms >= 0
    assert e2.is_done
    s2.wait(e2)
    s2.wait(s)
    wrapped = Stream.from_handle(s.handle)
    assert wrapped == s
    foreign = device.create_stream(s)  # any object with __cuda_stream__
    assert foreign.handle == s.handle
    s.close()
    assert s.is_closed
    s.close()  # idempotent
    s2.close()


def test_event_without_timing_raises(device):
    s = device.create_stream()
    a, b = s.record(), s.record()
    s.sync()
    with pytest.raises(RuntimeError, match="timing enabled"):  # cuda.core's type and text
        b - a
