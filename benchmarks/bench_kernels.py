"""asv benchmarks of the compiled kernels against their closest public counterpart.

Also a script (``python3 benchmarks/bench_kernels.py --out FILE``): the assignment kernel
against its roofline floor, ``pairwise_distances_argmin`` and a NumPy GEMM expansion
(``--table roofline``; ``--table ab --old TREE``: its fastfc column for two checkouts side by side),
or every estimator on one client with ``n_jobs`` 1 and 2 (``--table parallel``).

Nearest-prototype assignment (the ``predict`` of every method): ours, serial and
on two threads, next to ``sklearn.metrics.pairwise_distances_argmin`` on the
same float64 data, for n up to 10^6 rows.
"""
import numpy as np
from sklearn.metrics import pairwise_distances_argmin

from fastfc._assign import assign_nearest


class AssignNearest:
    params = ([10_000, 100_000, 1_000_000], [(16, 10), (100, 10), (36, 50)], ["fastfc-1", "fastfc-2", "sklearn"])
    param_names = ["n_samples", "d_k", "impl"]
    timeout = 300

    def setup(self, n_samples, d_k, impl):
        d, k = d_k
        rng = np.random.default_rng(0)
        self.X = rng.standard_normal((n_samples, d))
        self.C = rng.standard_normal((k, d))
        assign_nearest(self.X[:10], self.C)  # load the extension

    def _run(self, impl):
        if impl == "sklearn":
            return pairwise_distances_argmin(self.X, self.C)
        return assign_nearest(self.X, self.C, n_jobs=int(impl[-1]))

    def time_assign(self, n_samples, d_k, impl):
        self._run(impl)

    def peakmem_assign(self, n_samples, d_k, impl):
        self._run(impl)


class AssignWeighted:
    params = ([100_000, 1_000_000], [1, 2])
    param_names = ["n_samples", "n_jobs"]
    timeout = 300

    def setup(self, n_samples, n_jobs):
        rng = np.random.default_rng(0)
        self.X = rng.standard_normal((n_samples, 16)).astype(np.float32)
        self.C = rng.standard_normal((10, 16)).astype(np.float32)
        self.W = rng.random((10, 16)).astype(np.float32)

    def time_assign_weighted_float32(self, n_samples, n_jobs):
        assign_nearest(self.X, self.C, self.W, n_jobs=n_jobs)


class LloydRound:
    """One federated-Lloyd round's client statistics (``lloyd_stats``) vs one scikit-learn Lloyd iteration.

    Same rows (10^6 x 50, standard normal), 10 centres, float64 and float32, 1 and 2
    threads; scikit-learn's iteration (``lloyd_iter_chunked_dense``, labels and new
    centres in the rows' dtype) under a one-thread BLAS limit as ``KMeans`` runs it.
    ``benchmarks/lloyd_pass.py`` writes the side-by-side table.
    """

    params = (["float64", "float32"], [1, 2], ["fastfc", "sklearn"])
    param_names = ["dtype", "n_jobs", "impl"]
    timeout = 600

    def setup(self, dtype, n_jobs, impl):
        import sys
        from pathlib import Path

        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from lloyd_pass import sklearn_iteration

        from fastfc._lloyd import lloyd_stats

        rng = np.random.default_rng(0)
        self.X = rng.standard_normal((1_000_000, 50)).astype(dtype)
        self.C = np.asarray(self.X[rng.choice(len(self.X), 10, replace=False)], dtype=np.float64)
        if impl == "sklearn":
            self.run, _ = sklearn_iteration(self.X, self.C, n_jobs)
        else:
            self.run = lambda: lloyd_stats(self.X, self.C, n_jobs=n_jobs)
        self.run()  # warm up

    def time_round(self, dtype, n_jobs, impl):
        self.run()


