"""Users' own data: CSV/TSV, ``.npy``/``.npz`` and Parquet tables, with an optional client and label column.

:func:`load_table` reads a table of numeric features, optionally naming a column
that says which client owns each row (string or integer ids) and a column of
ground-truth labels (scored, never clustered). Every problem is a
:class:`TableError` naming the file and, for a bad cell, its row and column.
"""
from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._validation import FILE_READ_ERRORS

__all__ = ["Table", "TableError", "load_table", "TABLE_KINDS"]

#: file name endings :func:`load_table` reads, and the reader of each
TABLE_KINDS = {".csv": "csv", ".tsv": "csv", ".tab": "csv", ".txt": "csv", ".npy": "npy", ".npz": "npz",
               ".parquet": "parquet", ".pq": "parquet"}
#: cell texts read as a missing value (case-insensitive), besides the empty cell
_MISSING = frozenset({"", "na", "n/a", "nan", "null", "none", "?", "-"})
_CLIENT_KEY = re.compile(r"^[Xy](0|[1-9][0-9]*)$")


class TableError(ValueError):
    """A data file cannot be read as a table of numeric features (the message names the file, row and column)."""


@dataclass(frozen=True, eq=False)
class Table:
    """A table read by :func:`load_table`.

    Attributes
    ----------
    X : ndarray of shape (n_samples, n_features), float64
        The feature columns (neither the client nor the label column).
    feature_names : list of str, length n_features
        Their names (the header's, or ``"0"``, ``"1"``, ... by position).
    y : ndarray of shape (n_samples,), int64, or None
        Labels encoded as ``0..n_classes-1`` (indices into ``classes``).
    classes : ndarray of shape (n_classes,) or None
        The label values as found (ints or strings), sorted.
    client_ids : ndarray of shape (n_samples,) or None
        The client of every row (ints or strings), or None without a client column.
    path : str
        The file read.
    """

    X: np.ndarray
    feature_names: list
    y: np.ndarray | None = None
    classes: np.ndarray | None = None
    client_ids: np.ndarray | None = None
    path: str = ""
    label_column: str | None = field(default=None)
    client_column: str | None = field(default=None)

    def clients(self) -> tuple[list[np.ndarray], list[np.ndarray] | None, list]:
        """The rows split by ``client_ids``, clients in sorted id order, rows in file order.

        Returns
        -------
        X_clients : list of ndarray of shape (n_samples_l, n_features)
        y_clients : list of ndarray of shape (n_samples_l,) or None
        ids : list
            The id of each client (int or str).

        Raises
        ------
        TableError
            If the table has no client column.
        """
        if self.client_ids is None:
            raise TableError(f"{self.path}: the table has no client column (give client_column)")
        ids, inverse = np.unique(self.client_ids, return_inverse=True)
        groups = [np.flatnonzero(inverse == i) for i in range(len(ids))]
        y = None if self.y is None else [self.y[g] for g in groups]
        return [self.X[g] for g in groups], y, [v.item() for v in ids]


def _fail(path: str, message: str) -> TableError:
    return TableError(f"{path}: {message}")


def _ids(values: np.ndarray) -> np.ndarray:
    """Client ids or label values as int64 when every one is an integer (written as such), else as strings."""
    if values.dtype.kind in "iub":
        return values.astype(np.int64)
    if values.dtype.kind == "f":
        if np.all(values == np.round(values)):
            return values.astype(np.int64)
        return values.astype(str)
    text = np.array([str(v).strip() for v in values], dtype=str)
    # integers only when every text is an integer's own spelling: "007" and "7" stay two ids
    if text.size and all(re.fullmatch(r"-?(0|[1-9][0-9]{0,17})", t) for t in text):
        return np.array([int(t) for t in text], dtype=np.int64)
    return text


def _column_index(path: str, names: list[str], column: Any, what: str) -> int:
    """Position of ``column`` (a name, or a 0-based position when no column has that name)."""
    if isinstance(column, (int, np.integer)) and not isinstance(column, bool):
        pos = int(column)
    else:
        text = str(column)
        if text in names:
            return names.index(text)
        if not re.fullmatch(r"-?[0-9]+", text.strip()):
            raise _fail(path, f"no {what} column {text!r}; the columns are {', '.join(map(repr, names))}")
        pos = int(text)
    if not -len(names) <= pos < len(names):
        raise _fail(path, f"{what} column {column!r} is out of range: the table has {len(names)} columns")
    return pos % len(names)


