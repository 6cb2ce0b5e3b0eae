"""Users' own data: fastfc.datasets.load_table on CSV/TSV, .npy/.npz and Parquet, and its errors."""
from __future__ import annotations

import numpy as np
import pytest

from fastfc.datasets import Table, TableError, load_table, save_client_npz


def _write(path, text):
    path.write_text(text)
    return path


def test_csv_with_header_client_and_label_columns(tmp_path):
    p = _write(tmp_path / "d.csv", "site,x1,x2,kind\nnorth,0.5,1,cat\nsouth,1.5,2,dog\nnorth,2.5,3e0,cat\n"
                                   "east,-1,4,bird\n")
    t = load_table(p, client_column="site", label_column="kind")
    assert isinstance(t, Table) and t.feature_names == ["x1", "x2"]
    assert np.array_equal(t.X, [[0.5, 1], [1.5, 2], [2.5, 3], [-1, 4]]) and t.X.dtype == np.float64
    assert t.classes.tolist() == ["bird", "cat", "dog"] and t.y.tolist() == [1, 2, 1, 0]
    assert t.client_ids.tolist() == ["north", "south", "north", "east"]
    Xc, yc, ids = t.clients()
    assert ids == ["east", "north", "south"]  # sorted ids, rows in file order
    assert [x.tolist() for x in Xc] == [[[-1, 4]], [[0.5, 1], [2.5, 3]], [[1.5, 2]]]
    assert [y.tolist() for y in yc] == [[0], [1, 1], [2]]


def test_integer_client_ids_and_labels_without_header(tmp_path):
    """No header: columns are named by position; integer ids sort numerically; the label column is never a feature."""
    p = _write(tmp_path / "d.tsv", "10\t0.1\t0.2\t3\n2\t0.3\t0.4\t1\n10\t0.5\t0.6\t3\n")
    t = load_table(p, client_column=0, label_column="3")
    assert t.feature_names == ["1", "2"] and t.X.shape == (3, 2)
    assert t.client_ids.dtype == np.int64 and t.clients()[2] == [2, 10]
    assert t.classes.tolist() == [1, 3] and t.y.tolist() == [1, 0, 1]
    t = load_table(p, client_column=-4, label_column=-1)
    assert t.feature_names == ["1", "2"]
    assert load_table(p).X.shape == (3, 4)  # no special columns: all features


def test_header_option_and_delimiter(tmp_path):
    p = _write(tmp_path / "d.txt", "1;2\n3;4\n")
    assert load_table(p).X.tolist() == [[1, 2], [3, 4]]  # sniffed
    t = load_table(p, header=True, delimiter=";")
    assert t.feature_names == ["1", "2"] and t.X.tolist() == [[3, 4]]


@pytest.mark.parametrize("text, match", [
    ("a,b\n1,2\n3,x\n", r"non-numeric value 'x' at row 2, line 3, column 'b'"),
    ("a,b\n1,2\n3,\n", r"missing value \(''\) at row 2, line 3, column 'b'"),
    ("a,b\n1,NA\n", r"missing value \('NA'\) at row 1, line 2, column 'b'"),
    ("a,b\n1,nan\n", r"missing value \('nan'\) at row 1, line 2, column 'b'"),
    ("a,b\n1,inf\n", r"infinite value \('inf'\) at row 1, line 2, column 'b'"),
    ("a,b\n1,2\n3,4,5\n", r"ragged rows: line 3 has 3 cells, the header has 2"),
    ("a,b\n1,2\n\n3\n", r"ragged rows: line 4 has 1 cells"),
    ("a,a\n1,2\n", r"repeats the column name\(s\) 'a'"),
    ("a,b\n", r"header but no rows"),
    ("", r"the file is empty"),
])
def test_csv_errors_name_file_row_and_column(tmp_path, text, match):
    p = _write(tmp_path / "bad.csv", text)
    with pytest.raises(TableError, match=match) as info:
        load_table(p)
    assert str(p) in str(info.value)
    assert isinstance(info.value, ValueError)


