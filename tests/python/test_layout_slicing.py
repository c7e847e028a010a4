"""cucore._layout._StridedLayout's slicing, slice offset and repacking on the CPU, against
NumPy as the judge: random arrays (any strides, negative ones included) sliced by NumPy's
basic indexing give the shape, the strides and the offset of the first element that
``layout[...]`` must give, and a view made with the sliced layout must read exactly NumPy's
elements; ``repacked`` against ``ndarray.view(dtype)``; the transformations (permuted,
squeezed, unsqueezed, reshaped, broadcast_to) against NumPy's own; cuda.core's documented
examples and refusals."""
import random

import pytest

from cucore._layout import _StridedLayout
from cucore.utils import StridedMemoryView

np = pytest.importorskip("numpy")

ITEM = 4
DATA = np.arange(1 << 14, dtype=np.int32)
MIDDLE = 1 << 13  # the arrays start here, so negative strides reach back inside DATA


def random_array(rng):
    """A view into DATA (from MIDDLE) of a random shape and random element strides, with its
    layout; NumPy's as_strided is the array, the layout says the same in elements."""
    shape = tuple(rng.choice([0, 1, 1, 2, 3, 4, 5]) for _ in range(rng.randint(0, 4)))
    if rng.random() < 0.3:
        strides = None
        byte_strides = np.empty(shape, np.int32).strides
    else:
        strides = tuple(rng.randint(-9, 9) for _ in shape)
        byte_strides = tuple(s * ITEM for s in strides)
    a = np.lib.stride_tricks.as_strided(DATA[MIDDLE:], shape, byte_strides)
    return a, _StridedLayout(shape, strides, ITEM)


def random_slices(rng, shape):
    out = []
    for n in shape[:rng.randint(0, len(shape))]:
        if rng.random() < 0.3:
            out.append(rng.randint(-n, n - 1) if n else 0)  # an index (0 is out of range on 0)
            continue
        ends = [None, None, None, -7, -2, -1, 0, 1, 2, 3, 7]
        out.append(slice(rng.choice(ends), rng.choice(ends), rng.choice([None, 1, 2, 3, -1, -2, -3])))
    if len(out) == 1 and rng.random() < 0.5:
        return out[0]  # a bare int or slice, as layout[i] or layout[a:b]
    return tuple(out)


def offset_elements(a):
    return (a.__array_interface__["data"][0] - DATA[MIDDLE:].__array_interface__["data"][0]) // ITEM


def view_of(a, key):
    # a[key] as an array even when every axis is indexed (NumPy gives a scalar copy then).
    return a[(key if isinstance(key, tuple) else (key,)) + (Ellipsis,)]


def test_slicing_is_numpys_basic_indexing():
    rng = random.Random(41)
    base = StridedMemoryView.from_dlpack(DATA[MIDDLE:], -1)
    seen = {"empty": 0, "moved": 0, "negative": 0, "index": 0}
    for _ in range(3000):
        a, lay = random_array(rng)
        key = random_slices(rng, a.shape)
        if any(isinstance(k, int) and a.shape[i] == 0 for i, k in enumerate(key if isinstance(key, tuple) else (key,))):
            with pytest.raises(ValueError, match="Invalid index: 0 out of range for axis"):
                lay[key]
            seen["index"] += 1
            continue
        ref = view_of(a, key)
        got = lay[key]
        assert got.shape == ref.shape, (a.shape, a.strides, key)
        assert got.itemsize == ITEM and got.strides is not None
        if ref.size == 0:
            seen["empty"] += 1
            if a.size or lay.strides is None:  # emptied by a slice: cuda.core zeroes every stride
                assert got.strides == (0,) * ref.ndim
            assert got.offset_bounds == (0, -1)
            continue
        assert got.strides_in_bytes == ref.strides, (a.shape, a.strides, key)
        assert got.slice_offset == offset_elements(ref), (a.shape, a.strides, key)
        assert got.slice_offset_in_bytes == got.slice_offset * ITEM
        seen["moved"] += got.slice_offset != 0
        # The offsets the elements reach, the slice offset included.
        offs = [offset_elements(ref[idx + (Ellipsis,)]) for idx in np.ndindex(ref.shape)]
        assert got.offset_bounds == (min(offs), max(offs))
        seen["negative"] += min(offs) < 0
        # A view made with the sliced layout starts at its first element and reads NumPy's.
        w = base.view(got)
        assert w.ptr == base.ptr + got.slice_offset_in_bytes
        assert w.layout.slice_offset == got.slice_offset and w.layout.shape == got.shape
        assert np.array_equal(np.from_dlpack(w), ref)
    assert min(seen.values()) > 20, seen


