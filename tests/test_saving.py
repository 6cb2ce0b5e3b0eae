"""Saved models: ``est.save`` / ``fastfc.load`` for every estimator, without pickle.

Round trips (predict and every fitted attribute identical, also in a new process), the rule for
parameters that are estimators or cannot be saved, the format's refusals (newer version, another
method, tampering) and a fuzz of the loader (``fuzz_harness.py``, shared with ``test_protocol_fuzz.py``): whatever
bytes arrive, ``model_from_bytes`` returns a working estimator or raises ``ModelFileError``, quickly.
"""
from __future__ import annotations

import io
import json
import subprocess
import sys
import time
import warnings
import zipfile

import numpy as np
import pytest
from fuzz_harness import (
    READ_BUDGET, apply_mutations, byte_flip, fuzz_settings, json_edit, json_values, reads_or_rejects, truncation,
)
from hypothesis import given
from hypothesis import strategies as st
from sklearn.exceptions import NotFittedError

import fastfc
from fastfc import FeCA, FedCRef, FedHIRE, FedKMeans, FedKStarHC, GOLD, KFed
from fastfc.datasets import load_dataset
from fastfc.protocol import Message
from fastfc.saving import (
    MODEL_FORMAT_VERSION, ModelFileError, _digest, model_from_bytes, model_to_bytes,
)


def _iris_clients():
    X, y = load_dataset("iris", standardize=True)
    return X, [X[::3], X[1::3], X[2::3]]


ESTIMATORS = {
    "KFed": lambda: KFed(n_clusters=3, random_state=0),
    "KFed-refined": lambda: KFed(n_clusters=3, random_state=0, refine_rounds=3),
    "FeCA": lambda: FeCA(n_clusters=3, random_state=0),
    "FedHIRE": lambda: FedHIRE(n_clusters=3, random_state=0),
    "GOLD": lambda: GOLD(n_clusters=3, random_state=0),
    "FedKStarHC": lambda: FedKStarHC(n_clusters=3, random_state=0),
    "FedKStarHC-auto": lambda: FedKStarHC(random_state=0),
    "FedKMeans": lambda: FedKMeans(n_clusters=3, random_state=0),
    "FedKMeans-init-FeCA": lambda: FedKMeans(n_clusters=3, init=FeCA(n_init=2), random_state=0),
}


@pytest.fixture(scope="module")
def fitted():
    X, Xc = _iris_clients()
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FeCA may warn that it found fewer groups
        for name, make in ESTIMATORS.items():
            out[name] = make().fit_clients(Xc)
    return X, out


def _same(a, b, where="") -> None:
    """Values equal in type, dtype, shape and content (messages by their wire bytes)."""
    assert type(a) is type(b), where
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), where
    elif isinstance(a, Message):
        assert a.to_bytes() == b.to_bytes(), where
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            _same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, fastfc.base.BaseFederatedClusterer):
        _same(a.get_params(deep=False), b.get_params(deep=False), where)
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b), where
    else:
        assert a == b, where


def _fitted_attributes(est) -> dict:
    return {k: v for k, v in sorted(vars(est).items()) if k.endswith("_") and not k.startswith("_")}


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_round_trip_predicts_the_same(name, fitted, tmp_path):
    """save -> load: the same class, parameters, fitted attributes and predictions (float64 and float32 rows)."""
    X, ests = fitted
    est = ests[name]
    path = tmp_path / "model.ffc"
    est.save(path)
    back = fastfc.load(path)
    assert type(back) is type(est)
    _same(est.get_params(deep=False), back.get_params(deep=False), "params")
    _same(_fitted_attributes(est), _fitted_attributes(back), "attributes")
    assert np.array_equal(back.predict(X), est.predict(X))
    assert np.array_equal(back.predict(X.astype(np.float32)), est.predict(X.astype(np.float32)))
    assert np.array_equal(type(est).load(path).predict(X[:7]), est.predict(X[:7]))
    assert model_to_bytes(back) == model_to_bytes(est)  # a loaded model saves to the same bytes


