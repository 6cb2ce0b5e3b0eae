"""A small fully connected autoencoder in plain NumPy: FedCRef's per-cluster model (spec §3.1, §4.2-4.3).

Architecture ``d - h_1 - ... - h_L - d``, ReLU on every hidden layer (the bottleneck included),
sigmoid output, loss = MSE over features and batch. Parameters live in one flat float32 buffer
(layer ``l``: ``W_l`` of shape (n_{l-1}, n_l) in C order, then ``b_l``), so Adam, FedAvg and the
wire format are vector operations on one array. The backward pass is written by hand; the
element-wise steps are fused Numba kernels (:mod:`fastfc._kernels._fedcref`), the matrix
products are BLAS calls (pin BLAS to one thread per model when models train concurrently).

Functions
---------
:func:`layout` -- shapes and offsets of the layers in the flat buffer.
:func:`glorot_init` -- Glorot-uniform weights, zero biases (Keras ``Dense`` defaults).
:func:`forward` -- reconstructions.
:func:`loss_and_grad` -- batch loss and the gradient (flat, same layout).
:class:`Adam` -- Keras-style Adam state for one model.
:func:`train` -- mini-batch training for some epochs (optional early stopping on the epoch loss).
:func:`errors` -- per-sample reconstruction errors of many models on the same rows, the first
layer of all models as one GEMM per chunk.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ._kernels._fedcref import adam_step, bias_relu, bias_sigmoid_mse_grad, bias_sigmoid_row_mse, relu_mask

__all__ = ["Layout", "layout", "glorot_init", "forward", "loss_and_grad", "Adam", "train", "errors"]


@dataclass(frozen=True)
class Layout:
    """Where each layer's weights and biases sit in the flat parameter buffer.

    Attributes
    ----------
    sizes : tuple of int
        ``(d, h_1, ..., h_L, d)``.
    w_offsets, b_offsets : tuple of int
        Start of ``W_l`` and ``b_l`` for every layer.
    n_params : int
        Length of the buffer.
    """

    sizes: tuple[int, ...]
    w_offsets: tuple[int, ...]
    b_offsets: tuple[int, ...]
    n_params: int

    @property
    def n_layers(self) -> int:
        return len(self.sizes) - 1

    def views(self, flat: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Per-layer ``W`` (n_in, n_out) and ``b`` (n_out,) views into ``flat`` (shape (n_params,))."""
        Ws, bs = [], []
        for lyr in range(self.n_layers):
            n_in, n_out = self.sizes[lyr], self.sizes[lyr + 1]
            w0, b0 = self.w_offsets[lyr], self.b_offsets[lyr]
            Ws.append(flat[w0:w0 + n_in * n_out].reshape(n_in, n_out))
            bs.append(flat[b0:b0 + n_out])
        return Ws, bs


def layout(n_features: int, hidden: Sequence[int]) -> Layout:
    """The flat-buffer layout of a ``n_features - hidden... - n_features`` autoencoder.

    The paper's ``784 - 100 - 64 - 32 - 64 - 100 - 784`` has 174,840 parameters.
    """
    sizes = (int(n_features), *(int(h) for h in hidden), int(n_features))
    w_off, b_off, pos = [], [], 0
    for lyr in range(len(sizes) - 1):
        w_off.append(pos)
        pos += sizes[lyr] * sizes[lyr + 1]
        b_off.append(pos)
        pos += sizes[lyr + 1]
    return Layout(sizes, tuple(w_off), tuple(b_off), pos)


def glorot_init(lay: Layout, rng: np.random.Generator) -> np.ndarray:
    """Glorot-uniform weights ``U(+-sqrt(6 / (fan_in + fan_out)))`` and zero biases.

    Returns
    -------
    params : ndarray of shape (n_params,), float32
    """
    flat = np.zeros(lay.n_params, dtype=np.float32)
    Ws, _ = lay.views(flat)
    for W in Ws:
        limit = np.sqrt(6.0 / (W.shape[0] + W.shape[1]))
        W[...] = rng.uniform(-limit, limit, size=W.shape).astype(np.float32)
    return flat