def _finish(path: str, names: list[str], columns: list[np.ndarray], client_column, label_column,
            rows: np.ndarray | None = None) -> Table:
    """Pick the client and label columns, check the features are numeric and complete, build the Table.

    ``columns`` are 1-D arrays (str for text cells, numeric otherwise); ``rows`` the file line of each row
    (CSV) or None (row numbers are then 1-based data rows).
    """
    n_rows = columns[0].shape[0] if columns else 0
    special = {}
    for what, col in (("client", client_column), ("label", label_column)):
        if col is not None:
            special[what] = _column_index(path, names, col, what)
    if len(set(special.values())) < len(special):
        raise _fail(path, f"the client and label columns are the same column ({names[special['client']]!r})")
    if n_rows == 0:
        raise _fail(path, "the table has no rows")
    features = [j for j in range(len(names)) if j not in special.values()]
    if not features:
        raise _fail(path, "the table has no feature columns besides the client and label columns")

    def where(i: int, j: int) -> str:
        line = f", line {int(rows[i])}" if rows is not None else ""
        return f"row {i + 1}{line}, column {names[j]!r}"

    X = np.empty((n_rows, len(features)), dtype=np.float64)
    for out, j in enumerate(features):
        col = columns[j]
        if col.dtype.kind in "iubf":
            vals = col.astype(np.float64)
            bad = np.flatnonzero(~np.isfinite(vals))
            if bad.size:
                kind = "a missing value (NaN)" if np.isnan(vals[bad[0]]) else "an infinite value"
                raise _fail(path, f"{kind} at {where(int(bad[0]), j)} ({bad.size} such cell(s) in the column)")
            X[:, out] = vals
            continue
        if col.dtype.kind not in "UO":
            raise _fail(path, f"column {names[j]!r} has dtype {col.dtype}, not numbers")
        if col.dtype.kind == "U":
            try:  # the fast path; on any problem the loop below finds and names the first bad cell
                vals = col.astype(np.float64)
            except ValueError:
                vals = None
            if vals is not None and np.isfinite(vals).all():
                X[:, out] = vals
                continue
        for i, cell in enumerate(col):
            text = "" if cell is None else str(cell).strip()
            if text.lower() in _MISSING:
                raise _fail(path, f"a missing value ({text!r}) at {where(i, j)}: fill or drop it first")
            try:
                v = float(text)
            except ValueError:
                hint = " (use it as the client or label column, or drop it)" if i == 0 else ""
                raise _fail(path, f"non-numeric value {text!r} at {where(i, j)}{hint}") from None
            if not np.isfinite(v):
                raise _fail(path, f"an infinite value ({text!r}) at {where(i, j)}")
            X[i, out] = v
    extra: dict[str, Any] = {}
    for what, j in special.items():
        col = columns[j]
        missing = [i for i, v in enumerate(col) if v is None or (isinstance(v, str) and v.strip().lower() in _MISSING)
                   or (isinstance(v, (float, np.floating)) and not np.isfinite(v))]
        if missing:
            raise _fail(path, f"a missing {what} at {where(missing[0], j)} ({len(missing)} such cell(s))")
        extra[what] = _ids(col)
    y = classes = None
    if "label" in extra:
        classes, y = np.unique(extra["label"], return_inverse=True)
        y = y.astype(np.int64).reshape(-1)
    return Table(X=X, feature_names=[names[j] for j in features], y=y, classes=classes,
                 client_ids=extra.get("client"), path=path,
                 label_column=None if "label" not in special else names[special["label"]],
                 client_column=None if "client" not in special else names[special["client"]])


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _read_csv(path: str, delimiter: str | None, header, client_column, label_column) -> Table:
    with open(path, newline="", encoding="utf-8-sig") as fh:
        try:
            sample = fh.read(1 << 16)
        except UnicodeDecodeError as exc:
            raise _fail(path, f"not a UTF-8 text file ({exc})") from None
        fh.seek(0)
        if delimiter is None:
            ext = os.path.splitext(path)[1].lower()
            if ext in (".tsv", ".tab"):
                delimiter = "\t"
            elif ext == ".csv":
                delimiter = ","
            else:
                try:
                    delimiter = csv.Sniffer().sniff(sample, delimiters=",\t; ").delimiter
                except csv.Error:
                    delimiter = ","
        reader = csv.reader(fh, delimiter=delimiter)
        rows, lines = [], []
        try:
            for row in reader:
                if not row or all(not c.strip() for c in row):
                    continue
                rows.append(row)
                lines.append(reader.line_num)
        except (csv.Error, UnicodeDecodeError) as exc:
            raise _fail(path, f"cannot read as delimited text near line {reader.line_num}: {exc}") from None
    if not rows:
        raise _fail(path, "the file is empty")
    first = [c.strip() for c in rows[0]]
    if header == "infer":
        # a header has no cell that reads as a number (a data row has at least one numeric feature)
        header = not any(_is_number(c) for c in first)
    elif not isinstance(header, bool):
        raise TypeError(f"header must be True, False or 'infer', got {header!r}")
    if header:
        names = first
        if len(set(names)) < len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise _fail(path, f"the header repeats the column name(s) {', '.join(map(repr, dup))}")
        rows, lines = rows[1:], lines[1:]
    else:
        names = [str(j) for j in range(len(first))]
    width = len(names)
    for row, line in zip(rows, lines):
        if len(row) != width:
            what = "the header has" if header else "the first row has"
            raise _fail(path, f"ragged rows: line {line} has {len(row)} cells, {what} {width} "
                              f"(delimiter {delimiter!r})")
    if not rows:
        raise _fail(path, "the table has a header but no rows")
    columns = [np.array([r[j] for r in rows], dtype=str) for j in range(width)]
    return _finish(path, names, columns, client_column, label_column, rows=np.asarray(lines))