def test_file_is_a_plain_npz_without_pickle(fitted, tmp_path):
    """numpy reads the file with allow_pickle=False; its header names the format, versions and method."""
    _, ests = fitted
    path = tmp_path / "m.ffc"
    ests["FeCA"].save(path)
    with np.load(path, allow_pickle=False) as z:
        header = json.loads(z["__header__"].tobytes())
        assert {k for k in z.files if not k.startswith("__")} == set(header["arrays"])
    assert header["format"] == "fastfc-model" and header["format_version"] == MODEL_FORMAT_VERSION
    assert header["fastfc_version"] == fastfc.__version__ and header["method"] == "FeCA"
    assert header["params"]["n_clusters"] == 3


def test_loads_in_a_new_process(fitted, tmp_path):
    """A fresh interpreter (nothing but ``import fastfc``) loads the file and predicts the same labels."""
    X, ests = fitted
    path = tmp_path / "m.ffc"
    ests["GOLD"].save(path)
    np.save(tmp_path / "X.npy", X)
    code = ("import sys, numpy as np, fastfc; est = fastfc.load(sys.argv[1]); "
            "np.save(sys.argv[3], est.predict(np.load(sys.argv[2])))")
    subprocess.run([sys.executable, "-c", code, str(path), str(tmp_path / "X.npy"), str(tmp_path / "p.npy")],
                   check=True, cwd=str(tmp_path.parent), env={**__import__("os").environ,
                                                              "PYTHONPATH": str(_repo_root())})
    assert np.array_equal(np.load(tmp_path / "p.npy"), ests["GOLD"].predict(X))


def _repo_root():
    from pathlib import Path

    return Path(fastfc.__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def fedcref_fitted():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0)[:240]
    return FedCRef(n_local_clusters=3, hidden_layer_sizes=(8,), local_epochs=2, fl_rounds=1, fl_epochs=1,
                   fl_first_epochs=1, max_iter=2, random_state=0, n_jobs=1).fit_clients([X[:120], X[120:]])


@pytest.mark.parametrize("name, edit, match", [
    ("n_local_clusters_", lambda v: v[:1], r"client_labels_ must be a list of 1 1-D integer arrays"),
    ("local_labels_", lambda v: [v[0][:-1], v[1]], r"local_labels_ has \[119, 120\] rows per client"),
    ("_assoc_labels", lambda v: [v[0] + 3, v[1]], r"_assoc_labels must hold local clusters in 0..K_i - 1"),
    ("client_labels_", lambda v: v[:1], r"client_labels_ must be a list of 2 1-D integer arrays"),
    ("edges_", lambda v: np.vstack([v, [[0, 7, 1, 0]]]), r"edges_ must join existing local clusters"),
    ("edges_", lambda v: v[:, :3], r"edges_ must be an integer array of shape \(n_edges, 4\)"),
    ("group_models_", lambda v: np.vstack([v, v]), r"group_models_ must be a finite float array with one row"),
    ("n_distributions_", lambda v: -1, r"n_distributions_ must be an integer >= 0"),
], ids=["K", "local-rows", "assoc-range", "clients", "edge-cluster", "edge-shape", "models", "n-dist"])
def test_fedcref_file_whose_attributes_disagree_is_refused(tmp_path, fedcref_fitted, name, edit, match):
    """A FedCRef model file whose fitted attributes contradict each other (a list per client of another
    length, a partition outside K_i, an edge to a missing cluster, a group model too many) is refused on
    loading with ModelFileError naming the attribute; before, each of these loaded without a word."""
    import copy

    from fastfc.saving import ModelFileError

    est = copy.deepcopy(fedcref_fitted)
    setattr(est, name, edit(getattr(est, name)))
    est.save(tmp_path / "f.ffc")
    with pytest.raises(ModelFileError, match=match):
        fastfc.load(tmp_path / "f.ffc")
    fedcref_fitted.save(tmp_path / "g.ffc")
    fastfc.load(tmp_path / "g.ffc")


