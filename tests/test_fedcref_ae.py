"""FedCRef's NumPy autoencoder and its Numba kernels against independent references."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.neural_network import MLPRegressor

from fastfc import _ae
from fastfc._kernels import _fedcref as K

from reference_fedcref import adam_keras, ae_forward, association_score, cluster_refine, ratio_score


def _params(rng, d=12, hidden=(7, 5, 3, 5, 7)):
    lay = _ae.layout(d, hidden)
    w = _ae.glorot_init(lay, rng)
    w += rng.normal(0, 0.05, w.shape).astype(np.float32)  # non-zero biases too
    return lay, w


def test_layout_of_the_paper_architecture_has_174840_parameters():
    assert _ae.layout(784, (100, 64, 32, 64, 100)).n_params == 174_840


def test_glorot_init_bounds_and_zero_biases():
    lay = _ae.layout(30, (20, 10))
    w = _ae.glorot_init(lay, np.random.default_rng(0))
    Ws, bs = lay.views(w)
    assert w.dtype == np.float32
    for W in Ws:
        lim = np.sqrt(6 / sum(W.shape))
        assert np.abs(W).max() <= lim and np.abs(W).max() > 0.8 * lim
    assert all((b == 0).all() for b in bs)


def test_forward_equals_sklearn_mlpregressor_with_the_same_weights():
    """MLPRegressor(relu, identity output) with our weights, then a sigmoid, is our forward pass."""
    rng = np.random.default_rng(1)
    lay, w = _params(rng)
    X = rng.random((40, 12)).astype(np.float32)
    mlp = MLPRegressor(hidden_layer_sizes=(7, 5, 3, 5, 7), activation="relu", max_iter=1)
    with pytest.warns(Warning):  # one iteration does not converge: we only want its fitted structure
        mlp.fit(X, X)
    Ws, bs = lay.views(w)
    mlp.coefs_ = [W.astype(np.float64) for W in Ws]
    mlp.intercepts_ = [b.astype(np.float64) for b in bs]
    expected = 1.0 / (1.0 + np.exp(-mlp.predict(X.astype(np.float64))))
    np.testing.assert_allclose(_ae.forward(w, lay, X), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ae_forward(list(zip(Ws, bs)), X), expected, rtol=1e-12, atol=1e-12)


def test_gradient_matches_finite_differences():
    rng = np.random.default_rng(2)
    lay, w = _params(rng, d=6, hidden=(5, 4, 3, 4, 5))
    X = rng.random((9, 6)).astype(np.float32)
    Ws, bs = lay.views(w)

    def loss64(flat):
        lst = [(W.astype(np.float64), b.astype(np.float64)) for W, b in zip(*lay.views(flat))]
        return float(np.mean((ae_forward(lst, X) - X) ** 2))

    grad = np.empty_like(w)
    loss = _ae.loss_and_grad(w, lay, np.ascontiguousarray(X), grad)
    w64 = w.astype(np.float64)
    assert loss == pytest.approx(loss64(w64), rel=1e-5)
    h = 1e-6
    num = np.empty(w.size)
    for k in range(w.size):
        e = np.zeros(w.size)
        e[k] = h
        num[k] = (loss64(w64 + e) - loss64(w64 - e)) / (2 * h)
    # ReLU kinks aside (none is within h of 0 here), the analytic gradient is the central difference
    np.testing.assert_allclose(grad, num, rtol=2e-3, atol=1e-6)
    assert np.abs(num).max() > 1e-4


def test_adam_step_equals_the_keras_update():
    rng = np.random.default_rng(3)
    w = rng.normal(size=50).astype(np.float32)
    opt = _ae.Adam(50, lr=1e-2)
    w_ref, m, v = w.astype(np.float64), np.zeros(50), np.zeros(50)
    for s in range(1, 6):
        g = rng.normal(size=50).astype(np.float32)
        opt.update(w, g)
        w_ref, m, v = adam_keras(w_ref, g.astype(np.float64), m, v, s, lr=1e-2)
        np.testing.assert_allclose(w, w_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(opt.m, m, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(opt.v, v, rtol=1e-5, atol=1e-9)


def test_training_reduces_the_loss_and_is_deterministic():
    rng = np.random.default_rng(4)
    X = (rng.random((200, 16)) < 0.3).astype(np.float32)
    lay = _ae.layout(16, (8, 4, 8))
    w0 = _ae.glorot_init(lay, np.random.default_rng(0))
    w1, _, l1 = _ae.train(w0, lay, X, 15, np.random.default_rng(7), batch_size=32, lr=1e-2)
    w2, _, l2 = _ae.train(w0, lay, X, 15, np.random.default_rng(7), batch_size=32, lr=1e-2)
    assert l1[-1] < 0.8 * l1[0]
    np.testing.assert_array_equal(w1, w2)
    assert l1 == l2


@pytest.mark.parametrize("n, batch", [(203, 32), (64, 32), (5, 32), (77, 10)])
def test_buffered_training_equals_the_plain_loop_bit_for_bit(n, batch):
    """train's preallocated workspace repeats loss_and_grad + Adam.update exactly (partial last batch too)."""
    rng = np.random.default_rng(n)
    X = rng.random((n, 20)).astype(np.float32)
    lay = _ae.layout(20, (9, 6, 3, 6, 9))
    w0 = _ae.glorot_init(lay, np.random.default_rng(1))
    w, opt, losses = _ae.train(w0, lay, X, 3, np.random.default_rng(9), batch_size=batch)
    ref_w, ref_opt, ref_losses = w0.copy(), _ae.Adam(lay.n_params), []
    grad = np.empty_like(ref_w)
    r = np.random.default_rng(9)
    for _ in range(3):
        perm = r.permutation(n)
        tot = []
        for s in range(0, n, batch):
            tot.append(_ae.loss_and_grad(ref_w, lay, X[perm[s:s + batch]], grad))
            ref_opt.update(ref_w, grad)
        ref_losses.append(sum(tot) / len(tot))
    np.testing.assert_array_equal(w, ref_w)
    np.testing.assert_array_equal(opt.m, ref_opt.m)
    np.testing.assert_array_equal(opt.v, ref_opt.v)
    assert losses == ref_losses


