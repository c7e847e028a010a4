"""Green-context options with cuda.core 1.2's names and fields: SMResourceOptions,
WorkqueueResourceOptions, ContextOptions. Plain data; libcucore checks them
when they are used (SMResource.split, Device.create_context)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional, Union

__all__ = ["ContextOptions", "SMResourceOptions", "WorkqueueResourceOptions"]

_IntOrPerGroup = Union[int, Sequence[int], None]

_SHARING_SCOPES = ("device_ctx", "green_ctx_balanced")


@dataclass
class SMResourceOptions:
    """Options for SMResource.split. Each field is one value (one group) or a
    sequence of one value per group; ``count`` sets the number of groups.

    count: SMs per group; None (or 0) is the smallest group the GPU makes.
    Counts are rounded down to the GPU's granularity (a UserWarning says so);
    never fewer groups than asked. coscheduled_sm_count,
    preferred_coscheduled_sm_count and backfill need CUDA 13.1's structured
    split (FeatureUnavailableError before).
    """

    count: _IntOrPerGroup = None
    coscheduled_sm_count: _IntOrPerGroup = None
    preferred_coscheduled_sm_count: _IntOrPerGroup = None
    backfill: Union[bool, Sequence[bool]] = False


@dataclass
class WorkqueueResourceOptions:
    """Options for WorkqueueResource.configure: sharing_scope ("device_ctx" or
    "green_ctx_balanced") and concurrency_limit (>= 1); None leaves a field as is."""

    sharing_scope: Optional[str] = None
    concurrency_limit: Optional[int] = None

    def __post_init__(self):
        s = self.sharing_scope
        if s is not None and (not isinstance(s, str) or s not in _SHARING_SCOPES):
            raise ValueError(f"sharing_scope {s!r} is not a valid sharing scope; must be one of {_SHARING_SCOPES}")
        c = self.concurrency_limit
        if c is not None:
            if isinstance(c, bool) or not isinstance(c, int):
                raise TypeError(f"concurrency_limit must be an int or None, got {type(c).__name__}")
            if c < 1:
                raise ValueError(f"concurrency_limit must be >= 1, got {c}")


@dataclass
class ContextOptions:
    """Options for Device.create_context: the resources of the green context
    (SMResource groups of one split, optionally one WorkqueueResource)."""

    resources: Sequence
