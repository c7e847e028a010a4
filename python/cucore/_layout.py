"""_StridedLayout: a tensor's shape, strides (in elements), itemsize and slice offset, as
cuda.core's _StridedLayout (the part StridedMemoryView and its users read: its
``_layout``/``layout``, ``view(layout=...)``, numba-cuda's ``strides_in_bytes`` and
``is_contiguous_c/_f/_any``; slicing ``layout[...]``, repacking to another itemsize).

Immutable. A thin face: every fact about the layout (dense strides, contiguity, volume,
offsets, sizes, the checks) is libcucore's strided layout (``cucore/strided_layout.hpp``),
one call each. Bad values are ValueError, arithmetic beyond 64 bits OverflowError. A layout
keeps the ints it was given, so one beyond 64 bits can be made; the view it is applied to
refuses it (naming the field), as do the properties that compute on it."""
from __future__ import annotations

from typing import Optional, Tuple, Union

from cucore import _core

_Order = Union[str, Tuple[int, ...]]


class _StridedLayout:
    """The layout of a strided tensor: ``shape``, ``strides`` in elements (None: C-contiguous)
    and ``itemsize`` in bytes, a power of two (``divide_strides=True`` takes byte strides)."""

    __slots__ = ("_shape", "_strides", "_itemsize", "_slice_offset")

    def __init__(self, shape: Tuple[int, ...], strides: Optional[Tuple[int, ...]], itemsize: int,
                 divide_strides: bool = False) -> None:
        self._shape, self._strides, self._itemsize = _core._layout_init(shape, strides, itemsize, bool(divide_strides))
        self._slice_offset = 0

    @classmethod
    def _at(cls, shape: Tuple[int, ...], strides: Optional[Tuple[int, ...]], itemsize: int,
            slice_offset: int) -> "_StridedLayout":
        """The layout with its element at index (0, ...) ``slice_offset`` elements into the
        memory (what slicing and repacking make, and a view made with such a layout reports)."""
        layout = cls(shape, strides, itemsize)
        layout._slice_offset = slice_offset
        return layout

    @classmethod
    def dense(cls, shape: Tuple[int, ...], itemsize: int, stride_order: _Order = "C") -> "_StridedLayout":
        """Dense strides in C order, F order, or a permutation of the axes (the last axis of the
        permutation has stride 1)."""
        return cls(shape, _core._layout_dense_strides(shape, stride_order), itemsize)

    @classmethod
    def dense_like(cls, other: "_StridedLayout", stride_order: _Order = "K") -> "_StridedLayout":
        """``other``'s shape and itemsize with dense strides: in its own order ('K'), C, F or a
        permutation, and no slice offset. ``other`` itself when it is already dense in that order
        (with no slice offset)."""
        if not isinstance(other, _StridedLayout):
            raise TypeError(f"_StridedLayout.dense_like: other must be a _StridedLayout, got {type(other).__name__}")
        strides = _core._layout_dense_like(other._shape, other._strides, stride_order, other._slice_offset == 0)
        return other if strides is None else cls(other._shape, strides, other._itemsize)

    @property
    def shape(self) -> Tuple[int, ...]:
        return self._shape

    @property
    def strides(self) -> Optional[Tuple[int, ...]]:
        """Strides in elements; None when the layout is C-contiguous by construction."""
        return self._strides

    @property
    def itemsize(self) -> int:
        return self._itemsize

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def volume(self) -> int:
        """The number of elements."""
        return _core._layout_volume(self._shape)

    @property
    def slice_offset(self) -> int:
        """The offset, in elements, of the element at index (0, ..., 0) from the memory's start:
        non-zero only after slicing (``layout[...]``); a view made with the layout starts there."""
        return self._slice_offset

    @property
    def slice_offset_in_bytes(self) -> int:
        """``slice_offset * itemsize``."""
        return _core._layout_slice_offset_in_bytes(self._slice_offset, self._itemsize)

    @property
    def strides_in_bytes(self) -> Optional[Tuple[int, ...]]:
        return _core._layout_strides_in_bytes(self._strides, self._itemsize)

    @property
    def stride_order(self) -> Tuple[int, ...]:
        """The axes from the largest stride to the smallest (ties: the larger extent first)."""
        return _core._layout_stride_order(self._shape, self._strides)

    @property
    def is_contiguous_c(self) -> bool:
        return _core._layout_is_contiguous(self._shape, self._strides, "C")

    @property
    def is_contiguous_f(self) -> bool:
        return _core._layout_is_contiguous(self._shape, self._strides, "F")

    @property
    def is_contiguous_any(self) -> bool:
        """Contiguous in some axis order: C-contiguous once the axes are permuted."""
        return _core._layout_is_contiguous(self._shape, self._strides, "any")

    @property
    def is_dense(self) -> bool:
        """Contiguous in some axis order, with no slice offset: the elements are exactly the
        offsets [0, volume)."""
        return self._slice_offset == 0 and self.is_contiguous_any

    @property
    def offset_bounds(self) -> Tuple[int, int]:
        """(min_offset, max_offset), in elements from the memory's start (the slice offset
        included), of the elements; (0, -1) when there are none."""
        return _core._layout_offset_bounds(self._shape, self._strides, self._slice_offset)

    @property
    def min_offset(self) -> int:
        return self.offset_bounds[0]

    @property
    def max_offset(self) -> int:
        return self.offset_bounds[1]

    def required_size_in_bytes(self) -> int:
        """Bytes a buffer needs to hold every element: (max_offset + 1) * itemsize; ValueError
        when negative strides reach before the memory's start (min_offset < 0)."""
        return _core._layout_required_size_in_bytes(self._shape, self._strides, self._itemsize, self._slice_offset)

    @property
    def is_unique(self) -> bool:
        """Every element at its own offset. True for every layout made from a dense one by
        permuting, squeezing, unsqueezing, flattening or reshaping; false for a broadcast one
        (a stride of 0 on an extent above 1). A layout whose axes interleave may be unique yet
        report False: the exact check is costly (as in cuda.core)."""
        return _core._layout_is_unique(self._shape, self._strides)

    def _derived(self, shape_strides: Tuple[Tuple[int, ...], Tuple[int, ...]]) -> "_StridedLayout":
        shape, strides = shape_strides
        return _StridedLayout._at(shape, strides, self._itemsize, self._slice_offset)

    def permuted(self, axis_order: Tuple[int, ...]) -> "_StridedLayout":
        """The axes (shape and strides) in the order of ``axis_order``, a permutation of them."""
        return self._derived(_core._layout_permuted(self._shape, self._strides, axis_order))

    def squeezed(self) -> "_StridedLayout":
        """Without the extents of 1; an empty layout (volume 0) as shape (0,), strides (0,)."""
        return self._derived(_core._layout_squeezed(self._shape, self._strides))

    def unsqueezed(self, axis: Union[int, Tuple[int, ...]]) -> "_StridedLayout":
        """Extents of 1 inserted at ``axis``: an int in [0, ndim] or a tuple of unique axes of
        the result. The layout itself for an empty tuple."""
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        if not axes:
            return self
        return self._derived(_core._layout_unsqueezed(self._shape, self._strides, axes))

    def flattened_axis_mask(self) -> int:
        """The axes ``flattened`` can merge, as a mask (bit i: axis i merges with axis i - 1);
        masks of layouts of one ndim combine with ``&``."""
        return _core._layout_flattened_axis_mask(self._shape, self._strides)

    def flattened(self, start_axis: int = 0, end_axis: int = -1, mask: Optional[int] = None) -> "_StridedLayout":
        """Consecutive axes merged into one where one stride walks them (in C index order):
        those in [start_axis, end_axis], or those of ``mask`` (see flattened_axis_mask)."""
        return self._derived(_core._layout_flattened(self._shape, self._strides, start_axis, end_axis, mask))

    def reshaped(self, shape: Tuple[int, ...]) -> "_StridedLayout":
        """The same elements, in C index order, under ``shape`` (one extent may be -1); ValueError
        when the volumes differ or the strides cannot be split to it."""
        return self._derived(_core._layout_reshaped(self._shape, self._strides, shape))

    def broadcast_to(self, shape: Tuple[int, ...]) -> "_StridedLayout":
        """Broadcast to ``shape`` as NumPy does: added axes and broadcast extents of 1 get
        stride 0; ValueError when the shapes are incompatible."""
        return self._derived(_core._layout_broadcast_to(self._shape, self._strides, shape))

    def to_dense(self, stride_order: _Order = "K") -> "_StridedLayout":
        """Dense strides of the same shape and itemsize, no slice offset; see dense_like."""
        return _StridedLayout.dense_like(self, stride_order)

    def sliced(self, slices) -> "_StridedLayout":
        """``layout[slices]``: an int or a slice per leading axis (or a tuple of them), as NumPy's
        basic indexing. An int in [-extent, extent) drops its axis; a slice keeps it with the
        selected extent and the stride times the step. The slice offset moves to the first
        element selected; when an extent becomes 0 every stride is 0. TypeError for anything
        but ints and slices; ValueError for more entries than axes or an index out of range."""
        shape, strides, offset = _core._layout_sliced(self._shape, self._strides, self._slice_offset, slices)
        return _StridedLayout._at(shape, strides, self._itemsize, offset)

    def __getitem__(self, slices) -> "_StridedLayout":
        return self.sliced(slices)

    def repacked(self, itemsize: int, data_ptr: int = 0, axis: int = -1, keep_dim: bool = True) -> "_StridedLayout":
        """The same memory in items of ``itemsize`` bytes (a power of two): ``axis`` (stride 1,
        extent not 0) unpacks into more items or packs into fewer. Packing asks that the extent,
        the slice offset and the other strides divide by the factor and that ``data_ptr`` be
        aligned to the new itemsize; without ``keep_dim`` an axis packed to extent 1 is dropped.
        The layout itself for its own itemsize; ValueError naming what does not fit."""
        if itemsize == self._itemsize:
            return self
        shape, strides, offset, new_itemsize = _core._layout_repacked(
            self._shape, self._strides, self._slice_offset, self._itemsize, itemsize, data_ptr, axis, bool(keep_dim))
        return _StridedLayout._at(shape, strides, new_itemsize, offset)

    def max_compatible_itemsize(self, max_itemsize: int = 16, data_ptr: int = 0, axis: int = -1) -> int:
        """The largest itemsize up to ``max_itemsize`` that ``repacked`` can take along ``axis``
        (this itemsize when the axis' stride is not 1 or its extent is 0)."""
        return _core._layout_max_compatible_itemsize(self._shape, self._strides, self._slice_offset, self._itemsize,
                                                     max_itemsize, data_ptr, axis)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _StridedLayout):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple:
        # (shape, itemsize, the strides in full, the slice offset): a C-contiguous layout equals
        # its dense() form.
        return _core._layout_key(self._shape, self._strides, self._itemsize) + (self._slice_offset,)

    def __repr__(self) -> str:
        text = f"_StridedLayout(shape={self._shape}, strides={self._strides}, itemsize={self._itemsize}"
        if self._slice_offset:
            text += f", _slice_offset={self._slice_offset}"
        return text + ")"