# ------------------------------------------------------------------ roofline table (script)
#: issue 15's shapes (d, k) of the assignment kernel
ROOFLINE_SHAPES = [(2, 15), (10, 10), (16, 10), (36, 50), (64, 64), (100, 10), (128, 256)]
#: this machine, one core (issue 15): memory read bandwidth, peak multiply-add rate
BANDWIDTH = 29e9
PEAK_FLOPS = {"float64": 49e9, "float32": 100e9}


def gemm_expansion(X, C):
    """Nearest prototype by the NumPy GEMM expansion ``argmin_j ||c_j||^2 - 2 x.c_j`` (approximate)."""
    return np.argmin(np.einsum("ij,ij->i", C, C)[None, :] - 2.0 * (X @ C.T), axis=1)


def roofline_floor(n, d, k, dtype) -> float:
    """``max(bytes(X) / bandwidth, 2 n k d / peak)`` seconds (issue 15's floor)."""
    dt = np.dtype(dtype)
    return max(n * d * dt.itemsize / BANDWIDTH, 2.0 * n * k * d / PEAK_FLOPS[dt.name])


def _thread_minor_faults() -> int:
    """Minor page faults of the calling thread so far (Linux ``RUSAGE_THREAD``; 0 elsewhere)."""
    import resource

    who = getattr(resource, "RUSAGE_THREAD", None)
    return 0 if who is None else resource.getrusage(who).ru_minflt


def _median_times(runs: dict, repeats: int, clock: str = "wall", faults: dict | None = None) -> dict:
    """Median seconds of each run over ``repeats`` alternating rounds; ``clock`` "wall"
    (``perf_counter``) or "cpu" (``thread_time``: CPU seconds of the calling thread, which
    runs every one-thread implementation here; robust to other processes' load). When ``faults``
    is a dict, it receives each run's median count of minor page faults of the calling thread
    (first touches of fresh memory, e.g. a new output array: kernel time inside the call)."""
    import time

    tick = time.perf_counter if clock == "wall" else time.thread_time
    times = {name: [] for name in runs}
    flt = {name: [] for name in runs}
    for _ in range(repeats):
        for name, fn in runs.items():  # alternating: load changes hit every implementation alike
            f0 = _thread_minor_faults()
            t0 = tick()
            fn()
            times[name].append(tick() - t0)
            flt[name].append(_thread_minor_faults() - f0)
    if faults is not None:
        faults.update({name: float(np.median(v)) for name, v in flt.items()})
    return {name: float(np.median(v)) for name, v in times.items()}