def _hidden(Ws, bs, X: np.ndarray) -> list[np.ndarray]:
    """Activations ``[X, h_1, ..., h_L]`` (float32)."""
    hs = [X]
    for W, b in zip(Ws[:-1], bs[:-1]):
        A = hs[-1] @ W
        bias_relu(A, b)
        hs.append(A)
    return hs


def forward(params: np.ndarray, lay: Layout, X: np.ndarray) -> np.ndarray:
    """Reconstructions ``sigmoid(h_L W + b)`` of the rows of ``X``.

    Parameters
    ----------
    params : ndarray of shape (n_params,), float32
    lay : Layout
    X : ndarray of shape (n_samples, n_features), float32

    Returns
    -------
    X_hat : ndarray of shape (n_samples, n_features), float32
    """
    Ws, bs = lay.views(params)
    h = _hidden(Ws, bs, np.ascontiguousarray(X, dtype=np.float32))[-1]
    A = h @ Ws[-1] + bs[-1]
    return (1.0 / (1.0 + np.exp(-A))).astype(np.float32)


def loss_and_grad(params: np.ndarray, lay: Layout, X: np.ndarray, grad: np.ndarray) -> float:
    """MSE loss of a batch and its gradient with respect to every parameter (manual backward).

    Parameters
    ----------
    params : ndarray of shape (n_params,), float32
    lay : Layout
    X : ndarray of shape (B, n_features), float32, C-contiguous
    grad : ndarray of shape (n_params,), float32
        Receives the gradient (same layout as ``params``).

    Returns
    -------
    loss : float
        ``mean((X_hat - X)^2)``.
    """
    Ws, bs = lay.views(params)
    gWs, gbs = lay.views(grad)
    hs = _hidden(Ws, bs, X)
    delta = hs[-1] @ Ws[-1]
    loss = bias_sigmoid_mse_grad(delta, bs[-1], X)
    for lyr in range(lay.n_layers - 1, -1, -1):
        np.dot(hs[lyr].T, delta, out=gWs[lyr])
        np.sum(delta, axis=0, out=gbs[lyr])
        if lyr > 0:
            delta = delta @ Ws[lyr].T
            relu_mask(delta, hs[lyr])
    return float(loss)


class Adam:
    """Keras-style Adam state of one model (``lr`` 1e-3, ``beta1`` 0.9, ``beta2`` 0.999, ``eps`` 1e-7).

    Parameters
    ----------
    n_params : int
    lr, beta1, beta2, eps : float
    m, v : ndarray of shape (n_params,), float32, optional
        Moments to resume from (copied); zeros by default.
    step : int, default=0
        Updates already made (the bias correction resumes from it).
    """

    def __init__(self, n_params: int, lr: float = 1e-3, beta1: float = 0.9, beta2: float = 0.999,
                 eps: float = 1e-7, m: np.ndarray | None = None, v: np.ndarray | None = None, step: int = 0):
        self.lr, self.beta1, self.beta2, self.eps = float(lr), float(beta1), float(beta2), float(eps)
        self.m = np.zeros(n_params, np.float32) if m is None else np.array(m, dtype=np.float32)
        self.v = np.zeros(n_params, np.float32) if v is None else np.array(v, dtype=np.float32)
        self.step = int(step)

    @classmethod
    def on_buffers(cls, m: np.ndarray, v: np.ndarray, lr: float = 1e-3, step: int = 0, **kw) -> "Adam":
        """An Adam state whose moments are ``m`` and ``v`` themselves (updated in place, not copied).

        Parameters
        ----------
        m, v : ndarray of shape (n_params,), float32, C-contiguous, writeable
        lr : float
        step : int
        **kw
            ``beta1``, ``beta2``, ``eps``.
        """
        for name, a in (("m", m), ("v", v)):
            if a.dtype != np.float32 or a.ndim != 1 or not a.flags.c_contiguous or not a.flags.writeable:
                raise ValueError(f"{name} must be a writeable C-contiguous 1-D float32 array")
        if m.shape != v.shape:
            raise ValueError(f"m and v have shapes {m.shape} and {v.shape}")
        opt = cls(0, lr=lr, step=step, **kw)
        opt.m, opt.v = m, v
        return opt

    def update(self, params: np.ndarray, grad: np.ndarray) -> None:
        """One update of ``params`` (float32, in place) from ``grad``."""
        self.step += 1
        s = self.step
        lr_t = self.lr * np.sqrt(1.0 - self.beta2 ** s) / (1.0 - self.beta1 ** s)
        adam_step(params, grad, self.m, self.v, lr_t, self.beta1, self.beta2, self.eps)