def test_adam_kernel_equals_the_float32_operations_bit_for_bit():
    """The vectorised Adam kernel performs the same IEEE float32 operations as the scalar formula."""
    rng = np.random.default_rng(12)
    n = 1003
    w = rng.standard_normal(n).astype(np.float32)
    m, v = np.zeros(n, np.float32), np.zeros(n, np.float32)
    rw, rm, rv = w.copy(), m.copy(), v.copy()
    b1, b2, ep = np.float32(1 - 0.9), np.float32(1 - 0.999), np.float32(1e-7)
    for s in range(1, 30):
        g = (rng.standard_normal(n) * 10.0 ** -(s % 7)).astype(np.float32)
        lr_t = 1e-3 * np.sqrt(1 - 0.999 ** s) / (1 - 0.9 ** s)
        K.adam_step(w, g, m, v, lr_t, 0.9, 0.999, 1e-7)
        rm = rm + (g - rm) * b1
        rv = rv + (g * g - rv) * b2
        rw = rw - np.float32(lr_t) * rm / (np.sqrt(rv) + ep)
    np.testing.assert_array_equal(m, rm)
    np.testing.assert_array_equal(v, rv)
    np.testing.assert_array_equal(w, rw)


def test_early_stopping_stops_after_patience_epochs_without_improvement():
    X = np.full((20, 4), 0.5, np.float32)
    lay = _ae.layout(4, (2,))
    w0 = np.zeros(lay.n_params, np.float32)  # output sigmoid(0) = 0.5 = X: zero loss, zero gradient
    _, _, losses = _ae.train(w0, lay, X, 50, np.random.default_rng(0), early_stopping=True, patience=4)
    assert len(losses) == 5 and losses[0] == 0.0