def test_fedcref_round_trip(tmp_path):
    """FedCRef keeps no global centres (it has no nearest-centre predict, before or after saving): its fitted
    attributes, including the private partition fedcref_scores reads, survive the round trip."""
    from sklearn.datasets import load_digits

    from fastfc.fedcref import fedcref_scores

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0)[:240]
    y = y[:240]
    Xc, yc = [X[:120], X[120:]], [y[:120], y[120:]]
    est = FedCRef(n_local_clusters=3, hidden_layer_sizes=(8,), local_epochs=2, fl_rounds=1, fl_epochs=1,
                  fl_first_epochs=1, max_iter=2, random_state=0, n_jobs=1).fit_clients(Xc)
    est.save(tmp_path / "f.ffc")
    back = fastfc.load(tmp_path / "f.ffc")
    _same(_fitted_attributes(est), _fitted_attributes(back), "attributes")
    _same(est._assoc_labels, back._assoc_labels, "_assoc_labels")
    assert fedcref_scores(back, yc) == pytest.approx(fedcref_scores(est, yc), nan_ok=True)
    for e in (est, back):
        with pytest.raises(NotImplementedError, match="no global centres"):
            e.predict(X[:3])


def test_string_client_ids_and_feature_names_round_trip(tmp_path):
    """fit(client_ids=strings) keeps string ids; both come back as they were."""
    X, _ = _iris_clients()
    ids = np.array(["north", "south", "east"] * 50)
    est = KFed(n_clusters=3, random_state=0).fit(X, client_ids=ids)
    est.feature_names_in_ = np.array(["a", "b", "c", "d"], dtype=object)  # what fit sets from a DataFrame
    est.save(tmp_path / "m.ffc")
    back = fastfc.load(tmp_path / "m.ffc")
    _same(est.client_ids_, back.client_ids_)
    _same(est.feature_names_in_, back.feature_names_in_)
    assert np.array_equal(back.labels_, est.labels_)


def test_unsaveable_parameters_are_named(fitted, tmp_path):
    """A RandomState, a callable or a foreign object cannot be saved without pickle: the error names it."""
    est = KFed(n_clusters=3, random_state=np.random.RandomState(0)).fit_clients(_iris_clients()[1])
    with pytest.raises(ModelFileError, match="parameter random_state.*RandomState.*int seed"):
        est.save(tmp_path / "m.ffc")
    assert not (tmp_path / "m.ffc").exists()
    est.set_params(random_state=0)
    est.n_jobs = print  # not a valid value, but what a careless set_params could leave behind
    with pytest.raises(ModelFileError, match="parameter n_jobs: callables"):
        est.save(tmp_path / "m.ffc")
    est.n_jobs = None
    est.extra_ = object()
    with pytest.raises(ModelFileError, match="attribute extra_: a builtins.object object"):
        est.save(tmp_path / "m.ffc")


def test_unfitted_estimator_is_not_saved(tmp_path):
    with pytest.raises(NotFittedError):
        KFed().save(tmp_path / "m.ffc")