def roofline(n: int, dtypes, repeats: int) -> int:
    """Print the kernel-vs-floor table (markdown) of :func:`assign_nearest` on one thread."""
    from threadpoolctl import threadpool_limits

    from fastfc._assign import use_gemm, use_screen

    print("# Assignment kernel against its roofline floor\n")
    print(f"n = {n} standard-normal rows, k standard-normal prototypes, one thread (BLAS and OpenMP limited to one "
          f"thread for every implementation); medians of {repeats} alternating runs. "
          f"Floor = max(bytes(X) / {BANDWIDTH / 1e9:.0f} GB/s, 2nkd / peak) with peak "
          f"{PEAK_FLOPS['float64'] / 1e9:.0f} (float64) / {PEAK_FLOPS['float32'] / 1e9:.0f} (float32) GFLOP/s "
          "(issue 15's figures for this machine). Times are CPU milliseconds of the calling thread "
          "(`thread_time`; every implementation runs on that one thread), so other processes' load "
          "does not inflate them; `fastfc wall` is the wall-clock median of the same runs for comparison. "
          "`x floor` = fastfc / floor (target <= 3); "
          "`/ sklearn`, `/ GEMM` = fastfc / `pairwise_distances_argmin`, fastfc / NumPy GEMM expansion "
          "(target <= 1). `same labels` compares fastfc with the exact direct kernel (plain loop). `path`: "
          "`direct` = the plain loop vectorised across rows; `direct, FMA screen` = the same kernel deciding "
          "most rows by a fused-multiply-add screen with a rounding-error bound (AVX-512 CPUs), the close calls "
          "by the plain loop (`two-feature screen`: its d = 2 form, float32 lanes, labels only); `BLAS screen` = "
          "a BLAS product screen with the same bound. `faults` = median minor page faults of the calling thread "
          "in one fastfc call of the alternation (first touches of the fresh labels array, after the other "
          "implementations' temporaries were returned to the system; each costs kernel time inside the call).\n")
    print("| d | k | dtype | path | floor (ms) | fastfc CPU (ms) | sklearn CPU (ms) | GEMM CPU (ms) | x floor "
          "| / sklearn | / GEMM | fastfc wall (ms) | faults | same labels |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    from fastfc._assign import CHUNK_SIZE
    from fastfc._kernels._assign import assign_nearest_kernel

    for d, k in ROOFLINE_SHAPES:
        rng = np.random.default_rng(0)
        X64 = rng.standard_normal((n, d))
        C64 = rng.standard_normal((k, d))
        for dtype in dtypes:
            X = X64.astype(dtype)
            C = C64.astype(dtype)
            # BLAS and OpenMP (scikit-learn's argmin reduction runs on OpenMP threads) at one thread
            with threadpool_limits(1):
                runs = {
                    "fastfc": lambda: assign_nearest(X, C, n_jobs=1),
                    "sklearn": lambda: pairwise_distances_argmin(X, C),
                    "gemm": lambda: gemm_expansion(X, C),
                }
                for fn in runs.values():
                    fn()  # warm
                faults = {}
                t = _median_times(runs, repeats, "cpu", faults)
                wall = _median_times({"fastfc": runs["fastfc"]}, repeats)["fastfc"]
            # the exact direct kernel's labels (no screen)
            lab = np.empty(n, dtype=np.int32)
            dist = np.empty(n, dtype=X.dtype)
            CT = np.ascontiguousarray(C.T)
            assign_nearest_kernel(X, CT, CT, False, lab, dist, 1, CHUNK_SIZE)
            same = bool(np.array_equal(assign_nearest(X, C, n_jobs=1), lab))
            floor = roofline_floor(n, d, k, dtype)
            path = ("BLAS screen" if use_gemm(d, k, dtype)
                    else "direct, two-feature screen" if use_screen(d, dtype) and d == 2
                    else "direct, FMA screen" if use_screen(d, dtype) else "direct")
            print(f"| {d} | {k} | {np.dtype(dtype).name} | {path} | {floor * 1e3:.2f} | {t['fastfc'] * 1e3:.2f} "
                  f"| {t['sklearn'] * 1e3:.2f} | {t['gemm'] * 1e3:.2f} | {t['fastfc'] / floor:.1f} "
                  f"| {t['fastfc'] / t['sklearn']:.2f} | {t['fastfc'] / t['gemm']:.2f} | {wall * 1e3:.2f} "
                  f"| {faults['fastfc']:.0f} | {same} |",
                  flush=True)
    return 0


#: the A/B worker (``--table ab``): reads "d k dtype n" lines and answers a JSON list [CPU ms of one
#: ``assign_nearest`` call]; before each timed call the NumPy GEMM expansion runs untimed, as in the roofline
#: table's alternation (it evicts the rows from the caches and leaves the allocator as that table's runs see it)
_AB_WORKER = r"""
import json, sys, time
import numpy as np
from threadpoolctl import threadpool_limits
from fastfc._assign import assign_nearest
data = {}
for line in sys.stdin:
    d, k, dtype, n = line.split()
    key = (int(d), int(k), dtype, int(n))
    if key not in data:
        rng = np.random.default_rng(0)
        X = rng.standard_normal((key[3], key[0]))
        C = rng.standard_normal((key[1], key[0]))
        data[key] = (X.astype(dtype), C.astype(dtype))
    X, C = data[key]
    with threadpool_limits(1):
        np.argmin(np.einsum("ij,ij->i", C, C)[None, :] - 2.0 * (X @ C.T), axis=1)
        t0 = time.thread_time()
        assign_nearest(X, C, n_jobs=1)
        t = time.thread_time() - t0
    print(json.dumps([t * 1e3]), flush=True)
"""


def roofline_ab(args) -> int:
    """Print the roofline table's fastfc column for two checkouts side by side (markdown)."""
    from _shared import checkout_workers

    dtypes = [np.dtype(t).name for t in args.dtypes.split(",")]
    n = args.n or 1_000_000
    with checkout_workers(args.old, args.new, _AB_WORKER) as (trees, ask):
        print("# Assignment kernel: two checkouts side by side\n")
        print(f"old = {args.old_label} ({trees['old']}), new = this revision ({trees['new']}); n = {n} standard-normal "
              f"rows, the roofline table's shapes and floor; per cell the median of {args.repeats} calls of "
              "`assign_nearest(X, C, n_jobs=1)` in each checkout's own process (CPU ms of the calling thread, BLAS at "
              "one thread, each call after an untimed NumPy GEMM expansion as in the roofline table), the two "
              "checkouts alternating in one run (order swapped every round). `x floor` = ms / floor.\n")
        print("| d | k | dtype | floor (ms) | old (ms) | new (ms) | old/new | x floor old | x floor new |")
        print("|---|---|---|---|---|---|---|---|---|")
        for d, k in ROOFLINE_SHAPES:
            for dt in dtypes:
                ask(f"{d} {k} {dt} {n}", 2)  # warm both (data, extension)
                got = ask(f"{d} {k} {dt} {n}", args.repeats)
                old = float(np.median([g[0] for g in got["old"]]))
                new = float(np.median([g[0] for g in got["new"]]))
                floor = roofline_floor(n, d, k, dt) * 1e3
                print(f"| {d} | {k} | {dt} | {floor:.2f} | {old:.2f} | {new:.2f} | {old / new:.2f} "
                      f"| {old / floor:.1f} | {new / floor:.1f} |", flush=True)
    return 0


def d2_profile(n: int, k: int, repeats: int) -> int:
    """Print where a two-feature call's time goes (markdown): the kernel alone and the whole call, warm and cold."""
    from threadpoolctl import threadpool_limits

    from fastfc._assign import CHUNK_SIZE
    from fastfc._kernels._assign import assign_nearest_kernel

    print(f"# Two-feature assignment: where the time goes\n")
    print(f"n = {n} standard-normal rows, d = 2, k = {k} standard-normal prototypes, one thread; CPU ms of the "
          f"calling thread (`thread_time`), medians of {repeats} alternating rounds, with the median minor page "
          "faults of each run. `exact` = the exact two-feature loop (`screen=False`), `screen` = the two-feature "
          "screen (`screen=True`, what `assign_nearest` runs for labels). Runs: `kernel, warm` = the kernel "
          "writing into a reused labels array, right after the same call (rows and labels in cache); `kernel, "
          "cold` = the same after an untimed NumPy GEMM expansion (the roofline table's alternation: it evicts "
          "the rows and returns its temporaries to the system); `kernel, fresh labels, cold` = the same into a "
          "new `np.empty` labels array (its first touches fault); `touch fresh labels, cold` = only "
          "`np.empty(n, int32).fill(0)` after the expansion (the page faults' cost alone); `assign_nearest, "
          "cold` = the roofline table's fastfc cell. Floor as in the roofline table.\n")
    print("| dtype | floor (ms) | run | exact (ms) | screen (ms) | faults |")
    print("|---|---|---|---|---|---|")
    for dtype in (np.float64, np.float32):
        rng = np.random.default_rng(0)
        X = rng.standard_normal((n, 2)).astype(dtype)
        C = rng.standard_normal((k, 2)).astype(dtype)
        CT = np.ascontiguousarray(C.T)
        lab = np.empty(n, dtype=np.int32)

        def gemm():
            return np.argmin(np.einsum("ij,ij->i", C, C)[None, :] - 2.0 * (X @ C.T), axis=1)

        def kern(screen, fresh):
            return lambda: assign_nearest_kernel(X, CT, CT, False, np.empty(n, np.int32) if fresh else lab, None, 1,
                                                 CHUNK_SIZE, screen)

        runs = {  # name -> (before the timed run, {variant: timed run})
            "kernel, warm": (None, {"exact": kern(False, False), "screen": kern(True, False)}),
            "kernel, cold": (gemm, {"exact": kern(False, False), "screen": kern(True, False)}),
            "kernel, fresh labels, cold": (gemm, {"exact": kern(False, True), "screen": kern(True, True)}),
            "touch fresh labels, cold": (gemm, {"screen": lambda: np.empty(n, np.int32).fill(0)}),
            "assign_nearest, cold": (gemm, {"screen": lambda: assign_nearest(X, C, n_jobs=1)}),
        }
        import time

        times = {(r, v): [] for r, (_, vs) in runs.items() for v in vs}
        faults = {key: [] for key in times}
        with threadpool_limits(1):
            gemm()
            for _ in range(repeats):
                for r, (before, vs) in runs.items():
                    for v, fn in vs.items():
                        (before or fn)()  # warm runs repeat the call itself first
                        f0 = _thread_minor_faults()
                        t0 = time.thread_time()
                        fn()
                        times[(r, v)].append(time.thread_time() - t0)
                        faults[(r, v)].append(_thread_minor_faults() - f0)
        floor = roofline_floor(n, 2, k, dtype) * 1e3
        for r, (_, vs) in runs.items():
            cell = {v: f"{np.median(times[(r, v)]) * 1e3:.2f}" for v in vs}
            flt = max(float(np.median(faults[(r, v)])) for v in vs)
            print(f"| {np.dtype(dtype).name} | {floor:.2f} | {r} | {cell.get('exact', '')} | {cell.get('screen', '')} "
                  f"| {flt:.0f} |", flush=True)
    return 0


#: the estimators of the one-client parallel table
PARALLEL_ESTIMATORS = ["FeCA", "KFed", "FedKMeans", "FedKStarHC", "FedHIRE", "GOLD"]


def parallel_one_client(n: int, d: int, repeats: int, names) -> int:
    """Print each estimator's whole fit on one client with n_jobs=1 and n_jobs=2 (markdown).

    Gaussian mixture (10 clusters, ``make_gaussian_mixture``, seed 0), ``n_clusters=10``,
    ``random_state=0``; alternating runs, medians; wall, process CPU and main-thread CPU seconds
    (the critical path: an estimate of the idle-machine speed-up); whether the labels are the
    same bits.
    """
    import os
    import time

    import fastfc
    from fastfc.datasets import make_gaussian_mixture

    X, _ = make_gaussian_mixture(n, d, 10, random_state=0)
    print("# One client: n_jobs=2 against n_jobs=1\n")
    print(f"{n} rows x {d} features (10-cluster Gaussian mixture, seed 0), one client (`fit(X)`), "
          f"`n_clusters=10`, `random_state=0`; medians of {repeats} alternating runs. speed-up = wall(n_jobs=1) / "
          "wall(n_jobs=2) (target >= 1.7); CPU = process CPU seconds (all threads): on a loaded machine the "
          "second thread waits for a core, so compare the load in the header. OpenMP wait policy "
          f"(`OMP_WAIT_POLICY`): {os.environ.get('OMP_WAIT_POLICY', 'unset (libgomp default: spin, then sleep)')}. "
          "Main-thread CPU = CPU seconds of the thread that runs the fit (with one client it runs the "
          "client's phases; the kernels' other threads run beside it): with a free second core the wall time "
          "is about this critical path, so `est. speed-up` = main-thread CPU(n_jobs=1) / main-thread "
          "CPU(n_jobs=2) estimates the speed-up on an idle machine (with `OMP_WAIT_POLICY=passive`, threads "
          "waiting at a barrier sleep instead of spinning and are not counted). The main thread also sleeps while "
          "it waits for work it handed to the other thread, so that ratio can overstate: on two cores the wall "
          "time is at least half the process CPU, hence `bounded est.` = main-thread CPU(n_jobs=1) / "
          "max(main-thread CPU(n_jobs=2), CPU(n_jobs=2) / 2), the number to read against the target.\n")
    print("| estimator | wall n_jobs=1 (s) | wall n_jobs=2 (s) | speed-up | CPU n_jobs=1 (s) | CPU n_jobs=2 (s) "
          "| main-thread CPU n_jobs=1 (s) | main-thread CPU n_jobs=2 (s) | est. speed-up | bounded est. | same labels |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        Est = getattr(fastfc, name)
        Est(n_clusters=10, random_state=0).fit(X[:2000])  # compile / warm
        wall = {1: [], 2: []}
        cpu = {1: [], 2: []}
        main = {1: [], 2: []}
        labels = {}
        for _ in range(repeats):
            for nj in (1, 2):
                t0, c0, m0 = time.perf_counter(), time.process_time(), time.thread_time()
                est = Est(n_clusters=10, random_state=0, n_jobs=nj).fit(X)
                wall[nj].append(time.perf_counter() - t0)
                cpu[nj].append(time.process_time() - c0)
                main[nj].append(time.thread_time() - m0)
                labels.setdefault(nj, est.labels_)
        w1, w2 = float(np.median(wall[1])), float(np.median(wall[2]))
        same = bool(np.array_equal(labels[1], labels[2]))
        m1, m2 = float(np.median(main[1])), float(np.median(main[2]))
        c1, c2 = float(np.median(cpu[1])), float(np.median(cpu[2]))
        print(f"| {name} | {w1:.3f} | {w2:.3f} | {w1 / w2:.2f} | {c1:.3f} | {c2:.3f} "
              f"| {m1:.3f} | {m2:.3f} | {m1 / m2:.2f} | {m1 / max(m2, c2 / 2):.2f} | {same} |", flush=True)
    return 0


def main(argv=None) -> int:
    """``python3 benchmarks/bench_kernels.py --out benchmarks/results/kernel_roofline.md``
    (``--table parallel``: the one-client n_jobs table)."""
    import argparse
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _provenance import run_with_out

    ap = argparse.ArgumentParser(description=roofline.__doc__)
    ap.add_argument("--table", choices=["roofline", "parallel", "ab", "d2profile"], default="roofline",
                    help="ab: the roofline shapes' fastfc times of two checkouts side by side (--old, --new); "
                         "d2profile: where a two-feature call's time goes (--n, --k)")
    ap.add_argument("--k", type=int, default=15, help="prototypes (d2profile table)")
    ap.add_argument("--n", type=int, default=None, help="rows (roofline 10^6, parallel 10^5)")
    ap.add_argument("--d", type=int, default=10, help="features (parallel table)")
    ap.add_argument("--dtypes", default="float64,float32", help="roofline table")
    ap.add_argument("--estimators", default=",".join(PARALLEL_ESTIMATORS), help="parallel table")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--old", default=None, help="ab table: root of the old checkout (extensions built in place)")
    ap.add_argument("--old-label", default="old", help="ab table: what the old checkout is (e.g. its revision)")
    ap.add_argument("--new", default=".", help="ab table: root of the new checkout")

    def body(a):
        if a.table == "ab":
            if a.old is None:
                ap.error("--table ab needs --old")
            return roofline_ab(a)
        if a.table == "d2profile":
            return d2_profile(a.n or 200_000, a.k, a.repeats)
        if a.table == "parallel":
            return parallel_one_client(a.n or 100_000, a.d, a.repeats, a.estimators.split(","))
        return roofline(a.n or 1_000_000, [np.dtype(t).type for t in a.dtypes.split(",")], a.repeats)

    return run_with_out(ap, argv, body)


if __name__ == "__main__":
    raise SystemExit(main())
