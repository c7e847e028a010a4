"""cucore._layout._StridedLayout, the face over libcucore's strided layout, on the CPU: every
property and method on random shapes and strides against a brute force in Python ints
(every element's offset enumerated) and against NumPy's own contiguity flags; cuda.core's
documented examples; the refusals (ValueError for bad values, OverflowError past 64 bits)
and the split between making a layout (any int) and applying one to a view."""
import itertools
import random

import pytest

from cucore._layout import _StridedLayout
from cucore.utils import StridedMemoryView

np = pytest.importorskip("numpy")


# ---- the brute force ---------------------------------------------------------------------
def c_strides(shape):
    out, step = [0] * len(shape), 1
    for i in reversed(range(len(shape))):
        out[i] = step
        step *= shape[i]
    return tuple(out)


def offsets(shape, strides, axes):
    """Every element's offset, the axes of `axes` counting with its last fastest."""
    strides = c_strides(shape) if strides is None else strides
    ranges = [range(shape[a]) for a in axes]
    for idx in itertools.product(*ranges):
        yield sum(i * strides[a] for i, a in zip(idx, axes))


def counts_up(shape, strides, axes):
    return all(off == k for k, off in enumerate(offsets(shape, strides, axes)))


def random_layout(rng):
    shape = tuple(rng.choice([0, 1, 1, 2, 3, 4, 2, 3]) for _ in range(rng.randint(0, 4)))
    kind = rng.randint(0, 3)
    if kind == 0:
        return shape, None
    if kind == 1:  # dense in a random order, maybe nudged
        order = list(range(len(shape)))
        rng.shuffle(order)
        strides, step = [0] * len(shape), 1
        for a in reversed(order):
            strides[a] = step
            step *= shape[a]
        if strides and rng.random() < 0.4:
            strides[rng.randrange(len(strides))] += 1
        return shape, tuple(strides)
    return shape, tuple(rng.randint(-6, 6) for _ in shape)


def test_every_property_is_the_brute_force():
    rng = random.Random(31)
    seen = {"c": 0, "f": 0, "any_only": 0, "none": 0, "negative": 0}
    for _ in range(1500):
        shape, strides = random_layout(rng)
        itemsize = rng.choice([1, 2, 4, 8, 16])
        lay = _StridedLayout(shape, strides, itemsize)
        n = len(shape)
        assert (lay.shape, lay.strides, lay.itemsize, lay.ndim) == (shape, strides, itemsize, n)
        assert lay.volume == len(list(offsets(shape, strides, range(n))))
        c = counts_up(shape, strides, list(range(n)))
        f = counts_up(shape, strides, list(reversed(range(n))))
        anyorder = any(counts_up(shape, strides, list(p)) for p in itertools.permutations(range(n)))
        assert (lay.is_contiguous_c, lay.is_contiguous_f, lay.is_contiguous_any) == (c, f, anyorder), (shape, strides)
        assert lay.is_dense == anyorder
        assert lay.strides_in_bytes == (None if strides is None else tuple(s * itemsize for s in strides))
        offs = list(offsets(shape, strides, range(n)))
        bounds = (min(offs), max(offs)) if offs else (0, -1)
        assert lay.offset_bounds == bounds and (lay.min_offset, lay.max_offset) == bounds
        if bounds[0] < 0:
            seen["negative"] += 1
            with pytest.raises(ValueError, match="negative strides reach offset"):
                lay.required_size_in_bytes()
        else:
            assert lay.required_size_in_bytes() == (bounds[1] + 1) * itemsize
        assert lay.slice_offset == 0 and lay.slice_offset_in_bytes == 0
        # Equal (and hashed alike) to the same layout spelled with its strides in full.
        full = _StridedLayout(shape, c_strides(shape) if strides is None else strides, itemsize)
        assert lay == full and hash(lay) == hash(full)
        assert lay != _StridedLayout(shape, strides, itemsize * 2)
        seen["c"] += c
        seen["f"] += f
        seen["any_only"] += anyorder and not c and not f
        seen["none"] += not anyorder
    assert min(seen.values()) > 10, seen