# ----------------------------------------------------------------------------- refusals
def _members(data: bytes) -> dict:
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _rebuild(members: dict, header: dict | None = None, *, reseal: bool = True, compress: bool = False) -> bytes:
    """An archive from members, with an edited header and (optionally) a recomputed digest."""
    members = dict(members)
    if header is not None:
        members["__header__"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    if reseal:
        arrays = {k: v for k, v in members.items() if not k.startswith("__")}
        members["__digest__"] = np.frombuffer(_digest(members["__header__"].tobytes(), arrays), dtype=np.uint8)
    buf = io.BytesIO()
    (np.savez_compressed if compress else np.savez)(buf, **members)
    return buf.getvalue()


def _header(members: dict) -> dict:
    return json.loads(members["__header__"].tobytes())


@pytest.fixture(scope="module")
def kfed_bytes(fitted):
    return model_to_bytes(fitted[1]["KFed"])


def test_newer_format_is_refused_with_its_version(kfed_bytes):
    m = _members(kfed_bytes)
    h = _header(m)
    h["format_version"] = MODEL_FORMAT_VERSION + 1
    with pytest.raises(ModelFileError, match=f"format version {MODEL_FORMAT_VERSION + 1}.*upgrade fastfc"):
        model_from_bytes(_rebuild(m, h))


def test_other_method_is_refused(fitted, tmp_path):
    fitted[1]["FeCA"].save(tmp_path / "feca.ffc")
    with pytest.raises(ModelFileError, match="holds a FeCA model, not a KFed"):
        KFed.load(tmp_path / "feca.ffc")
    with pytest.raises(ModelFileError, match="not a GOLD"):
        fastfc.load(tmp_path / "feca.ffc", method="GOLD")
    assert isinstance(fastfc.load(tmp_path / "feca.ffc", method=FeCA), FeCA)


@pytest.mark.parametrize("edit, match", [
    (lambda h: h.update(method="Pickle"), "unknown estimator"),
    (lambda h: h["params"].update(n_clusters=-1), "invalid KFed parameters"),
    (lambda h: h["params"].update(bogus=1), "unknown: bogus"),
    (lambda h: h["attributes"].update(fit=1), "attribute 'fit'"),
    (lambda h: h["attributes"].update(n_clusters_=7), "n_clusters_ is 7"),
    (lambda h: h["attributes"].update(n_features_in_=5), "cluster_centers_ must be"),
    (lambda h: h["attributes"].update(labels_=h["attributes"]["feature_weight_"],
                                      feature_weight_=h["attributes"]["labels_"]), "labels_ must be"),
    (lambda h: h["attributes"].update(extra_={"t": "array", "key": "a0"}), "referred to twice"),
    (lambda h: h["attributes"].pop("global_model_"), "arrays nothing refers to"),
    (lambda h: h["attributes"].update(n_iter_={"t": "float", "v": "1e400"}), "float node"),
    (lambda h: h["attributes"].update(n_iter_={"t": "set", "v": []}), "unknown node type"),
    (lambda h: h.pop("fastfc_version"), "header keys"),
    (lambda h: h.update(format="npz"), "wrong format tag"),
])
def test_tampered_header_is_refused(kfed_bytes, edit, match):
    """Header edits are caught by the digest, and with a recomputed digest by the checks themselves."""
    m = _members(kfed_bytes)
    h = _header(m)
    edit(h)
    with pytest.raises(ModelFileError, match="digest mismatch|wrong format tag|header keys"):
        model_from_bytes(_rebuild(m, h, reseal=False))
    with pytest.raises(ModelFileError, match=match):
        model_from_bytes(_rebuild(m, h))


def test_tampered_arrays_and_messages_are_refused(kfed_bytes):
    m = _members(kfed_bytes)
    h = _header(m)
    key = h["attributes"]["cluster_centers_"]["key"]
    bad = dict(m)
    bad[key] = m[key] + 1.0
    with pytest.raises(ModelFileError, match="digest mismatch"):
        model_from_bytes(_rebuild(bad, reseal=False))
    bad[key] = np.full_like(m[key], np.nan)
    with pytest.raises(ModelFileError, match="cluster_centers_ must be a finite"):
        model_from_bytes(_rebuild(bad))
    msg_key = h["attributes"]["global_model_"]["key"]
    bad = dict(m)
    bad[msg_key] = m[msg_key].copy()
    bad[msg_key][-40] ^= 1  # inside the message, before its own digest
    with pytest.raises(ModelFileError, match="attribute global_model_: message digest mismatch"):
        model_from_bytes(_rebuild(bad))
    bad = dict(m)
    bad[key] = m[key].astype(object)
    with pytest.raises((ModelFileError, ValueError)):
        model_from_bytes(_rebuild(bad))


@pytest.mark.parametrize("data, match", [
    (b"", "not a readable model archive"),
    (b"PK\x05\x06" + b"\0" * 18, "no header"),
    (b"\x93NUMPY garbage", "not a readable model archive"),
])
def test_not_a_model_file(data, match):
    with pytest.raises(ModelFileError, match=match):
        model_from_bytes(data)


def test_compressed_and_pickled_members_are_refused(kfed_bytes, tmp_path):
    with pytest.raises(ModelFileError, match="is compressed"):
        model_from_bytes(_rebuild(_members(kfed_bytes), compress=True))
    buf = io.BytesIO()
    np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    raw = io.BytesIO()
    with zipfile.ZipFile(raw, "w") as zf:
        zf.writestr("__header__.npy", buf.getvalue())
    with pytest.raises(ModelFileError, match="dtype object"):
        model_from_bytes(raw.getvalue())
    np.save(tmp_path / "x.npy", np.zeros(3))
    with pytest.raises(ModelFileError, match=str(tmp_path / "x.npy")):
        fastfc.load(tmp_path / "x.npy")
    with pytest.raises(FileNotFoundError):
        fastfc.load(tmp_path / "missing.ffc")


def test_a_member_claiming_a_huge_shape_is_refused_before_allocating(kfed_bytes):
    """The .npy header's shape must account for the member's bytes: nothing is sized from a claim."""
    m = _members(kfed_bytes)
    raw = io.BytesIO()
    with zipfile.ZipFile(raw, "w") as zf:
        for k, v in m.items():
            buf = io.BytesIO()
            np.save(buf, v)
            data = buf.getvalue()
            if k == "a0":
                data = data.replace(b"'shape': (", b"'shape': (1000000000000, ", 1)
            zf.writestr(f"{k}.npy", data)
    start = time.process_time()
    with pytest.raises(ModelFileError, match="member 'a0'"):
        model_from_bytes(raw.getvalue())
    assert time.process_time() - start < READ_BUDGET


# ----------------------------------------------------------------------------- fuzz
json_scalars = (st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False)
                | st.text(max_size=6) | st.sampled_from(["array", "message", "estimator", "float", "list", "dict",
                                                         "tuple", "a0", "a1", "nan", "KFed", "FeCA", "<f8", "|O"]))
