"""split_by_client_ids (O(n) grouping) against the sort-based implementation it replaced."""
import numpy as np
import pytest

from fastfc import FeCA, FedKStarHC, KFed
from fastfc._validation import ClientRows, row_counts, split_by_client_ids


def old_split(n_samples, client_ids):
    """The previous implementation: np.unique(return_inverse) and a stable argsort."""
    ids = np.asarray(client_ids)
    uniq, inverse = np.unique(ids, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(len(uniq) + 1))
    return [order[bounds[i]:bounds[i + 1]].astype(np.intp) for i in range(len(uniq))], uniq


def as_index(rows, n):
    return np.arange(n)[rows] if isinstance(rows, slice) else rows


def id_cases():
    rng = np.random.default_rng(0)
    n = 5000
    yield "dense ints", rng.integers(0, 7, n)
    yield "negative ints", rng.integers(-50, 50, n)
    yield "int8 full range", rng.integers(-128, 128, n).astype(np.int8)
    yield "uint8", rng.integers(0, 256, n).astype(np.uint8)
    yield "sparse ints", rng.choice(np.array([-(10 ** 15), 3, 10 ** 12, 2 ** 62]), n)
    yield "uint64 huge", rng.choice(np.array([2 ** 64 - 1, 5, 2 ** 63], dtype=np.uint64), n)
    yield "one id per row", rng.permutation(n)
    yield "many clients (> 256)", rng.integers(0, 1000, n)
    yield "many clients (> 65536)", rng.integers(0, 70_000, 100_000)
    yield "bool", rng.integers(0, 2, n).astype(bool)
    yield "bool, all True", np.ones(40, dtype=bool)
    yield "uint8 one value", np.full(30, 200, dtype=np.uint8)
    yield "floats", rng.choice(np.array([0.5, -2.0, 1e9, 3.25]), n)
    yield "short strings (U2)", rng.choice(np.array(["b", "a", "zz", "é", "ab"]), n)
    yield "bytes (S1)", rng.choice(np.array([b"q", b"a", b"m"]), n)
    yield "long strings", rng.choice(np.array(["client-10", "client-2", "client-1", "x"]), n)
    yield "objects", np.array(rng.choice(["b", "a", "c"], n).tolist(), dtype=object)
    yield "python list", rng.integers(0, 4, 300).tolist()
    yield "blocks in id order", np.repeat([3, 5, 9], [10, 1, 20])
    yield "blocks out of id order", np.repeat([9, -1, 4, 2], [7, 3, 1, 12])
    yield "one client", np.full(50, 42)
    yield "one row", np.array([7])


@pytest.mark.parametrize("name,ids", list(id_cases()), ids=[c[0] for c in id_cases()])
def test_split_matches_sort_based(name, ids):
    n = len(ids)
    before = np.array(ids, copy=True)
    rows, uniq = split_by_client_ids(n, ids)
    ref_rows, ref_uniq = old_split(n, ids)
    np.testing.assert_array_equal(uniq, ref_uniq)
    assert np.asarray(uniq).dtype == ref_uniq.dtype
    assert len(rows) == len(ref_rows)
    for r, ref in zip(rows, ref_rows):
        np.testing.assert_array_equal(as_index(r, n), ref)
    np.testing.assert_array_equal(np.asarray(ids), before)  # never modified


def test_contiguous_clients_are_views():
    X = np.arange(40.0).reshape(20, 2)
    rows, _ = split_by_client_ids(20, np.repeat([2, 0, 1], [5, 8, 7]))
    assert all(isinstance(r, slice) for r in rows)
    clients = ClientRows(X, rows)
    assert row_counts(clients) == [8, 7, 5]
    assert all(np.shares_memory(clients[i], X) and clients[i].flags.c_contiguous for i in range(3))
    np.testing.assert_array_equal(clients[2], X[:5])


def test_interleaved_clients_gathered_on_access():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 3))
    ids = rng.integers(0, 3, 30)
    clients = ClientRows(X, split_by_client_ids(30, ids)[0])
    for c in range(3):
        np.testing.assert_array_equal(clients[c], X[ids == c])
        assert not np.shares_memory(clients[c], X)
    assert [len(x) for x in clients] == row_counts(clients) == [int(np.sum(ids == c)) for c in range(3)]


@pytest.mark.parametrize("make", [lambda: KFed(n_clusters=3, random_state=0), lambda: FeCA(3, random_state=0)])
def test_fit_with_ids_leaves_inputs_and_matches_fit_clients(make):
    rng = np.random.default_rng(2)
    X = np.concatenate([rng.normal(c, 0.3, size=(60, 2)) for c in (0, 4, 8)])
    ids = np.array(["b", "a", "c"])[rng.integers(0, 3, len(X))]
    X0, ids0 = X.copy(), ids.copy()
    est = make().fit(X, client_ids=ids)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(ids, ids0)
    ref = make().fit_clients([X[ids == c] for c in ("a", "b", "c")])
    for c, lab in zip(("a", "b", "c"), ref.client_labels_):
        np.testing.assert_array_equal(est.labels_[ids == c], lab)
    np.testing.assert_array_equal(est.client_ids_, ["a", "b", "c"])


@pytest.mark.parametrize("make", [
    lambda: KFed(n_clusters=3, random_state=0),
    lambda: KFed(n_clusters=3, random_state=0, units=None),
    lambda: FeCA(3, random_state=0),
    lambda: FeCA(3, random_state=0, units=None),
    lambda: FedKStarHC(n_clusters=3, random_state=0),
    lambda: FedKStarHC(n_clusters=3, random_state=0, mode="paper"),
], ids=["kfed", "kfed-raw", "feca", "feca-raw", "kstar", "kstar-paper"])
def test_contiguous_clients_views_leave_x_unchanged(make):
    """Contiguous clients reach the methods as views of X: no method may write to them."""
    rng = np.random.default_rng(3)
    X = np.concatenate([rng.normal(c, 0.3, size=(80, 3)) for c in (0, 4, 8)])
    ids = np.repeat([0, 1, 2], 80)
    X0 = X.copy()
    est = make().fit(X, client_ids=ids)
    np.testing.assert_array_equal(X, X0)
    ref = make().fit_clients([X0[ids == c] for c in range(3)])
    np.testing.assert_array_equal(est.labels_, ref.labels_)
