"""Compatibility names for code written against cuda.core that imports its
private ``cuda.core._utils`` helpers (its own tests do, for ``CUDAError``,
``handle_return`` and the cuda.bindings ``driver``). cucore keeps no internals
here: the error classes are cucore's own, and the rest are small helpers over
cuda.bindings. See docs/python.md."""