def test_slicing_twice_counts_from_the_same_memory():
    # cuda.core's view keeps the layout it was made with: its slice offset counts from the
    # memory's start, so slicing the view's own layout again composes with NumPy's.
    rng = random.Random(42)
    base = StridedMemoryView.from_dlpack(DATA[MIDDLE:], -1)
    for _ in range(500):
        a, lay = random_array(rng)
        k1 = random_slices(rng, a.shape)
        try:
            first = lay[k1]
        except ValueError:
            continue
        r1 = view_of(a, k1)
        k2 = random_slices(rng, r1.shape)
        try:
            second = first[k2]
        except ValueError:
            continue
        w1 = base.view(first)
        ref = view_of(r1, k2)
        # The view reports its layout's shape and slice offset (its strides as a view's: None
        # when C-contiguous, so an extent of 1 may spell another stride).
        again = w1.layout[k2]
        assert (again.shape, again.slice_offset) == (second.shape, second.slice_offset)
        if ref.size:
            w2 = w1.view(w1.layout[k2])
            assert np.array_equal(np.from_dlpack(w2), ref)
            assert w2.ptr == base.ptr + second.slice_offset_in_bytes
            # Another layout given to the sliced view counts from the memory's start too.
            assert w1.view(lay).ptr == base.ptr


def test_slice_offset_is_kept_by_the_transformations_and_dropped_by_dense():
    lay = _StridedLayout.dense((4, 6, 5), 2)[1:, 2:, ::2]
    assert lay.slice_offset == 30 + 10 and lay.slice_offset_in_bytes == 80
    assert lay == _StridedLayout._at((3, 4, 3), (30, 5, 2), 2, 40)
    assert lay != _StridedLayout((3, 4, 3), (30, 5, 2), 2)
    assert repr(lay) == "_StridedLayout(shape=(3, 4, 3), strides=(30, 5, 2), itemsize=2, _slice_offset=40)"
    for derived in (lay.permuted((2, 0, 1)), lay.squeezed(), lay.unsqueezed(0), lay.flattened(),
                    lay[:, :1].reshaped((3, 3)),
                    lay.broadcast_to((2, 3, 4, 3)), lay[()]):
        assert derived.slice_offset == 40, derived
    assert lay.offset_bounds == (40, 40 + 2 * 30 + 3 * 5 + 2 * 2)
    assert lay.required_size_in_bytes() == (lay.max_offset + 1) * 2
    # Dense: contiguous with no slice offset.
    inner = _StridedLayout.dense((4, 6), 4)[1:]
    assert inner.is_contiguous_c and inner.is_contiguous_any and not inner.is_dense
    assert inner.to_dense() == _StridedLayout.dense((3, 6), 4) and inner.to_dense().slice_offset == 0
    assert inner.to_dense("C") is not inner and _StridedLayout.dense_like(inner, "F").slice_offset == 0
    plain = _StridedLayout.dense((3, 6), 4)
    assert plain[()] == plain and plain[()].slice_offset == 0 and plain.is_dense


def test_cuda_cores_documented_examples():
    layout = _StridedLayout.dense((5, 3, 7), 1)
    sliced = layout[:, :, :-1]
    assert not sliced.is_contiguous_c and not sliced.is_contiguous_f and not sliced.is_contiguous_any
    layout = _StridedLayout.dense((5, 4), 4)
    assert layout.repacked(2) == _StridedLayout.dense((5, 8), 2)
    assert layout.repacked(8) == _StridedLayout.dense((5, 2), 8)
    assert layout.repacked(16) == _StridedLayout.dense((5, 1), 16)
    assert layout.repacked(16, keep_dim=False) == _StridedLayout.dense((5,), 16)
    assert layout.repacked(4) is layout
    a = np.ones((5, 6), dtype=np.float32)
    float_view = StridedMemoryView.from_dlpack(a, -1)
    lay = float_view._layout
    assert lay.shape == (5, 6) and lay.itemsize == 4
    complex_view = float_view.view(lay.repacked(8), np.complex64)
    assert complex_view._layout.shape == (5, 3) and complex_view._layout.itemsize == 8
    assert np.from_dlpack(complex_view).shape == (5, 3)
    # The reshape examples.
    layout = _StridedLayout.dense((5, 3, 4), 1)
    assert layout.reshaped((20, 3)) == _StridedLayout.dense((20, 3), 1)
    assert layout.reshaped((4, -1)) == _StridedLayout.dense((4, 15), 1)
    assert layout.permuted((2, 0, 1)).reshaped((4, 15)) == _StridedLayout((4, 15), (1, 4), 1)
    with pytest.raises(ValueError, match="Layout strides are incompatible with the new shape"):
        layout.permuted((2, 0, 1)).reshaped((20, 3))


