"""Numeric limits shared by the data checks and the wire protocol.

The data checks refuse values beyond :data:`MAX_ABS_VALUE`; a client summary
derived from such data cannot hold means, spreads, counts or sums beyond the
bounds below, so the server refuses an upload that does (a tampered or broken
client) before it reaches arithmetic that would overflow. (Fed-k*-HC's
substitute rows, Gaussian draws, and its paper mode's centres, their means,
have a bound of their own: ``fed_kstar_hc.SUBSTITUTE_MAX_ABS``.)
"""
from __future__ import annotations

import math

#: the largest magnitude accepted in the data: squared distances, variances and sums of squares over
#: many rows are computed in float64 (max ~1.8e308), so values beyond ~1e154 overflow to inf even in a
#: single square; 1e150 leaves room for 10^8 summed squares. float32 data (max ~3.4e38) never reaches it
MAX_ABS_VALUE = 1e150

#: the largest mean (a centre, a feature mean, a sum divided by its count) a client can upload: the data
#: bound plus rounding slack (a mean of values within MAX_ABS_VALUE is within it up to rounding)
MAX_ABS_MEAN = MAX_ABS_VALUE * (1.0 + 1e-6)

#: the most rows one client may report in any count (2^48 ~ 2.8e14 rows; the server sums counts of up to
#: 2^14 clients in int64 without overflow)
MAX_COUNT = 2 ** 48


def max_distance(n_features: int) -> float:
    """Largest Euclidean distance between two points within :data:`MAX_ABS_MEAN` in ``n_features`` dims."""
    return 2.0 * MAX_ABS_MEAN * math.sqrt(max(int(n_features), 1))
