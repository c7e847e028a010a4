"""A `cuda.core` that is cucore: libraries written for NVIDIA's cuda.core
(numba-cuda, ...) run on cucore when tests/python/standin is first on sys.path.

Nothing here re-implements anything: every name is cucore's own object (the
same classes, so isinstance checks and type registries keyed on them see
cucore's), the submodules are cucore's modules, and __version__ is the cuda.core
API version cucore implements, which libraries parse to pick between
cuda.core's 0.x and 1.x APIs.
"""
import sys as _sys

import cucore as _cucore
from cucore import *  # noqa: F401,F403

__version__ = _cucore.cuda_core_api_version
__all__ = list(_cucore.__all__)

# cuda.core's public submodules, as the very module objects of cucore's
# (`from cuda.core.graph import GraphBuilder` is cucore.graph.GraphBuilder).
for _name in ("checkpoint", "graph", "system", "texture", "typing", "utils"):
    _sys.modules[f"{__name__}.{_name}"] = getattr(_cucore, _name)
    globals()[_name] = getattr(_cucore, _name)
del _name


def __getattr__(name):
    # Anything not in cucore.__all__ (e.g. GraphMemoryResource) is still cucore's.
    try:
        return getattr(_cucore, name)
    except AttributeError:
        raise AttributeError(f"module 'cuda.core' (cucore stand-in) has no attribute {name!r}") from None
