"""Where a Fed-HIRE/GOLD client's CPL spends its time, pass by pass (issue 15).

The client phase of the robust default (rows standardised as ``fcpl_client`` does, the default
candidate count and cap) is replayed with the kernels of :mod:`fastfc._kernels._cpl` called
directly, so that every pass and every feature-weight update is timed on its own: CPU time of
the calling thread (``time.thread_time``: the critical path; with ``--threads 2`` the other
thread's work is not in it) and of the process (all threads). One client of ``--n`` rows, or
``--clients`` clients of ``--n`` rows each (cut from one Gaussian mixture; the per-pass table
then sums over the clients). The replay is the same code path as ``cpl()`` and gives its labels
(checked against ``fcpl_client`` on the first client, outside the timing).

Usage::

    python3 benchmarks/cpl_pass_profile.py --n 100000 --d 50 --threads 2 --out benchmarks/results/x.md
    python3 benchmarks/cpl_pass_profile.py --n 1000 --d 10 --clients 100
"""
from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

import numpy as np


def _client(X, rng, nt):
    """Replay ``fcpl_client`` (robust default) on ``X``; per pass (index, listed candidates, label
    changes, thread CPU s, process CPU s), the feature-weight thread CPU s, and the labels."""
    from fastfc._cpl import candidate_count, numba_threads
    from fastfc._kernels._cpl import cpl_compact_live, cpl_feature_weights, cpl_init_logw, cpl_pass
    from fastfc.fed_hire import (_CLIENT_BANDWIDTH, _KEEP_SINGLETONS_BELOW, _MIN_CANDIDATES,
                                 auto_candidate_cap, standardize_rows)

    n, d = X.shape
    k = max(min(candidate_count(0.5, n), auto_candidate_cap(n)), min(n, _MIN_CANDIDATES))
    seeds = rng.permutation(n)[:k].astype(np.int64)
    Xs, _, _ = standardize_rows(X, _CLIENT_BANDWIDTH, n_jobs=nt)
    S = np.ascontiguousarray(Xs[seeds])
    C = S.copy()
    cnt = np.ones(k, np.int64)
    y = np.full(n, -1, np.int64)
    y[seeds] = np.arange(k)
    Mw = np.full((k, d), 1.0 / d)
    theta = np.ones(k)
    logw = np.empty(k)
    cpl_init_logw(theta, logw)
    wins = np.ones(k)
    live = np.ones(k, np.uint8)
    inlist = np.ones(k, np.uint8)
    live_idx = np.arange(k, dtype=np.int64)
    wnan = np.zeros(k, np.uint8)
    rv = np.full(n, -1, np.int32)
    n_live, wins_sum, bufs, fw_done = k, float(k), None, False
    y_prev = np.empty(n, np.int64)
    dirty = np.zeros(k, np.uint8)
    ks = 1 if n < _KEEP_SINGLETONS_BELOW else 0
    rows, t_fw = [], 0.0
    with numba_threads(nt) as ntt:
        for p in range(1, 32):
            if fw_done:
                y_prev[:] = y
            y0 = y.copy()
            nl0 = n_live
            t0, c0 = time.thread_time(), time.process_time()
            changed, n_live = cpl_pass(Xs, S, C, cnt, Mw, theta, logw, wins, wins_sum, y, live, live_idx,
                                       n_live, inlist, wnan, 0.05, 0, ntt, rv)
            rows.append((p, nl0, int((y0 != y).sum()), time.thread_time() - t0, time.process_time() - c0))
            wins_sum += n
            if not changed or p >= 31:
                break
            if bufs is None:
                bufs = [np.empty((k, d)) for _ in range(6)] + [np.empty((7, d)), np.empty((2, d), np.int64)]
            if fw_done:
                dirty[:] = 0
                mv = y_prev != y
                dirty[y_prev[mv]] = 1
                dirty[y[mv]] = 1
            t0 = time.thread_time()
            cpl_feature_weights(Xs, y, cnt, C, Mw, live, wnan, theta, 0, 1e-12, *bufs, ks, ntt,
                                dirty if fw_done else None)
            fw_done = True
            n_live = cpl_compact_live(live, live_idx, inlist)
            t_fw += time.thread_time() - t0
    return rows, t_fw, y


def main(argv=None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _provenance import run_with_out

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000, help="rows per client")
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--clients", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1, help="threads of the client's kernels")

    def body(a):
        from fastfc.datasets import make_gaussian_mixture
        from fastfc.fed_hire import auto_candidate_cap, fcpl_client

        X, _ = make_gaussian_mixture(a.n * a.clients, a.d, 10, random_state=0)
        _client(X[:min(2000, a.n)], np.random.default_rng(1), a.threads)  # compile / warm
        rng = np.random.default_rng(0)
        per = collections.defaultdict(lambda: [0, 0, 0, 0.0, 0.0])
        t_fw = 0.0
        n_pass = []
        T0, P0 = time.thread_time(), time.process_time()
        for c in range(a.clients):
            Xc = X[c * a.n:(c + 1) * a.n]
            state = rng.bit_generator.state
            rows, tf, y = _client(Xc, rng, a.threads)
            if c == 0:
                state0, y0 = state, y
            t_fw += tf
            n_pass.append(len(rows))
            for p, nl, ch, tt, pc in rows:
                e = per[p]
                e[0] += 1
                e[1] += nl
                e[2] += ch
                e[3] += tt
                e[4] += pc
        T, P = time.thread_time() - T0, time.process_time() - P0
        # the replay is fcpl_client's path: the same labels (checked outside the timed loop)
        r2 = np.random.default_rng()
        r2.bit_generator.state = state0
        ref = fcpl_client(X[:a.n], r2, max_candidates=auto_candidate_cap(a.n), standardize=True,
                          n_threads=a.threads, objective=False)
        _, inv = np.unique(y0, return_inverse=True)
        assert np.array_equal(inv.reshape(-1), ref.labels), "replay differs from fcpl_client"
        t_pass = sum(e[3] for e in per.values())
        print("# CPL passes of a Fed-HIRE/GOLD client, pass by pass\n")
        print(f"{a.clients} client(s) of {a.n} rows x {a.d} features (one 10-cluster Gaussian mixture, seed 0, "
              f"cut in order), robust default (standardised rows, default candidates), {a.threads} kernel "
              f"thread(s). Thread CPU = the calling thread (critical path), process CPU = all threads, "
              f"milliseconds summed over the clients; passes per client: mean {np.mean(n_pass):.1f}.\n")
        print(f"Total thread CPU {T * 1e3:.1f} ms (process {P * 1e3:.1f}): passes {t_pass * 1e3:.1f}, feature "
              f"weights {t_fw * 1e3:.1f}, the rest (standardising, copies) {(T - t_pass - t_fw) * 1e3:.1f}.\n")
        print("| pass | clients | mean listed candidates | mean label changes | thread CPU (ms) "
              "| process CPU (ms) | thread ns / row / listed candidate |")
        print("|---|---|---|---|---|---|---|")
        for p in sorted(per):
            e = per[p]
            ns = e[3] * 1e9 / (e[0] * a.n * max(e[1] / e[0], 1))
            print(f"| {p} | {e[0]} | {e[1] / e[0]:.0f} | {e[2] / e[0]:.1f} | {e[3] * 1e3:.2f} | {e[4] * 1e3:.2f} "
                  f"| {ns:.2f} |")
        return 0

    return run_with_out(ap, argv, body)


if __name__ == "__main__":
    raise SystemExit(main())