json_keys = st.sampled_from(["t", "v", "key", "class", "params", "object", "dtype", "shape"]) | st.text(max_size=4)


def _header_edit(edit):
    """A members edit: ``edit`` applied to the parsed header, which is written back (re-serialised) either way."""
    def apply(members):
        header = _header(members)
        edit(header)
        members["__header__"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)

    return ("members", apply)


#: set, delete or add one entry anywhere in the header to a random JSON value
header_edit = json_edit(json_values(json_scalars, keys=json_keys, max_leaves=8)).map(_header_edit)


@st.composite
def member_edit(draw):
    """Replace one member by an array of another dtype/shape, drop it, or add one."""
    index = draw(st.integers(0, 100))
    op = draw(st.sampled_from(["retype", "reshape", "drop", "add", "truncate"]))
    dtype = draw(st.sampled_from(["<f8", "<f4", "<i8", "|u1", "|b1", "<U3", ">f8", "<c16", "<m8[s]"]))

    def apply(members):
        keys = sorted(members)
        key = keys[index % len(keys)]
        if op == "retype":
            members[key] = np.zeros(members[key].shape, dtype=dtype)
        elif op == "reshape":
            members[key] = members[key].reshape(-1)[: index % (members[key].size + 1)]
        elif op == "drop":
            del members[key]
        elif op == "add":
            members[f"a{index}"] = np.ones(index % 5, dtype=dtype)
        else:
            members[key] = members[key].reshape(-1)[:-1] if members[key].size else members[key]

    return ("members", apply)


mutation = header_edit | member_edit() | truncation | byte_flip


def _edit_members(data: bytes, fn, reseal: bool) -> bytes:
    """Apply a members edit to the archive's members and rebuild it (resealed if asked and it has a header)."""
    try:
        members = _members(data)
    except Exception:  # an earlier mutation broke the archive: nothing to edit
        return data
    if "__header__" not in members:
        return data
    try:
        fn(members)
    except (ValueError, TypeError):  # the edit does not apply to this member
        return data
    return _rebuild(members, reseal=reseal and "__header__" in members)


def _apply(data: bytes, mutations, reseal: bool) -> bytes:
    return apply_mutations(data, mutations, lambda data, kind, fn: _edit_members(data, fn, reseal))


def _check_loaded(X: np.ndarray):
    """A loaded estimator predicts valid labels and saves again."""
    def check(read, est) -> None:
        assert isinstance(est, fastfc.base.BaseFederatedClusterer)
        if hasattr(est, "cluster_centers_"):
            labels = est.predict(X[:, : est.n_features_in_] if X.shape[1] >= est.n_features_in_ else
                                 np.zeros((3, est.n_features_in_)))
            assert labels.dtype == np.int32 and labels.min() >= 0 and labels.max() < est.n_clusters_
        assert model_from_bytes(model_to_bytes(est)) is not None

    return check


def _loads_or_rejects(data: bytes, X: np.ndarray) -> None:
    reads_or_rejects(data, (model_from_bytes,), ModelFileError, _check_loaded(X))


FUZZ_NAMES = ["KFed", "KFed-refined", "FeCA", "GOLD", "FedKStarHC", "FedKMeans-init-FeCA"]