def test_slicing_refusals():
    lay = _StridedLayout.dense((4, 3), 4)
    for key, error, message in [
        (1.5, TypeError, "Invalid slice: 1.5. Expected slice instance or integer."),
        ((0, "a"), TypeError, "Invalid slice: a. Expected slice instance or integer."),
        (Ellipsis, TypeError, "Invalid slice: Ellipsis. Expected slice instance or integer."),
        (None, TypeError, "Invalid slice: None. Expected slice instance or integer."),
        ((0, 0, 0), ValueError, "The number of slices (3) is greater than the number of dimensions (2)."),
        (4, ValueError, "Invalid index: 4 out of range for axis 0 with extent 4"),
        ((0, -4), ValueError, "Invalid index: -4 out of range for axis 1 with extent 3"),
        (2**70, ValueError, "Invalid index: "),
        (slice(None, None, 0), ValueError, "slice step cannot be zero"),
    ]:
        with pytest.raises(error) as ei:
            lay[key]
        assert message in str(ei.value), (key, str(ei.value))
    # A slice that selects nothing moves no offset.
    assert lay[1:3, 5:7].slice_offset == 3 and lay[1:3, 5:7].strides == (0, 0) and lay[9:].slice_offset == 0
    assert lay[True] == lay[1]  # a bool is an int, as isinstance says
    assert lay[slice(-2**70, 2**70)] == lay[:]  # PySlice_Unpack clamps huge ends


def test_repacked_is_numpys_dtype_view():
    rng = random.Random(43)
    seen = {"packed": 0, "unpacked": 0, "refused": 0}
    dtypes = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
    # Large enough for the widest layout drawn below (8*16*3*8*3 items of 8 bytes, past an
    # offset): every element read lies inside `data`, never past its end.
    data = (np.arange(1 << 17) % 251).astype(np.uint8)
    memory = StridedMemoryView.from_dlpack(data, -1)
    for _ in range(1500):
        itemsize, new = rng.choice([1, 2, 4, 8]), rng.choice([1, 2, 4, 8])
        shape = [rng.choice([1, 2, 3, 4, 6, 8]) for _ in range(rng.randint(1, 3))]
        # The last axis contiguous (as both ask), the others any stride of whole items.
        strides, step = [1] * len(shape), shape[-1] * rng.choice([1, 2])
        for i in reversed(range(len(shape) - 1)):
            strides[i] = step * rng.choice([1, 1, 3])
            step = strides[i] * shape[i]
        offset = rng.choice([0, 0, 1, 2, 4])
        a = np.lib.stride_tricks.as_strided(data[offset * itemsize:].view(dtypes[itemsize]), tuple(shape),
                                            tuple(s * itemsize for s in strides))
        end = (offset + sum((n - 1) * st for n, st in zip(shape, strides)) + 1) * itemsize
        assert end <= data.nbytes, "the layout reaches past the test's memory"
        lay = _StridedLayout._at(tuple(shape), tuple(strides), itemsize, offset)
        w = memory.view(lay, dtypes[itemsize])
        assert np.array_equal(np.from_dlpack(w), a)
        try:
            got = lay.repacked(new)
        except ValueError as e:
            # Refused only for what cuda.core asks of packing: the extent, the other strides
            # and the offset whole numbers of the new item.
            factor = new // itemsize
            assert new > itemsize and (shape[-1] % factor or offset % factor
                                       or any(s % factor for s in strides[:-1])), (shape, strides, offset, str(e))
            seen["refused"] += 1
            continue
        ref = a.view(dtypes[new])
        assert got.shape == ref.shape and got.strides_in_bytes == ref.strides and got.itemsize == new
        assert got.slice_offset_in_bytes == offset * itemsize
        # Element by element, from the memory and from the view of the old items.
        assert np.array_equal(np.from_dlpack(memory.view(got, dtypes[new])), ref)
        assert np.array_equal(np.from_dlpack(w.view(got, dtypes[new])), ref)
        seen["packed" if new > itemsize else "unpacked"] += new != itemsize
        # The largest itemsize repacked takes.
        best = lay.max_compatible_itemsize(16)
        assert best >= itemsize and lay.repacked(best).itemsize == best
        if best < 16:
            with pytest.raises(ValueError):
                lay.repacked(best * 2)
    assert min(seen.values()) > 50, seen


