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


def _roots_pass(row):
    """The proximity step's reference pass over one row: roots, first strict minimum, runner-up."""
    best, second, near = np.inf, np.inf, 0
    for j, v in enumerate(row):
        dj = np.sqrt(v)
        if dj < best:
            second, best, near = best, dj, j
        elif dj < second:
            second = dj
    return near, best, second


def test_nearest_two_roots_is_the_pass_over_the_roots():
    """Two square roots instead of k give the pass's index and distances, including squared values
    that differ but share a root (an earlier, larger one must win: the first of equal distances)."""
    rng = np.random.default_rng(0)
    rows = [rng.random(int(rng.integers(1, 30))) * 10.0 ** rng.integers(-300, 300) for _ in range(2000)]
    for x in (2.0, 7.3, 1e-300, 5e300, 0.1):
        up = np.nextafter(x, np.inf)
        rows += [np.array([up, x]), np.array([3 * x, up, up, x, x]), np.array([x, up]), np.array([up, up, x])]
    rows += [np.array([0.0, 0.0]), np.array([np.inf, 1.0]), np.array([np.inf, np.inf]), np.array([5e-324, 0.0])]
    shared_root = 0
    for row in rows:
        D = np.ascontiguousarray(row[:, None], dtype=np.float64)  # (k, 1): one row's squared distances
        got = K.nearest_two_roots(D, 0, D.shape[0])
        ref = _roots_pass(row)
        assert got[0] == ref[0] and got[1] == ref[1] and got[2] == ref[2], row
        shared_root += ref[0] != int(np.argmin(row))
    assert shared_root > 0  # the crafted rows exercise the shared-root case


@pytest.mark.parametrize("case", range(60))
def test_all_starts_in_one_call_same_as_numpy(case, monkeypatch):
    """_start_inits (every start's seeding and proximity step in one compiled call) gives each start the bits
    of the plain NumPy passes, draws the same numbers, and leaves the stream where the loop leaves it: with
    duplicate rows (a start runs out of mass and the loop takes over from it), one seed, 1-130 projected
    dimensions (above 128: the loop), float32 projections (the loop) and rounded rows (equal distances)."""
    rng = np.random.default_rng(1000 + case)
    n = int(rng.integers(2, 600))
    r = int(rng.choice([1, 2, 5, 7, 8, 9, 10, 15, 16, 23, 64, 128, 130]))
    k = 1 if case % 10 == 0 else int(rng.integers(1, min(n, 30) + 1))
    if case % 3 == 0:  # few distinct rows: seeding steps without mass
        base = rng.normal(size=(int(rng.integers(1, min(n, 8) + 1)), r))
        A = np.ascontiguousarray(base[rng.integers(0, base.shape[0], size=n)])
    else:
        A = rng.normal(size=(n, r)) * 10.0 ** rng.integers(-3, 4) + rng.normal(size=r) * 100
        if case % 4 == 1:
            A = np.round(A)
    if case % 7 == 6:
        A = A.astype(np.float32)
    V = np.linalg.qr(rng.normal(size=(r + int(rng.integers(0, 4)), r)))[0]
    n_init = int(rng.integers(1, 11))
    a, b = np.random.default_rng(case), np.random.default_rng(case)
    got = kfed._start_inits(A, V, k, a, n_init)
    with monkeypatch.context() as m:
        _numpy_path(m)
        ref = [kfed._start_init(A, V, k, b) for _ in range(n_init)]
    assert len(got) == n_init
    for (gi, gs), (ri, rs) in zip(got, ref):
        assert gi.dtype == ri.dtype and np.array_equal(gi.view(np.uint64 if gi.itemsize == 8 else np.uint32),
                                                       ri.view(np.uint64 if ri.itemsize == 8 else np.uint32))
        assert gs == rs
    assert a.random() == b.random()


def test_starts_kernel_reports_a_start_without_mass():
    """The kernel stops a start at the step that finds no mass (every row on a seed) and says which."""
    from fastfc._kernels._seed import kfed_starts_kernel

    A = np.repeat(np.eye(3), 4, axis=0)  # 3 distinct rows, 4 seeds wanted
    idx = np.zeros((2, 4), np.int64)
    done = np.zeros(2, np.int64)
    status = kfed_starts_kernel(A, np.array([0, 5]), np.full((2, 3), 0.5), idx, np.zeros((2, 4), np.int64),
                                np.zeros((2, 4, 3)), done)
    assert status == 0 and done.tolist() == [3, 3]
    assert sorted({tuple(A[i]) for i in idx[0, :3]}) == sorted({tuple(A[i]) for i in range(12)})