def _read_matrix(path: str, M: np.ndarray, what: str, client_column, label_column) -> Table:
    if M.dtype.kind not in "iubf":
        raise _fail(path, f"{what} has dtype {M.dtype}; a numeric matrix is needed")
    if M.ndim != 2:
        raise _fail(path, f"{what} must be 2-D (rows x columns), got shape {M.shape}")
    names = [str(j) for j in range(M.shape[1])]
    return _finish(path, names, [M[:, j] for j in range(M.shape[1])], client_column, label_column)


def _read_npz(path: str, client_column, label_column) -> Table:
    from ._io import load_client_npz

    try:
        with np.load(path, allow_pickle=False) as z:
            keys = list(z.files)
            if any(_CLIENT_KEY.match(k) for k in keys):
                client_format = True
            elif len(keys) == 1 or set(keys) in ({"X"}, {"X", "y"}):
                client_format = False
                key = "X" if "X" in keys else keys[0]
                M = z[key]
                y = z["y"] if "y" in keys else None
            else:
                raise _fail(path, f"an .npz must hold one matrix, X (and y), or the client arrays X0..Xk "
                                  f"(and y0..yk); found {', '.join(keys) or 'nothing'}")
    except TableError:
        raise
    except FILE_READ_ERRORS as exc:
        raise _fail(path, f"cannot read as an .npz archive without pickle: {type(exc).__name__}: {exc}") from None
    if client_format:
        if client_column is not None or label_column is not None:
            raise _fail(path, "this .npz holds clients as X0..Xk (and labels as y0..yk): client_column and "
                              "label_column do not apply")
        try:
            X_clients, y_clients = load_client_npz(path)
        except ValueError as exc:
            raise TableError(str(exc)) from None
        X = np.concatenate(X_clients).astype(np.float64)
        names = [str(j) for j in range(X.shape[1])]
        if not np.isfinite(X).all():
            i, j = np.argwhere(~np.isfinite(X))[0]
            raise _fail(path, f"a missing or infinite value at row {i + 1}, column {names[j]!r} (all clients "
                              "stacked)")
        ids = np.concatenate([np.full(len(x), c, dtype=np.int64) for c, x in enumerate(X_clients)])
        y = classes = None
        if y_clients is not None:
            classes, y = np.unique(np.concatenate(y_clients), return_inverse=True)
            y = y.astype(np.int64).reshape(-1)
        return Table(X=X, feature_names=names, y=y, classes=classes, client_ids=ids, path=path)
    table = _read_matrix(path, M, f"array {key!r}", client_column, label_column)
    if y is None:
        return table
    if label_column is not None:
        raise _fail(path, "the .npz has a y array and label_column names a column too: give one")
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != table.X.shape[0]:
        raise _fail(path, f"y has shape {y.shape}, expected ({table.X.shape[0]},)")
    classes, yi = np.unique(_ids(y), return_inverse=True)
    return Table(X=table.X, feature_names=table.feature_names, y=yi.astype(np.int64).reshape(-1), classes=classes,
                 client_ids=table.client_ids, path=path, client_column=table.client_column)


