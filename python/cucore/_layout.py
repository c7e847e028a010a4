"""_StridedLayout: a tensor's shape, strides (in elements) and itemsize, as cuda.core's
_StridedLayout (the part StridedMemoryView uses: its ``_layout``/``layout`` and ``view(layout=...)``).
Immutable; the contiguity rules are libcucore's."""
from __future__ import annotations

from typing import Optional, Tuple, Union

from cucore._core import _is_contiguous


class _StridedLayout:
    """The layout of a strided tensor: ``shape``, ``strides`` in elements (None: C-contiguous)
    and ``itemsize`` in bytes (``divide_strides=True`` takes byte strides)."""

    __slots__ = ("_shape", "_strides", "_itemsize")

    def __init__(self, shape: Tuple[int, ...], strides: Optional[Tuple[int, ...]], itemsize: int,
                 divide_strides: bool = False) -> None:
        shape = tuple(int(e) for e in shape)
        if any(e < 0 for e in shape):
            raise ValueError(f"_StridedLayout: extents must be non-negative, got {shape}")
        itemsize = int(itemsize)
        if itemsize <= 0 or itemsize & (itemsize - 1):
            raise ValueError(f"_StridedLayout: itemsize must be a power of two, got {itemsize}")
        if strides is not None:
            strides = tuple(int(s) for s in strides)
            if len(strides) != len(shape):
                raise ValueError(f"_StridedLayout: {len(strides)} strides for a shape of {len(shape)}")
            if divide_strides:
                if any(s % itemsize for s in strides):
                    raise ValueError(f"_StridedLayout: strides {strides} are not multiples of the itemsize {itemsize}")
                strides = tuple(s // itemsize for s in strides)
        self._shape, self._strides, self._itemsize = shape, strides, itemsize

    @classmethod
    def dense(cls, shape: Tuple[int, ...], itemsize: int, stride_order: Union[str, Tuple[int, ...]] = "C") -> "_StridedLayout":
        """Dense strides in C order, F order, or a permutation of the axes (the last axis of the
        permutation has stride 1)."""
        shape = tuple(int(e) for e in shape)
        n = len(shape)
        if stride_order == "C":
            order = tuple(range(n))
        elif stride_order == "F":
            order = tuple(reversed(range(n)))
        else:
            order = tuple(stride_order)
            if sorted(order) != list(range(n)):
                raise ValueError(f"_StridedLayout.dense: stride_order must be 'C', 'F' or a permutation of {tuple(range(n))}")
        strides = [0] * n
        step = 1
        for axis in reversed(order):
            strides[axis] = step
            step *= shape[axis]
        return cls(shape, tuple(strides), itemsize)

    @property
    def shape(self) -> Tuple[int, ...]:
        return self._shape

    @property
    def strides(self) -> Optional[Tuple[int, ...]]:
        return self._strides

    @property
    def itemsize(self) -> int:
        return self._itemsize

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def volume(self) -> int:
        n = 1
        for e in self._shape:
            n *= e
        return n

    @property
    def slice_offset(self) -> int:
        return 0

    @property
    def strides_in_bytes(self) -> Optional[Tuple[int, ...]]:
        return None if self._strides is None else tuple(s * self._itemsize for s in self._strides)

    @property
    def is_contiguous_c(self) -> bool:
        return _is_contiguous(self._shape, self._strides, "C")

    @property
    def is_contiguous_f(self) -> bool:
        return _is_contiguous(self._shape, self._strides, "F")

    @property
    def is_contiguous_any(self) -> bool:
        """Contiguous in some axis order: C-contiguous once the axes are permuted."""
        if self.is_contiguous_c or self.is_contiguous_f:
            return True
        axes = sorted((s, e) for s, e in zip(self._strides, self._shape) if e != 1)
        step = 1
        for s, e in axes:
            if s != step:
                return False
            step *= e
        return True

    @property
    def is_dense(self) -> bool:
        """Contiguous in some axis order, with no offset (cucore's layouts have none)."""
        return self.is_contiguous_any

    def required_size_in_bytes(self) -> int:
        """Bytes a buffer needs to hold every element: (max offset + 1) * itemsize."""
        if self.volume == 0:
            return 0
        strides = self._strides if self._strides is not None else _StridedLayout.dense(self._shape, 1).strides
        if any(s < 0 for s in strides):
            raise ValueError("_StridedLayout.required_size_in_bytes: negative strides reach before the start")
        return (sum((e - 1) * s for e, s in zip(self._shape, strides)) + 1) * self._itemsize

    def to_dense(self, stride_order: Union[str, Tuple[int, ...]] = "C") -> "_StridedLayout":
        return _StridedLayout.dense(self._shape, self._itemsize, stride_order)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _StridedLayout):
            return NotImplemented
        return (self._shape, self._itemsize, self._full_strides()) == (other._shape, other._itemsize, other._full_strides())

    def __hash__(self) -> int:
        return hash((self._shape, self._itemsize, self._full_strides()))

    def _full_strides(self) -> Tuple[int, ...]:
        return self._strides if self._strides is not None else _StridedLayout.dense(self._shape, 1).strides

    def __repr__(self) -> str:
        return f"_StridedLayout(shape={self._shape}, strides={self._strides}, itemsize={self._itemsize})"