def test_repacked_and_max_compatible_itemsize_refusals():
    lay = _StridedLayout.dense((5, 4), 4)
    for call, message in [
        (lambda: lay.repacked(16, data_ptr=8), "The data pointer (8) must be aligned to the packed itemsize (16)."),
        (lambda: lay.repacked(32), "The axis 1 extent (4) must be divisible by 8."),
        (lambda: lay.repacked(8, axis=0), "The axis 0 stride must be 1, got 4."),
        (lambda: lay.repacked(8, axis=2), "Invalid axis: 2 out of range for 2D tensor"),
        (lambda: lay[:, 1:].repacked(8), "The axis 1 extent (3) must be divisible by 2."),
        (lambda: lay[:, 1:3].repacked(8), "The slice offset (1) must be divisible by 2."),
        (lambda: lay[:, :2][::1].repacked(16, axis=-1), "must be divisible by 4"),
        (lambda: lay.repacked(12), "the new itemsize must be a power of two, got 12"),
        (lambda: _StridedLayout((3, 0), None, 4).repacked(8), "The axis 1 stride must be 1, got 0."),
        (lambda: lay.max_compatible_itemsize(2), "max_itemsize (2) cannot be less than itemsize (4)."),
        (lambda: lay.max_compatible_itemsize(axis=-3), "Invalid axis: -3 out of range for 2D tensor"),
        (lambda: _StridedLayout((), None, 4).max_compatible_itemsize(), "Invalid axis: -1 out of range for 0D tensor"),
    ]:
        with pytest.raises(ValueError) as ei:
            call()
        assert message in str(ei.value), str(ei.value)
    assert lay.max_compatible_itemsize() == 16
    assert lay.max_compatible_itemsize(data_ptr=8) == 8
    assert lay.max_compatible_itemsize(data_ptr=2) == 2  # below the itemsize: unpacking works
    assert lay[:, 1:3].max_compatible_itemsize() == 4
    assert lay.max_compatible_itemsize(axis=0) == 4  # stride 4 on that axis
    assert lay[:0].max_compatible_itemsize() == 4
    # Unpacking scales the other strides and the offset (the axis keeps stride 1).
    assert lay[1:, 1:].repacked(2) == _StridedLayout._at((4, 6), (8, 1), 2, 2 * 5)


def test_transformations_are_numpys():
    # permuted, squeezed, unsqueezed, reshaped and broadcast_to on random arrays: the same
    # shape, and (for every extent above 1) the same strides as NumPy's transpose, squeeze,
    # expand_dims, reshape (when NumPy reshapes without a copy) and broadcast_to.
    rng = random.Random(44)
    reshaped = refused = 0
    for _ in range(2000):
        a, lay = random_array(rng)
        if a.size == 0:
            continue

        def same(got, ref):
            assert got.shape == ref.shape, (a.shape, a.strides, got, ref.strides)
            bytes_ = got.strides_in_bytes or tuple(s * ITEM for s in np.empty(ref.shape, np.int32).strides)
            assert all(s == t for s, t, e in zip(bytes_, ref.strides, ref.shape) if e > 1), (a.strides, got, ref.strides)

        order = list(range(a.ndim))
        rng.shuffle(order)
        same(lay.permuted(tuple(order)), a.transpose(order))
        same(lay.squeezed(), a.squeeze())
        axis = rng.randint(0, a.ndim)
        same(lay.unsqueezed(axis), np.expand_dims(a, axis))
        target = tuple(rng.choice([1, 2, 3]) for _ in range(rng.randint(0, 2))) + tuple(
            e if rng.random() < 0.7 else 1 for e in a.shape)
        try:
            ref = np.broadcast_to(a, target)
        except ValueError:
            with pytest.raises(ValueError, match="cannot be broadcast"):
                lay.broadcast_to(target)
        else:
            same(lay.broadcast_to(target), ref)
        # Reshape: to a random factoring of the volume.
        n, new = a.size, []
        while n > 1 and len(new) < 3:
            f = rng.choice([d for d in range(1, n + 1) if n % d == 0])
            new.append(f)
            n //= f
        new = tuple(new + [n] + [1] * rng.randint(0, 1))
        try:
            ref = np.reshape(a, new, copy=False)
        except ValueError:
            refused += 1
            with pytest.raises(ValueError, match="incompatible with the new shape"):
                lay.reshaped(new)
        else:
            reshaped += 1
            same(lay.reshaped(new), ref)
    assert reshaped > 200 and refused > 100, (reshaped, refused)