def test_dense_strides_count_up_in_every_order():
    rng = random.Random(32)
    for _ in range(500):
        shape = random_layout(rng)[0]
        n = len(shape)
        order = list(range(n))
        rng.shuffle(order)
        spelled = tuple(a - n if rng.random() < 0.5 else a for a in order)  # negative axes count from the end
        for lay, axes in [(_StridedLayout.dense(shape, 4, tuple(order)), order),
                          (_StridedLayout.dense(shape, 4, spelled), order),
                          (_StridedLayout.dense(shape, 4, list(order)), order),
                          (_StridedLayout.dense(shape, 4), list(range(n))),
                          (_StridedLayout.dense(shape, 4, "F"), list(reversed(range(n))))]:
            assert counts_up(shape, lay.strides, axes), (shape, lay)
            # Each stride: the product of the extents after its axis in the order.
            for k, a in enumerate(axes):
                p = 1
                for b in axes[k + 1:]:
                    p *= shape[b]
                assert lay.strides[a] == p
        if all(e > 1 for e in shape):
            assert _StridedLayout.dense(shape, 4, tuple(order)).stride_order == tuple(order)


def test_cuda_cores_documented_examples():
    assert _StridedLayout.dense((5, 3, 7), 1, "C") == _StridedLayout((5, 3, 7), (21, 7, 1), 1)
    assert _StridedLayout.dense((5, 3, 7), 1, "F") == _StridedLayout((5, 3, 7), (1, 5, 15), 1)
    assert _StridedLayout.dense((5, 3, 7), 1, (2, 0, 1)) == _StridedLayout((5, 3, 7), (3, 1, 15), 1)
    assert _StridedLayout.dense((5, 3, 7), 1).stride_order == (0, 1, 2)
    assert _StridedLayout.dense((5, 3, 7), 1, stride_order="F").stride_order == (2, 1, 0)
    assert _StridedLayout.dense((5, 3, 7), 1, stride_order=(2, 0, 1)).stride_order == (2, 0, 1)
    assert _StridedLayout.dense((2, 5, 3), 1, "F") == _StridedLayout((2, 5, 3), (1, 2, 10), 1)
    assert repr(_StridedLayout((2, 3), None, 4)) == "_StridedLayout(shape=(2, 3), strides=None, itemsize=4)"


def test_to_dense_keeps_the_order_and_the_layout_itself_when_dense():
    f = _StridedLayout.dense((4, 3, 2), 8, "F")
    assert f.to_dense() is f and f.to_dense("F") is f and _StridedLayout.dense_like(f) is f
    assert f.to_dense("C") == _StridedLayout.dense((4, 3, 2), 8)
    gappy = _StridedLayout((4, 3), (1, 8), 2)  # F order with a gap: made dense in its own order
    assert gappy.to_dense() == _StridedLayout((4, 3), (1, 4), 2)
    assert gappy.to_dense((0, 1)) == _StridedLayout((4, 3), (3, 1), 2)
    c = _StridedLayout((4, 3), None, 2)
    assert c.to_dense("C") is c and c.to_dense() is c
    with pytest.raises(ValueError, match="'K', 'C', 'F' or a permutation"):
        c.to_dense("X")
    with pytest.raises(TypeError, match="must be a _StridedLayout"):
        _StridedLayout.dense_like((4, 3))


def test_views_of_numpy_arrays_agree_with_numpys_flags():
    # NumPy's contiguity flags are an independent judge (relaxed strides: extents of 1
    # and empty arrays count as contiguous); numba-cuda reads exactly these properties.
    rng = np.random.default_rng(33)
    base = rng.random((4, 5, 6)).astype(np.float32)
    arrays = [base, base.T, base.transpose(1, 0, 2), base[:, ::2], base[::-1], base[:, :1], base[:0],
              base[:, 1:2, :].transpose(2, 1, 0), np.asfortranarray(base)[:, :, 3:4], base.reshape(-1)[::3],
              np.broadcast_to(base[:1], (3, 5, 6)), base[1, 2:3, 4:5]]
    for a in arrays:
        lay = StridedMemoryView.from_dlpack(a, -1).layout
        assert lay.shape == a.shape and lay.itemsize == 4
        assert (lay.is_contiguous_c, lay.is_contiguous_f) == (a.flags.c_contiguous, a.flags.f_contiguous), a.strides
        byte_strides = tuple(s * 4 for s in (lay.strides or c_strides(a.shape)))
        assert all(s == t for s, t, e in zip(byte_strides, a.strides, a.shape) if e > 1)
        if lay.strides is not None:
            assert lay.strides_in_bytes == a.strides
        if lay.min_offset >= 0 and a.size:
            assert lay.required_size_in_bytes() == sum((e - 1) * s for e, s in zip(a.shape, a.strides)) + 4


