"""``exp_nonpos`` (the vectorisable exponential of the CPL feature weights) against the C library's ``exp``."""
import math

import numba
import numpy as np
import pytest

from fastfc._kernels._fastexp import exp_nonpos


@numba.njit
def _exp_loop(a, out):
    # a loop over a contiguous array: the form LLVM vectorises
    for i in range(a.shape[0]):
        out[i] = exp_nonpos(a[i])


@numba.njit(inline="never")
def _exp_one(x):
    return exp_nonpos(x)


def _ulps(got, want):
    """Distance in units of the last place of ``want`` (the spacing of subnormals below 2^-1022)."""
    return np.abs(got - want) / np.spacing(np.maximum(np.abs(want), np.finfo(float).tiny))


def _arguments(seed, n=200_000):
    rng = np.random.default_rng(seed)
    scale = 10.0 ** rng.uniform(-12, np.log10(760.0), size=n)
    a = -np.abs(rng.standard_normal(n)) * scale
    edges = [0.0, -0.0, -5e-324, -1e-300, -1e-16, -0.34657359027997264, -0.3465735902799727,
             -0.6931471805599453, -1.0, -708.3964185322641, -708.4, -709.0, -720.0, -744.44,
             -745.1332191019411, -745.1332191019412, -745.14, -745.5, -745.6, -800.0, -1e300, -np.inf]
    deep = rng.uniform(-746.0, -700.0, size=5000)  # subnormal results and the underflow edge
    return np.concatenate([np.array(edges), a, deep])


@pytest.mark.parametrize("seed", range(3))
def test_exp_nonpos_is_within_one_ulp_of_the_c_library(seed):
    """Claim: on non-positive arguments (normal, subnormal and underflowing results) the kernel is
    within 1 ulp of ``math.exp``, exactly 1 at zero, and 0 exactly where ``math.exp`` is 0."""
    a = _arguments(seed)
    want = np.array([math.exp(x) for x in a])
    got = np.empty_like(a)
    _exp_loop(a, got)
    assert got[0] == 1.0 and got[1] == 1.0
    np.testing.assert_array_equal(got == 0.0, want == 0.0)
    assert _ulps(got, want).max() <= 1.0
    sub = (want > 0) & (want < np.finfo(float).tiny)
    assert sub.sum() > 1000  # the subnormal range is exercised
    # the fraction of last-bit differences stays small (a bad polynomial or reduction shows here)
    assert np.mean(got != want) < 0.2


def test_exp_nonpos_nan_gives_nan():
    """Claim: NaN propagates (it is never turned into 0 or 1)."""
    got = np.empty(3)
    _exp_loop(np.array([np.nan, -1.0, np.nan]), got)
    assert np.isnan(got[0]) and np.isnan(got[2])
    assert _ulps(got[1:2], np.array([math.exp(-1.0)]))[0] <= 1.0
    assert np.isnan(_exp_one(np.nan))


def test_exp_nonpos_loop_and_scalar_calls_give_the_same_bits():
    """Claim: the vectorised loop and a scalar call compute the same bits (no fast-math
    reassociation or contraction that would differ between SIMD and scalar code)."""
    a = _arguments(7, n=20_000)
    got = np.empty_like(a)
    _exp_loop(a, got)
    one = np.array([_exp_one(x) for x in a])
    np.testing.assert_array_equal(got.view(np.int64), one.view(np.int64))