class _Workspace:
    """Preallocated buffers of one model's training steps at one batch size (no per-batch allocation).

    Holds the gathered batch ``Xb`` (B, d), the activations ``acts[l]`` (B, n_{l+1}) of every layer
    (the last one is the output pre-activation, overwritten with the output delta), the hidden
    deltas ``deltas[l]`` (B, n_l) for l = 1..L-1, the gradient (n_params,) and the per-layer
    views of the parameters and the gradient. A partial last batch uses the first ``b`` rows of
    every buffer (still C-contiguous), so every BLAS call sees the same shapes, strides and
    operand order as :func:`loss_and_grad`: the steps give the same bits.
    """

    def __init__(self, lay: Layout, params: np.ndarray, batch_size: int):
        B = int(batch_size)
        self.lay = lay
        self.Xb = np.empty((B, lay.sizes[0]), dtype=np.float32)
        self.acts = [np.empty((B, n), dtype=np.float32) for n in lay.sizes[1:]]
        self.deltas = [None] + [np.empty((B, n), dtype=np.float32) for n in lay.sizes[1:-1]]
        self.grad = np.empty(lay.n_params, dtype=np.float32)
        self.Ws, self.bs = lay.views(params)
        self.WTs = [W.T for W in self.Ws]
        self.gWs, self.gbs = lay.views(self.grad)

    def loss_and_grad(self, X: np.ndarray, idx: np.ndarray) -> float:
        """Batch ``X[idx]`` (rows gathered into ``Xb``): loss, gradient into ``self.grad`` (see
        :func:`loss_and_grad`, whose arithmetic this repeats step for step).

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features), float32, C-contiguous
        idx : ndarray of shape (b,), int, b <= batch size
        """
        b = idx.shape[0]
        Xb = self.Xb[:b]
        np.take(X, idx, axis=0, out=Xb)
        Ws, bs, gWs, gbs = self.Ws, self.bs, self.gWs, self.gbs
        L = len(Ws)
        h = Xb
        for lyr in range(L - 1):
            A = self.acts[lyr][:b]
            np.matmul(h, Ws[lyr], out=A)
            bias_relu(A, bs[lyr])
            h = A
        delta = self.acts[L - 1][:b]
        np.matmul(h, Ws[L - 1], out=delta)
        loss = bias_sigmoid_mse_grad(delta, bs[L - 1], Xb)
        for lyr in range(L - 1, -1, -1):
            h_in = Xb if lyr == 0 else self.acts[lyr - 1][:b]
            np.dot(h_in.T, delta, out=gWs[lyr])
            np.sum(delta, axis=0, out=gbs[lyr])
            if lyr > 0:
                nd = self.deltas[lyr][:b]
                np.matmul(delta, self.WTs[lyr], out=nd)
                relu_mask(nd, h_in)
                delta = nd
        return float(loss)


