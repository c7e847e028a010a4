"""The package itself: cuda.core's public names in cucore and cucore.utils, and
the type stubs (py.typed, _core.pyi) it ships. CPU only."""
import os

import cucore


CUDA_CORE_NAMES = [
    "Buffer", "Context", "Device", "DeviceMemoryResource", "DeviceMemoryResourceOptions", "Event",
    "EventOptions", "Kernel", "LEGACY_DEFAULT_STREAM", "LaunchConfig", "LegacyPinnedMemoryResource",
    "Linker", "LinkerOptions", "ManagedMemoryResource", "ManagedMemoryResourceOptions", "MemoryResource",
    "ObjectCode", "PER_THREAD_DEFAULT_STREAM", "PinnedMemoryResource", "PinnedMemoryResourceOptions",
    "Program", "ProgramOptions", "Stream", "StreamOptions", "launch", "utils",
]


UTILS_NAMES = ["FileStreamProgramCache", "InMemoryProgramCache", "ProgramCacheResource", "StridedMemoryView",
               "args_viewable_as_strided_memory", "make_program_cache_key"]


def test_import_names():
    for n in CUDA_CORE_NAMES:
        assert hasattr(cucore, n), n
    for n in UTILS_NAMES:
        assert hasattr(cucore.utils, n), n
    assert isinstance(cucore.__version__, str)


def test_stub_files_ship():
    pkg = os.path.dirname(cucore.__file__)
    assert os.path.exists(os.path.join(pkg, "py.typed"))
    assert os.path.exists(os.path.join(pkg, "_core.pyi"))