def test_errors_equal_per_model_forward():
    rng = np.random.default_rng(5)
    lay = _ae.layout(12, (7, 3, 7))
    models = np.stack([_params(rng, hidden=(7, 3, 7))[1] for _ in range(4)])
    X = rng.random((37, 12)).astype(np.float32)
    E = _ae.errors(models, lay, X, chunk=10)
    for m in range(4):
        expected = ((_ae.forward(models[m], lay, X).astype(np.float64) - X) ** 2).mean(axis=1)
        np.testing.assert_allclose(E[:, m], expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("n", [1, 2, 7, 500])
def test_association_score_matches_numpy(n):
    rng = np.random.default_rng(n)
    for _ in range(20):
        a = rng.exponential(size=n).astype(np.float32)
        b = (a + rng.exponential(size=n) * rng.random()).astype(np.float32)
        alpha = float(rng.choice([0, 50, 75, 90, 100, rng.uniform(0, 100)]))
        assert K.association_score(a, b, alpha) == pytest.approx(association_score(a, b, alpha), abs=1e-12)
    assert K.association_score(np.ones(n, np.float32), np.zeros(n, np.float32), 75.0) == 0.0


def test_cluster_scores_match_pairwise_numpy():
    rng = np.random.default_rng(6)
    E = rng.exponential(size=(60, 5)).astype(np.float32)
    labels = rng.integers(0, 3, 60)
    labels[labels == 2] = 1  # cluster 2 is empty
    order = np.argsort(labels, kind="stable").astype(np.int64)
    starts = np.searchsorted(labels[order], np.arange(4)).astype(np.int64)
    own = np.array([0, 1, 2], np.int64)
    ext = np.array([3, 4, 0], np.int64)
    out = np.full((3, 3), -1.0)
    K.cluster_scores(E, order, starts, own, ext, 75.0, out)
    for q in (0, 1):
        rows = labels == q
        for j, c in enumerate(ext):
            assert out[q, j] == pytest.approx(association_score(E[rows, own[q]], E[rows, c], 75.0), abs=1e-12)
    assert (out[2] == -1.0).all()


def test_association_score_is_scale_free():
    """The paper's score min-max normalises |E_own - E_ext|, so the per-sample error's scale (mean or sum over
    the 784 pixels) cannot change an association: the issue-14 question (b) has no effect on the test."""
    rng = np.random.default_rng(3)
    for _ in range(20):
        a = rng.exponential(size=300)
        b = a + rng.exponential(size=300) * rng.random()
        assert K.association_score(a * 784.0, b * 784.0, 75.0) == pytest.approx(K.association_score(a, b, 75.0),
                                                                               abs=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 2, 7, 500])
def test_ratio_score_matches_numpy(n, dtype):
    """The opt-in ratio test's kernel is the median of e_ext / e_own (numpy's linear interpolation)."""
    rng = np.random.default_rng(n)
    for _ in range(20):
        a = rng.exponential(size=n).astype(dtype)
        b = (a * rng.uniform(0.5, 3.0, size=n)).astype(dtype)
        assert K.ratio_score(a, b) == pytest.approx(ratio_score(a, b), rel=1e-12)
    # exactly reconstructed own rows: 1 when the other model is exact too, +inf otherwise
    z = np.zeros(n, dtype)
    assert K.ratio_score(z, z) == ratio_score(z, z) == 1.0
    assert K.ratio_score(z, np.ones(n, dtype)) == ratio_score(z, np.ones(n, dtype)) == np.inf
    # scale-free: multiplying both error columns (mean vs sum over pixels) changes nothing
    a = rng.exponential(size=n).astype(dtype)
    b = (a * 1.3).astype(dtype)
    assert K.ratio_score(a, b) == pytest.approx(K.ratio_score(a * 784, b * 784), rel=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cluster_scores_ratio_test_matches_pairwise_numpy(dtype):
    rng = np.random.default_rng(7)
    E = rng.exponential(size=(60, 5)).astype(dtype)
    labels = rng.integers(0, 3, 60)
    labels[labels == 2] = 1  # cluster 2 is empty
    order = np.argsort(labels, kind="stable").astype(np.int64)
    starts = np.searchsorted(labels[order], np.arange(4)).astype(np.int64)
    own = np.array([0, 1, 2], np.int64)
    ext = np.array([3, 4, 0], np.int64)
    out = np.full((3, 3), -1.0)
    K.cluster_scores(E, order, starts, own, ext, 75.0, out, 1)
    for q in (0, 1):
        rows = labels == q
        for j, c in enumerate(ext):
            assert out[q, j] == pytest.approx(ratio_score(E[rows, own[q]], E[rows, c]), rel=1e-12)
    assert (out[2] == -1.0).all()


@pytest.mark.parametrize("seed", range(8))
def test_cluster_refine_matches_the_set_based_reference(seed):
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(1, 80)), int(rng.integers(1, 7))
    E = rng.integers(0, 5, size=(n, m)).astype(np.float32)  # many ties: checks the tie rules too
    Kc = int(rng.integers(1, 6))
    labels = np.empty(n, np.int64)
    sel = np.empty(Kc, np.int64)
    n_sel = K.cluster_refine(E, Kc, labels, sel)
    y_ref, sel_ref = cluster_refine(E, Kc)
    np.testing.assert_array_equal(labels, y_ref)
    np.testing.assert_array_equal(sel, sel_ref)
    assert n_sel == (sel_ref >= 0).sum()