def test_view_with_random_layouts_reads_numpys_as_strided():
    rng = random.Random(34)
    data = np.arange(4096, dtype=np.int32)
    v = StridedMemoryView.from_dlpack(data, -1)
    for _ in range(200):
        shape, strides = random_layout(rng)
        lay = _StridedLayout(shape, strides, 4)
        if lay.min_offset < 0:
            continue  # a view of data's start reaches only forward
        w = v.view(layout=lay)
        expect = np.lib.stride_tricks.as_strided(data, shape, lay.strides_in_bytes or tuple(s * 4 for s in c_strides(shape)))
        assert np.array_equal(np.from_dlpack(w), expect), (shape, strides)
        # The view reports C strides as None (an extent of 1's stride is free).
        assert w.layout == lay or (w.layout.strides is None and lay.is_contiguous_c and lay.volume)


def test_bad_values_are_refused_naming_them():
    for args, error, message in [
        (((4, -2), None, 4), ValueError, "extent 1 is negative (-2)"),
        (((4,), None, 3), ValueError, "itemsize must be a power of two, got 3"),
        (((4,), None, 0), ValueError, "itemsize must be a power of two, got 0"),
        (((4, 2), (1,), 4), ValueError, "strides has 1 entries for a shape of 2"),
        (((4, 2), (), 4), ValueError, "strides has 0 entries for a shape of 2"),
        (((4,), "ab", 4), TypeError, "strides[0] must be an int"),
        (((4.0,), None, 4), TypeError, "shape[0] must be an int"),
        ((5, None, 4), TypeError, "shape must be a tuple of ints"),
        (((-2**70,), None, 4), OverflowError, "shape[0]"),
        (((4,), None, 2**70), OverflowError, "itemsize"),
    ]:
        with pytest.raises(error) as ei:
            _StridedLayout(*args)
        assert message in str(ei.value), (args, str(ei.value))
    with pytest.raises(ValueError, match="stride 6 bytes is not a multiple of the itemsize"):
        _StridedLayout((2,), (6,), 4, divide_strides=True)
    for order, message in [((0, 1), "stride order has 2 axes for a shape of 3"),
                           ((0, 1, 3), "axis 3, out of range for 3 dimensions"),
                           ((0, 2, -1), "names axis 2 twice"),
                           ("K", "'C', 'F' or a permutation"),
                           (None, "'C', 'F' or a permutation")]:
        with pytest.raises(ValueError) as ei:
            _StridedLayout.dense((2, 3, 4), 4, order)
        assert message in str(ei.value), (order, str(ei.value))
    assert _StridedLayout((np.int64(3), np.int32(2)), [np.int64(2), 1], np.int64(4)).shape == (3, 2)


def test_huge_ints_are_kept_until_used():
    # Making a layout accepts any int (as it always did); applying it to a view refuses what
    # does not fit (test_input_validation), and so do the properties that compute on it.
    lay = _StridedLayout((2**63,), None, 4)
    assert lay.shape == (2**63,) and lay.ndim == 1
    for prop in ("volume", "is_contiguous_c", "is_contiguous_any", "offset_bounds"):
        with pytest.raises(OverflowError, match=r"_StridedLayout.shape\[0\]"):
            getattr(lay, prop)
    assert _StridedLayout((2,), (2**70,), 4).strides == (2**70,)
    # Arithmetic past 64 bits is OverflowError, as cuda.core's overflow checks raise.
    with pytest.raises(OverflowError, match="element count overflows"):
        _StridedLayout((2**62, 4), None, 4).volume
    with pytest.raises(OverflowError, match="times the itemsize"):
        _StridedLayout((2,), (2**62,), 4).strides_in_bytes
    with pytest.raises(OverflowError, match="strides reach beyond 64 bits"):
        _StridedLayout((3, 3), (2**62, 1), 4).offset_bounds
    with pytest.raises(OverflowError, match="span in bytes overflows"):
        _StridedLayout((2**61,), (1,), 8).required_size_in_bytes()