def test_column_errors(tmp_path):
    p = _write(tmp_path / "d.csv", "site,x,kind\nn,1,a\ns,2,\n")
    with pytest.raises(TableError, match=r"no label column 'label'; the columns are 'site', 'x', 'kind'"):
        load_table(p, label_column="label")
    with pytest.raises(TableError, match=r"missing label at row 2, line 3, column 'kind'"):
        load_table(p, client_column="site", label_column="kind")
    with pytest.raises(TableError, match=r"client column 7 is out of range"):
        load_table(p, client_column=7)
    with pytest.raises(TableError, match="the same column"):
        load_table(p, client_column="site", label_column=0)
    with pytest.raises(TableError, match=r"non-numeric value 'n' at row 1, line 2, column 'site' \(use it as the client"):
        load_table(p)
    with pytest.raises(TableError, match="no feature columns"):
        load_table(_write(tmp_path / "e.csv", "site,kind\nn,a\n"), client_column="site", label_column="kind")
    with pytest.raises(TableError, match="no client column"):
        load_table(_write(tmp_path / "f.csv", "x\n1\n")).clients()


def test_npy_and_npz_matrices(tmp_path):
    M = np.array([[0, 1.5, 7], [1, 2.5, 8], [0, 3.5, 9]])
    np.save(tmp_path / "m.npy", M)
    t = load_table(tmp_path / "m.npy", client_column=0)
    assert t.client_ids.tolist() == [0, 1, 0] and t.X.tolist() == [[1.5, 7], [2.5, 8], [3.5, 9]]
    np.savez(tmp_path / "m.npz", X=M[:, 1:], y=np.array([5, 6, 5]))
    t = load_table(tmp_path / "m.npz")
    assert t.y.tolist() == [0, 1, 0] and t.classes.tolist() == [5, 6] and t.client_ids is None
    M[1, 2] = np.nan
    np.save(tmp_path / "n.npy", M)
    with pytest.raises(TableError, match=r"missing value \(NaN\) at row 2, column '2'"):
        load_table(tmp_path / "n.npy")
    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(TableError, match="without pickle"):
        load_table(tmp_path / "o.npy")
    np.savez(tmp_path / "two.npz", A=M, B=M)
    with pytest.raises(TableError, match="found A, B"):
        load_table(tmp_path / "two.npz")


def test_npz_client_format(tmp_path):
    """The X0..Xk format: its clients become client ids 0..k and its y0..yk the labels."""
    save_client_npz(tmp_path / "c.npz", [np.zeros((2, 3)), np.ones((3, 3))], [[0, 1], [1, 1, 2]])
    t = load_table(tmp_path / "c.npz")
    assert t.client_ids.tolist() == [0, 0, 1, 1, 1] and t.y.tolist() == [0, 1, 1, 1, 2]
    Xc, yc, ids = t.clients()
    assert ids == [0, 1] and [x.shape for x in Xc] == [(2, 3), (3, 3)]
    with pytest.raises(TableError, match="do not apply"):
        load_table(tmp_path / "c.npz", client_column=0)


def test_unsupported_kind_and_missing_file(tmp_path):
    with pytest.raises(TableError, match=r"\.xlsx is not a data file kind"):
        load_table(_write(tmp_path / "d.xlsx", "x"))
    with pytest.raises(FileNotFoundError):
        load_table(tmp_path / "nope.csv")


def test_parquet(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    tab = pa.table({"site": ["b", "a", "b"], "x": [1.0, 2.0, 3.0], "n": [1, 2, 3], "label": [7, 8, 7]})
    pq.write_table(tab, tmp_path / "d.parquet")
    t = load_table(tmp_path / "d.parquet", client_column="site", label_column="label")
    assert t.feature_names == ["x", "n"] and t.X.tolist() == [[1, 1], [2, 2], [3, 3]]
    assert t.clients()[2] == ["a", "b"] and t.y.tolist() == [0, 1, 0]
    pq.write_table(pa.table({"x": [1.0, None], "s": ["u", "v"]}), tmp_path / "e.parquet")
    with pytest.raises(TableError, match=r"missing value \(NaN\) at row 2, column 'x'"):
        load_table(tmp_path / "e.parquet", client_column="s")
    with pytest.raises(TableError, match=r"non-numeric value 'u' at row 1, column 's'"):
        load_table(tmp_path / "e.parquet", label_column="x")


def test_integer_ids_only_when_written_as_integers(tmp_path):
    """'007' and '7' are two clients (ids stay strings); '-3', '0', '12' are integers."""
    p = _write(tmp_path / "d.csv", "id,x\n007,1\n7,2\n7,3\n")
    t = load_table(p, client_column="id")
    assert t.client_ids.tolist() == ["007", "7", "7"] and t.clients()[2] == ["007", "7"]
    p = _write(tmp_path / "e.csv", "id,x\n-3,1\n0,2\n12,3\n")
    assert load_table(p, client_column="id").client_ids.tolist() == [-3, 0, 12]