def test_cluster_refine_paper_example_local_models_win_ties():
    # two local models and one group model; the group model explains rows 0-2 best
    E = np.array([[3, 2, 1], [3, 2, 1], [3, 2, 1], [1, 3, 2], [2, 1, 3]], np.float32)
    labels, sel = np.empty(5, np.int64), np.empty(2, np.int64)
    assert K.cluster_refine(E, 2, labels, sel) == 2
    np.testing.assert_array_equal(sel, [2, 0])
    # p=1: rows 3 and 4 vote for models 0 and 1 (one vote each): the tie goes to the lower column, model 0;
    # row 4's favourite (model 1) is never selected, so it joins the selected model with the lowest error
    # for it: model 0 (error 2) rather than model 2 (error 3)
    np.testing.assert_array_equal(labels, [0, 0, 0, 1, 1])
    E[4] = [3, 1, 2]  # now model 2 fits row 4 better than model 0
    K.cluster_refine(E, 2, labels, sel)
    np.testing.assert_array_equal(labels, [0, 0, 0, 1, 0])


# ---------------------------------------------------------------- element-wise AE kernels vs NumPy
# Shapes (rows, width): a single row, a width that is a multiple of 8, widths that are not (the
# vectorised loops' remainder), a larger block. The kernels take float32 (the only dtype _ae.py
# passes); each reference below is an independent float64 formula of the same float32 inputs.
_AE_SHAPES = [(1, 13), (7, 8), (33, 29), (128, 100)]


def _ae_inputs(rows, width, seed):
    rng = np.random.default_rng(seed)
    A = (rng.standard_normal((rows, width)) * 2.0).astype(np.float32)  # both signs, |z| up to ~8
    b = rng.standard_normal(width).astype(np.float32)
    X = rng.random((rows, width)).astype(np.float32)
    return A, b, X


@pytest.mark.parametrize("rows, width", _AE_SHAPES)
def test_bias_relu_kernel_equals_numpy_max_of_a_plus_b(rows, width):
    """bias_relu overwrites A with max(A + b, 0) (bias broadcast over rows) and leaves b untouched."""
    A, b, _ = _ae_inputs(rows, width, 100 + rows)
    A[0, 0] = -b[0]  # a pre-activation of exactly 0: ReLU gives 0
    b0 = b.copy()
    ref = np.maximum(A.astype(np.float64) + b.astype(np.float64), 0.0)
    assert (ref > 0).any() and (ref == 0).any()  # both sides of the ReLU are exercised
    K.bias_relu(A, b)
    np.testing.assert_array_equal(b, b0)
    assert A.dtype == np.float32
    # the kernel rounds the sum once to float32: relative error <= 2**-24 (~6e-8), zeros exact
    np.testing.assert_allclose(A, ref, rtol=1e-7, atol=0)
    np.testing.assert_array_equal(A == 0, ref == 0)


