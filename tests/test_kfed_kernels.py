"""k-FED's seeding and proximity kernels compute the same bits and draw the same numbers as the NumPy passes."""
import numpy as np
import pytest

from fastfc import kfed
from fastfc._kernels import _kfed as K


def _numpy_path(monkeypatch):
    monkeypatch.setattr(kfed, "_kfed_kernels_apply", lambda A: False)


@pytest.mark.parametrize("r", [1, 3, 7, 8, 9, 16, 31, 128, 129, 300])
def test_row_sqdist_matches_numpy_rounding(r):
    rng = np.random.default_rng(r)
    A = rng.normal(size=(57, r)) * 1e3 + rng.normal(size=r) * 1e4
    out = np.empty(57)
    K.row_sqdist_to(A, 11, out, np.empty(max(8, r)))
    ref = ((A - A[11]) ** 2).sum(1)
    assert np.array_equal(out.view(np.uint64), ref.view(np.uint64))


@pytest.mark.parametrize("case", range(40))
def test_seeding_and_proximity_same_as_numpy(case, monkeypatch):
    # duplicate rows make some seeding steps find no mass: the kernel hands over to the NumPy loop
    rng = np.random.default_rng(100 + case)
    n, r = int(rng.integers(2, 80)), int(rng.integers(1, 12))
    k = int(rng.integers(1, n + 1))
    base = rng.normal(size=(int(rng.integers(1, n + 1)), r))
    A = np.ascontiguousarray(base[rng.integers(0, base.shape[0], size=n)])
    V = np.linalg.qr(rng.normal(size=(r + 2, r)))[0]
    a, b = np.random.default_rng(case), np.random.default_rng(case)
    got_rows = kfed.d2_seed_rows(A, k, a)
    got_init, got_seed = kfed._start_init(A, V, k, a)
    with monkeypatch.context() as m:
        _numpy_path(m)
        ref_rows = kfed.d2_seed_rows(A, k, b)
        ref_init, ref_seed = kfed._start_init(A, V, k, b)
    assert np.array_equal(got_rows, ref_rows)
    assert np.array_equal(got_init.view(np.uint64), ref_init.view(np.uint64))
    assert got_seed == ref_seed
    assert a.random() == b.random()  # the streams are left in the same place


def test_seeding_all_duplicates_falls_back():
    A = np.ones((6, 2))
    rows = kfed.d2_seed_rows(A, 4, np.random.default_rng(0))
    assert np.unique(rows).size == 4  # uniform among rows not yet chosen