def train(params: np.ndarray, lay: Layout, X: np.ndarray, epochs: int, rng: np.random.Generator, *,
          batch_size: int = 32, opt: Adam | None = None, lr: float = 1e-3, early_stopping: bool = False,
          patience: int = 4) -> tuple[np.ndarray, Adam, list[float]]:
    """Mini-batch training of one autoencoder (spec §3.1 TrainAE).

    Every epoch draws a permutation of the rows from ``rng`` and visits them in batches of
    ``batch_size`` (the last one partial). With ``early_stopping``, training stops once the
    epoch's mean batch loss has not improved for ``patience`` epochs (the last weights are kept,
    as Keras' ``EarlyStopping`` without ``restore_best_weights``).

    Every buffer of a step (batch, activations, deltas, gradient) is allocated once per call
    (:class:`_Workspace`); the arithmetic is that of :func:`loss_and_grad` and :meth:`Adam.update`,
    so the result is the same, bit for bit, as the plain loop over those two.

    Parameters
    ----------
    params : ndarray of shape (n_params,), float32
        Initial weights (not modified: training works on a copy).
    lay : Layout
    X : ndarray of shape (n_samples, n_features), float32
    epochs : int
    rng : numpy.random.Generator
        The model's own stream (batch order).
    batch_size : int, default=32
    opt : Adam or None
        Optimiser state to continue (updated in place); a fresh one with ``lr`` when None.
    lr : float, default=1e-3
    early_stopping : bool, default=False
    patience : int, default=4

    Returns
    -------
    params : ndarray of shape (n_params,), float32
    opt : Adam
    losses : list of float
        Mean batch loss of every epoch run.
    """
    w = np.array(params, dtype=np.float32, copy=True)
    opt = Adam(lay.n_params, lr=lr) if opt is None else opt
    X = np.ascontiguousarray(X, dtype=np.float32)
    n = X.shape[0]
    losses: list[float] = []
    best, wait = np.inf, 0
    if n == 0:
        return w, opt, losses
    ws = _Workspace(lay, w, min(int(batch_size), n))
    for _ in range(int(epochs)):
        perm = rng.permutation(n)
        total, n_batches = 0.0, 0
        for start in range(0, n, batch_size):
            total += ws.loss_and_grad(X, perm[start:start + batch_size])
            opt.update(w, ws.grad)
            n_batches += 1
        ep_loss = total / n_batches
        losses.append(ep_loss)
        if early_stopping:
            if ep_loss < best:
                best, wait = ep_loss, 0
            else:
                wait += 1
                if wait >= patience:
                    break
    return w, opt, losses


def errors(models: np.ndarray, lay: Layout, X: np.ndarray, *, chunk: int = 1024,
           out: np.ndarray | None = None) -> np.ndarray:
    """Per-sample reconstruction error ``mean_f (x_f - M(x)_f)^2`` of every model on every row.

    The first layer of all models is one GEMM per chunk of rows (``X_c [W1_1 | ... | W1_M]``);
    the other layers run per model; the output layer is a fused sigmoid + squared-error + row
    mean kernel, so no ``(rows, features)`` reconstruction is kept.

    Parameters
    ----------
    models : ndarray of shape (n_models, n_params), float32
    lay : Layout
    X : ndarray of shape (n_samples, n_features), float32
    chunk : int, default=1024
        Rows per block.
    out : ndarray of shape (n_samples, n_models), float32, optional
        Written in place when given.

    Returns
    -------
    E : ndarray of shape (n_samples, n_models), float32
    """
    X = np.ascontiguousarray(X, dtype=np.float32)
    models = np.ascontiguousarray(models, dtype=np.float32)
    n, M = X.shape[0], models.shape[0]
    E = np.empty((n, M), dtype=np.float32) if out is None else out
    if n == 0 or M == 0:
        return E
    views = [lay.views(models[m]) for m in range(M)]
    h1 = lay.sizes[1]
    W1 = np.concatenate([v[0][0] for v in views], axis=1)  # (d, M h1)
    col = np.empty(min(chunk, n), dtype=np.float32)
    for start in range(0, n, chunk):
        Xc = X[start:start + chunk]
        c = Xc.shape[0]
        A1 = Xc @ W1
        for m, (Ws, bs) in enumerate(views):
            h = np.ascontiguousarray(A1[:, m * h1:(m + 1) * h1])
            bias_relu(h, bs[0])
            for W, b in zip(Ws[1:-1], bs[1:-1]):
                h = h @ W
                bias_relu(h, b)
            A = h @ Ws[-1]
            bias_sigmoid_row_mse(A, bs[-1], Xc, col[:c])
            E[start:start + c, m] = col[:c]
    return E