@pytest.mark.parametrize("rows, width", _AE_SHAPES)
def test_relu_mask_kernel_zeroes_the_gradient_exactly_where_the_relu_output_is_zero(rows, width):
    """relu_mask overwrites D with D * (H > 0) (H a ReLU output, many exact zeros), H untouched."""
    rng = np.random.default_rng(200 + rows)
    D = rng.standard_normal((rows, width)).astype(np.float32)
    H = np.maximum(rng.standard_normal((rows, width)), 0.0).astype(np.float32)
    H[0, 0], H[-1, -1] = 0.0, np.float32(1e-30)  # a zero and a tiny positive activation
    H0 = H.copy()
    ref = np.where(H.astype(np.float64) > 0, D.astype(np.float64), 0.0)
    assert (ref != 0).any() and (ref == 0).any()
    K.relu_mask(D, H)
    np.testing.assert_array_equal(H, H0)
    # only copies or zeros: no rounding anywhere, so the result is exact
    np.testing.assert_array_equal(D, ref)


def _sigmoid64(A, b):
    return 1.0 / (1.0 + np.exp(-(A.astype(np.float64) + b.astype(np.float64))))


@pytest.mark.parametrize("rows, width", _AE_SHAPES)
def test_bias_sigmoid_mse_grad_kernel_equals_the_float64_loss_and_delta(rows, width):
    """bias_sigmoid_mse_grad returns mean((s - x)^2), s = sigmoid(A + b), and overwrites A with
    delta = 2 / (B d) (s - x) s (1 - s); b and X are not modified."""
    A, b, X = _ae_inputs(rows, width, 300 + rows)
    b0, X0 = b.copy(), X.copy()
    X64 = X.astype(np.float64)
    s = _sigmoid64(A, b)
    scale = 2.0 / (rows * width)
    delta_ref = scale * (s - X64) * s * (1.0 - s)
    loss_ref = float(np.mean((s - X64) ** 2))
    loss = K.bias_sigmoid_mse_grad(A, b, X)
    np.testing.assert_array_equal(b, b0)
    np.testing.assert_array_equal(X, X0)
    # float32 sigmoid: absolute error of s, 1 - s and s - x is a few float32 ulps of 1 (< 1e-6), so
    # |delta - delta_ref| <= scale * 1e-6: an absolute floor of 1e-5 * scale (delta itself reaches
    # scale / 4) on top of rtol 1e-5; s - x may cancel, so a pure relative bound would not hold
    np.testing.assert_allclose(A, delta_ref, rtol=1e-5, atol=1e-5 * scale)
    # the loss sums those squares in float64: |r^2 error| <= 2 |r| 1e-6, mean r^2 here is ~0.1
    assert loss == pytest.approx(loss_ref, rel=1e-5)


@pytest.mark.parametrize("rows, width", _AE_SHAPES)
def test_bias_sigmoid_row_mse_kernel_equals_the_float64_row_errors(rows, width):
    """bias_sigmoid_row_mse writes out[i] = mean_f (x_if - sigmoid(a_if + b_f))^2 and modifies none
    of A, b, X."""
    A, b, X = _ae_inputs(rows, width, 400 + rows)
    A0, b0, X0 = A.copy(), b.copy(), X.copy()
    ref = ((_sigmoid64(A, b) - X.astype(np.float64)) ** 2).mean(axis=1)
    out = np.full(rows, np.nan, np.float32)
    K.bias_sigmoid_row_mse(A, b, X, out)
    np.testing.assert_array_equal(A, A0)
    np.testing.assert_array_equal(b, b0)
    np.testing.assert_array_equal(X, X0)
    # each residual r has an absolute error < 1e-6 (float32 sigmoid and subtraction), so r^2 is off by
    # < 2 |r| 1e-6 <= 2e-6 in the worst case; the row mean then is stored as float32 (rel 6e-8)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=2e-6)
