"""cucore.utils: program caches, cache keys and StridedMemoryView (as cuda.core.utils)."""
from __future__ import annotations

import abc
import functools
from typing import Any, Callable, Optional, Tuple

from cucore._core import (
    FileStreamProgramCache,
    InMemoryProgramCache,
    StridedMemoryView,
    _ProgramCache,
    default_program_cache,
    make_program_cache_key,
)

__all__ = [
    "FileStreamProgramCache",
    "InMemoryProgramCache",
    "ProgramCacheResource",
    "StridedMemoryView",
    "args_viewable_as_strided_memory",
    "default_program_cache",
    "make_program_cache_key",
]


class ProgramCacheResource(abc.ABC):
    """Base of program caches: a mapping from keys (bytes, or str as UTF-8) to the
    compiled bytes. cucore's caches (InMemoryProgramCache, FileStreamProgramCache)
    are registered as subclasses; subclass this for a cache of your own and pass it
    as Program.compile(..., cache=...)."""

    @abc.abstractmethod
    def __getitem__(self, key): ...

    @abc.abstractmethod
    def __setitem__(self, key, value) -> None: ...

    @abc.abstractmethod
    def __delitem__(self, key) -> None: ...

    @abc.abstractmethod
    def __len__(self) -> int: ...

    @abc.abstractmethod
    def clear(self) -> None: ...

    def get(self, key, default=None):
        try:
            return self[key]
        except KeyError:
            return default

    def update(self, items, /) -> None:
        if hasattr(items, "items"):
            items = items.items()
        for key, value in items:
            self[key] = value

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


ProgramCacheResource.register(_ProgramCache)


class _StridedMemoryViewProxy:
    """What args_viewable_as_strided_memory passes for each marked argument:
    call .view(stream_ptr) to get the StridedMemoryView."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def view(self, stream_ptr: Optional[int] = None) -> StridedMemoryView:
        return StridedMemoryView.from_any_interface(self.obj, stream_ptr)


def args_viewable_as_strided_memory(arg_indices: Tuple[int, ...]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: the positional arguments at `arg_indices` arrive wrapped, and
    ``arg.view(stream_ptr)`` gives a StridedMemoryView of them (zero-copy)."""

    def wrapper(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            args = list(args)
            for i in arg_indices:
                args[i] = _StridedMemoryViewProxy(args[i])
            return func(*args, **kwargs)

        return wrapped

    return wrapper


# ---- batched memory operations (cuda.core.utils' copy_batch and friends) ----------
from enum import Enum as _Enum  # noqa: E402

from cucore._core import copy_batch, discard_batch, discard_prefetch_batch, prefetch_batch  # noqa: E402


class MemcpySrcAccessOrder(str, _Enum):
    """When copy_batch may read a source: in stream order, during the call, or any time after it."""

    STREAM = "stream"
    DURING_API_CALL = "during_api_call"
    ANY = "any"


class MemcpyOverlapMode(str, _Enum):
    """Whether a batched copy should prefer to overlap with compute."""

    DEFAULT = "default"
    PREFER_OVERLAP_WITH_COMPUTE = "prefer_overlap_with_compute"


from cucore._options import CopyOptions  # noqa: E402

__all__ += [
    "CopyOptions",
    "MemcpyOverlapMode",
    "MemcpySrcAccessOrder",
    "copy_batch",
    "discard_batch",
    "discard_prefetch_batch",
    "prefetch_batch",
]