@fuzz_settings(150)
@given(name=st.sampled_from(FUZZ_NAMES), mutations=st.lists(mutation, min_size=1, max_size=3), reseal=st.booleans())
def test_damaged_model_files_load_or_raise_model_file_error(fitted, name, mutations, reseal):
    """Random damage to a valid model file: the loader returns a working estimator or raises ModelFileError, fast."""
    X, ests = fitted
    _loads_or_rejects(_apply(model_to_bytes(ests[name]), mutations, reseal), X)


@pytest.mark.slow
@fuzz_settings(3000)
@given(name=st.sampled_from(FUZZ_NAMES), mutations=st.lists(mutation, min_size=1, max_size=3), reseal=st.booleans())
def test_damaged_model_files_load_or_raise_model_file_error_long(fitted, name, mutations, reseal):
    """The same property over many more examples."""
    X, ests = fitted
    _loads_or_rejects(_apply(model_to_bytes(ests[name]), mutations, reseal), X)


# ------------------------------------------------- damaged files: each reader raises its one error type
def _npy_raw(header: str, payload: bytes) -> bytes:
    """A hand-written .npy member: magic, version 1.0, the header dict as given, then the payload."""
    h = header.encode("latin1")
    h += b" " * ((64 - (10 + len(h) + 1) % 64) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h + payload


def _zip_stored(members) -> bytes:
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for name, data in members:
            zf.writestr(name, data)
    return buf.getvalue()


def _flip_central(data: bytes, offset: int, value: bytes) -> bytes:
    """``data`` with the bytes at ``offset`` of its first central-directory record replaced."""
    cd = data.rfind(b"PK\x01\x02")
    return data[:cd + offset] + value + data[cd + offset + len(value):]


def _state_bytes():
    from fastfc._state import ClientState

    return ClientState(method="KFed", client=0, n_samples=20, n_features=3,
                       values={"labels": np.arange(20) % 3}).to_bytes()


def test_damaged_client_states_raise_state_error():
    """ClientState.from_bytes raises StateError, never the zip/NumPy/JSON error underneath: an unknown
    compression method, an 'encrypted' member, a member whose .npy shape holds a bool, a 100000-deep
    JSON header, a plain .npy instead of an archive (found by a fuzzing audit: NotImplementedError,
    RuntimeError, TypeError, RecursionError and TypeError escaped)."""
    import io
    import struct

    from fastfc._state import ClientState, StateError

    good = _state_bytes()
    ClientState.from_bytes(good)
    plain = io.BytesIO()
    np.save(plain, np.zeros(3))
    bad = [
        _flip_central(good, 10, struct.pack("<H", 99)),
        _flip_central(good, 8, b"\x01\x00"),
        _zip_stored([("__header__.npy", _npy_raw("{'descr': '|u1', 'fortran_order': False, 'shape': (True,), }", b"{")),
                     ("labels.npy", _npy_raw("{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }", bytes(8)))]),
        _zip_stored([("__header__.npy", _npy_raw("{'descr': '|u1', 'fortran_order': False, 'shape': (200000,), }",
                                                 b"[" * 100000 + b"]" * 100000))]),
        plain.getvalue(),
    ]
    for data in bad:
        with pytest.raises(StateError):
            ClientState.from_bytes(data)


def test_model_member_with_a_bool_shape_raises_model_file_error():
    """A .npy member whose shape holds a bool (an int subclass) is refused as a bad shape, not read into
    a TypeError."""
    from fastfc.saving import ModelFileError, _read_npy

    with pytest.raises(ModelFileError, match="invalid shape"):
        _read_npy("labels_", _npy_raw("{'descr': '<f8', 'fortran_order': False, 'shape': (True,), }", bytes(8)))


def test_damaged_data_files_raise_the_readers_error(tmp_path):
    """load_client_npz (ValueError), load_table (TableError) and load_idx (ValueError) on damaged archives
    and gzip streams name the file instead of letting zipfile/zlib/gzip errors through."""
    import gzip
    import io
    import struct

    from fastfc.datasets import load_client_npz
    from fastfc.datasets._fedcref_sim import load_idx
    from fastfc.datasets._table import TableError, load_table

    buf = io.BytesIO()
    np.savez_compressed(buf, X0=np.ones((5, 3)), X1=np.ones((4, 3)))
    good = buf.getvalue()
    for i, data in enumerate([_flip_central(good, 10, struct.pack("<H", 99)), good[:len(good) // 2],
                              good[:60] + bytes(40) + good[100:]]):
        path = tmp_path / f"bad{i}.npz"
        path.write_bytes(data)
        with pytest.raises(ValueError, match="bad"):
            load_client_npz(path)
        with pytest.raises(TableError):
            load_table(str(path))
    idx = bytes([0, 0, 8, 1]) + (3).to_bytes(4, "big") + bytes([1, 2, 3])
    (tmp_path / "ok.gz").write_bytes(gzip.compress(idx))
    assert load_idx(tmp_path / "ok.gz").tolist() == [1, 2, 3]
    for name, data in [("cut.gz", gzip.compress(idx)[:-5]), ("plain.gz", idx), ("junk.gz", b"\x1f\x8b" + bytes(30))]:
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ValueError, match=name):
            load_idx(tmp_path / name)
    # a small .gz whose header declares 8 bytes but which inflates to 40 MiB: refused after reading what the
    # header declares (it inflated the whole stream first: 80 MiB at the peak)
    import tracemalloc

    (tmp_path / "bomb.gz").write_bytes(gzip.compress(bytes([0, 0, 8, 1]) + (8).to_bytes(4, "big") + bytes(40 << 20)))
    tracemalloc.start()
    with pytest.raises(ValueError, match="more than"):
        load_idx(tmp_path / "bomb.gz")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 4 << 20


def test_client_state_headers_and_members_are_checked_before_use():
    """A client state whose JSON header repeats a key, names one value both as a scalar and an array, or
    whose member claims more entries than it holds is refused (StateError) -- the claim without allocating
    it (the members are read like a model file's: header checked against the bytes first)."""
    import json
    import tracemalloc

    from fastfc._state import ClientState, StateError

    header = {"format": "fastfc-client-state", "v": 1, "method": "KFed", "client": 0, "round": 0,
              "n_samples": 20, "n_features": 3, "scalars": {}, "arrays": ["labels"]}
    good = json.loads(json.dumps(header))
    labels = _npy_raw("{'descr': '<i8', 'fortran_order': False, 'shape': (20,), }", bytes(160))

    def state_with(raw_header: bytes, member: bytes = labels) -> bytes:
        h = _npy_raw(f"{{'descr': '|u1', 'fortran_order': False, 'shape': ({len(raw_header)},), }}", raw_header)
        return _zip_stored([("__header__.npy", h), ("labels.npy", member)])

    from fastfc import _state as S

    good["format"], good["v"] = S.STATE_FORMAT, S.STATE_VERSION
    raw = json.dumps(good).encode()
    assert ClientState.from_bytes(state_with(raw))["labels"].shape == (20,)
    with pytest.raises(StateError, match="repeats the key"):
        ClientState.from_bytes(state_with(raw[:-1] + b', "client": 7}'))
    clash = dict(good, scalars={"labels": 5})
    with pytest.raises(StateError, match="both as scalars and arrays"):
        ClientState.from_bytes(state_with(json.dumps(clash).encode()))
    huge = _npy_raw("{'descr': '<f8', 'fortran_order': False, 'shape': (6000000,), }", bytes(160))
    tracemalloc.start()
    with pytest.raises(StateError, match="claims shape"):
        ClientState.from_bytes(state_with(raw, huge))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 4 << 20  # the 48 MB the member claims were never allocated


def test_loaded_labels_and_n_jobs_are_checked(tmp_path):
    """A model file whose labels_ name a centre that does not exist, or whose n_jobs is 0, is refused when
    loaded (both loaded before, and failed later or silently)."""
    import fastfc
    from fastfc.saving import ModelFileError

    X = np.random.default_rng(0).normal(size=(60, 3))
    est = fastfc.KFed(n_clusters=3, random_state=0).fit(X, client_ids=np.arange(60) % 3)
    for attr, value in [("labels_", np.where(np.arange(60) == 0, 10 ** 6, est.labels_)),
                        ("labels_", np.where(np.arange(60) == 0, -1, est.labels_)), ("n_jobs", 0)]:
        bad = fastfc.KFed(n_clusters=3, random_state=0).fit(X, client_ids=np.arange(60) % 3)
        setattr(bad, attr, value)
        path = tmp_path / "m.ffc"
        bad.save(path)  # the writer keeps what it is given; the reader is where a file is checked
        with pytest.raises(ModelFileError, match=attr):
            fastfc.load(path)