def _read_parquet(path: str, client_column, label_column) -> Table:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError(f"reading {path} needs pyarrow: pip install 'fastfc[parquet]'") from None
    import pyarrow as pa

    try:
        tab = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise _fail(path, f"cannot read as Parquet: {exc}") from None
    names = [str(n) for n in tab.column_names]
    columns = []
    for name, col in zip(names, tab.columns):
        typ = col.type
        if pa.types.is_integer(typ) or pa.types.is_floating(typ) or pa.types.is_boolean(typ):
            arr = col.to_numpy(zero_copy_only=False)
            if col.null_count:
                arr = np.where(col.is_null().to_numpy(zero_copy_only=False), np.nan, arr.astype(np.float64))
            columns.append(np.asarray(arr))
        elif pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_dictionary(typ):
            columns.append(np.array(["" if v is None else v for v in col.to_pylist()], dtype=object))
        else:
            columns.append(np.array([None if v is None else repr(v) for v in col.to_pylist()], dtype=object))
    return _finish(path, names, columns, client_column, label_column)


def load_table(path: str | os.PathLike, *, client_column: str | int | None = None,
               label_column: str | int | None = None, delimiter: str | None = None,
               header: bool | str = "infer") -> Table:
    """Read users' own data: a table of numeric features, optionally with a client and a label column.

    Parameters
    ----------
    path : str or path-like
        ``.csv``, ``.tsv``/``.tab`` (``.txt``: the delimiter is sniffed), ``.npy`` (one 2-D
        matrix), ``.npz`` (one matrix; ``X`` and optionally ``y``; or the client format
        ``X0..Xk``/``y0..yk`` of :func:`load_client_npz`, whose clients become the client ids
        ``0..k``) or ``.parquet``/``.pq`` (needs ``pyarrow``: ``pip install 'fastfc[parquet]'``).
    client_column : str or int, default=None
        The column naming the client that owns each row (string or integer ids), by
        name, or by 0-based position when no column has that name (files without a
        header name their columns ``"0"``, ``"1"``, ...). It is not a feature.
    label_column : str or int, default=None
        A ground-truth column (strings or integers): returned as ``y`` for scoring and
        never used as a feature.
    delimiter : str, default=None
        CSV/TSV field separator; None: ``,`` for ``.csv``, a tab for ``.tsv``/``.tab``,
        sniffed otherwise.
    header : bool or "infer", default="infer"
        Whether the first row of a CSV/TSV holds the column names; ``"infer"``: it does
        when none of its cells reads as a number.

    Returns
    -------
    table : Table
        ``X`` (float64), ``feature_names``, ``y``/``classes``, ``client_ids``; see
        :meth:`Table.clients` for the rows split by client.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    TableError
        A non-numeric feature cell, a missing value (empty, ``NA``, ``NaN``, ``null``,
        ``?``), an infinite value, rows of different lengths, an unknown or repeated
        column, an unsupported file kind; the message names the file and, for a cell,
        its row (1-based, after the header; for CSV also the file line) and column.
    ImportError
        For a Parquet file without ``pyarrow``.

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "data.csv")
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("site,x,y,kind\\nnorth,0.1,1.0,a\\nsouth,0.2,1.1,b\\nnorth,0.3,0.9,a\\n")
    >>> t = load_table(path, client_column="site", label_column="kind")
    >>> t.X.shape, t.feature_names, t.y.tolist(), t.clients()[2]
    ((3, 2), ['x', 'y'], [0, 1, 0], ['north', 'south'])
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"data file {path!r} does not exist")
    if os.path.isdir(path):
        raise TableError(f"{path}: is a directory, not a data file")
    ext = os.path.splitext(path)[1].lower()
    kind = TABLE_KINDS.get(ext)
    if kind is None:
        raise TableError(f"{path}: {ext or 'a file without extension'} is not a data file kind fastfc reads; "
                         f"use one of {', '.join(sorted(TABLE_KINDS))}")
    if kind == "csv":
        return _read_csv(path, delimiter, header, client_column, label_column)
    if kind == "npy":
        try:
            M = np.load(path, allow_pickle=False)
        except FILE_READ_ERRORS as exc:
            raise _fail(path, f"cannot read as a .npy array without pickle: {type(exc).__name__}: {exc}") from None
        return _read_matrix(path, M, "the array", client_column, label_column)
    if kind == "npz":
        return _read_npz(path, client_column, label_column)
    return _read_parquet(path, client_column, label_column)