def _awasthi_sheffet_start_ref(A, V, k, rng):
    """One k-FED start written out from its definition, independent of ``fastfc.kfed``: plain D^2
    seeding (first seed ``rng.integers(n)``; each next one the first row whose running sum of squared
    distances to the nearest seed exceeds ``u * total``, ``u = rng.random()``; with no mass left, a
    uniform pick among the rows not chosen), then the means of the 1/3-proximity sets (row i joins the
    set of its nearest seed r when ``3 |a_i - nu_r| <= |a_i - nu_s|`` for the runner-up s; an empty set
    keeps its seed), mapped back with ``V.T``, and the KMeans seed drawn last."""
    n = A.shape[0]
    idx = [int(rng.integers(n))]
    closest = ((A - A[idx[0]]) ** 2).sum(1)
    for _ in range(1, k):
        cum = np.cumsum(closest)
        if cum[-1] > 0.0:
            u = rng.random()
            pick = min(int(np.searchsorted(cum, u * cum[-1], side="right")), n - 1)
        else:
            free = [i for i in range(n) if i not in idx]
            pick = free[int(rng.integers(len(free)))]
        idx.append(pick)
        closest = np.minimum(closest, ((A - A[pick]) ** 2).sum(1))
    seeds = A[idx]
    dist = np.sqrt(np.stack([((A - s) ** 2).sum(1) for s in seeds], axis=1))
    counts = np.zeros(k, np.int64)
    sums = np.zeros((k, A.shape[1]))
    for i in range(n):
        order = np.argsort(dist[i], kind="stable")
        r = int(order[0])
        if k == 1 or 3.0 * dist[i, r] <= dist[i, order[1]]:
            counts[r] += 1
            sums[r] += A[i]
    proj = seeds.copy()
    proj[counts > 0] = sums[counts > 0] / counts[counts > 0, None]
    return np.array(idx), proj @ V.T, int(rng.integers(0, np.iinfo(np.int32).max))


@pytest.mark.parametrize("case", range(30))
def test_start_equals_the_written_out_definition(case):
    """k-FED's compiled seeding and proximity step (``d2_seed_rows``, ``_start_init`` and the all-starts
    kernel ``_start_inits``, default paths) give, bit for bit, the seeds, the initial centres and the
    KMeans seeds of the start written out from its definition in this test, and use the stream the same
    way -- on random, duplicated and rounded rows (the duplicates run out of mass)."""
    rng = np.random.default_rng(5000 + case)
    n, r = int(rng.integers(2, 120)), int(rng.integers(1, 20))
    k = int(rng.integers(1, min(n, 25) + 1))
    if case % 3 == 0:
        base = rng.normal(size=(int(rng.integers(1, min(n, 6) + 1)), r))
        A = np.ascontiguousarray(base[rng.integers(0, base.shape[0], size=n)])
    else:
        A = rng.normal(size=(n, r)) * 10.0 ** rng.integers(-2, 3)
        if case % 4 == 1:
            A = np.round(A)
    V = np.linalg.qr(rng.normal(size=(r + 3, r)))[0]
    ref = _awasthi_sheffet_start_ref(A, V, k, np.random.default_rng(case))
    ref_next = np.random.default_rng(case)
    _awasthi_sheffet_start_ref(A, V, k, ref_next)
    g = np.random.default_rng(case)
    assert np.array_equal(kfed.d2_seed_rows(A, k, g), ref[0])
    g = np.random.default_rng(case)
    init, seed = kfed._start_init(A, V, k, g)
    assert np.array_equal(init.view(np.uint64), ref[1].view(np.uint64))
    assert seed == ref[2] and g.random() == ref_next.random()
    g = np.random.default_rng(case)
    starts = kfed._start_inits(A, V, k, g, 3)
    h = np.random.default_rng(case)
    for init, seed in starts:
        want = _awasthi_sheffet_start_ref(A, V, k, h)
        assert np.array_equal(init.view(np.uint64), want[1].view(np.uint64)) and seed == want[2]
    assert g.random() == h.random()
