"""Real Flower deployment on loopback: a SuperLink and three SuperNodes as separate processes.

Needs Flower's command-line tools and a Python where both flwr and fastfc import. By default
the ones of this interpreter; set FASTFC_FLWR_BIN to another environment's bin directory
(e.g. a venv with flwr 1.42) to use it. Skipped when neither is available.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from fastfc.experiment import make_estimator

from conftest import load_split

APP = Path(__file__).resolve().parents[1] / "examples" / "flower"
BIN = os.environ.get("FASTFC_FLWR_BIN") or str(Path(sys.executable).parent)
PORT = 29300 + os.getpid() % 500 * 20  # per-process port block, so parallel runs do not clash

pytestmark = pytest.mark.skipif(
    not (Path(BIN) / "flower-superlink").exists() or not (Path(BIN) / "flwr").exists(),
    reason="Flower CLIs not found (pip install 'fastfc[flower]' or set FASTFC_FLWR_BIN)",
)


class Federation:
    """SuperLink + SuperNodes on 127.0.0.1 in their own process groups, all state in tmp."""

    def __init__(self, tmp: Path, X_clients):
        self.tmp = tmp
        self.env = {**os.environ, "FLWR_HOME": str(tmp / "flwr"), "FLWR_TELEMETRY_ENABLED": "0",
                    "PATH": BIN + os.pathsep + os.environ.get("PATH", "")}
        (tmp / "flwr").mkdir()
        (tmp / "flwr" / "config.toml").write_text(
            f'[superlink]\ndefault = "t"\n[superlink.t]\naddress = "127.0.0.1:{PORT}"\ninsecure = true\n'
        )
        self.procs = {}
        self.n = len(X_clients)
        for i, X in enumerate(X_clients):
            np.save(tmp / f"c{i}.npy", X)
        self._start("link", ["flower-superlink", "--insecure", "--host", "127.0.0.1", "--port", str(PORT),
                             "--database", str(tmp / "link.db"), "--disable-runtime-dependency-installation"])
        for i in range(self.n):
            cfg = (f'data-path="{tmp}/c{i}.npy" client-index={i} labels-path="{tmp}/labels{i}.npy" '
                   f'state-dir="{tmp}/state{i}"')
            self._start(f"node{i}", ["flower-supernode", "--insecure", "--superlink", f"127.0.0.1:{PORT}",
                                     "--host", "127.0.0.1", "--port", str(PORT + 1 + i), "--node-config", cfg])

    def _start(self, name, argv):
        log = open(self.tmp / f"{name}.log", "w")
        self.procs[name] = subprocess.Popen(argv, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    def flwr(self, *args):
        out = subprocess.run([str(Path(BIN) / "flwr"), *args, "--format", "json"], env=self.env,
                             capture_output=True, text=True, timeout=120)
        return json.loads(out.stdout)

    def wait_online(self, want, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                res = self.flwr("supernode", "list", "t")
                if res.get("success") and sum(x["status"] == "online" for x in res["nodes"]) >= want:
                    return
            except (json.JSONDecodeError, subprocess.TimeoutExpired):
                pass
            time.sleep(0.5)
        raise TimeoutError(f"fewer than {want} SuperNodes online after {timeout} s")

    def stop(self, name):
        p = self.procs[name]
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)

    def run(self, config: str, timeout=240):
        res = self.flwr("run", str(APP), "t", "--run-config", config)
        assert res.get("success"), res
        run_id = res["run-id"]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.flwr("ls", "t", "--run-id", str(run_id))
            status = st["runs"][0]["status"] if st.get("success") else ""
            if status.startswith("finished:"):
                return status, st["runs"][0].get("status-details")
            time.sleep(0.5)
        raise TimeoutError(f"run {run_id} did not finish in {timeout} s")

    def close(self):
        for name in list(self.procs)[::-1]:
            self.stop(name)


@pytest.fixture
def federation(tmp_path):
    X_clients, _ = load_split("US")
    fed = Federation(tmp_path, X_clients[:3])
    try:
        yield fed, X_clients[:3]
    finally:
        fed.close()


def _config(method, params, report, **extra):
    items = {"method": f'"{method}"', "params": "'" + json.dumps(params, separators=(",", ":")) + "'", "random-state": "5",
             "report-path": f'"{report}"', **{k: str(v) for k, v in extra.items()}}
    return " ".join(f"{k}={v}" for k, v in items.items())


@pytest.mark.slow
def test_kfed_and_gold_over_real_supernodes_equal_fit_clients(federation):
    fed, X_clients = federation
    fed.wait_online(3)
    for method, params in (("kfed", {"n_clusters": 4}), ("gold", {"n_clusters": 4})):
        report = fed.tmp / f"report-{method}.json"
        status, details = fed.run(_config(method, params, report))
        assert status == "finished:completed", details
        rep = json.loads(report.read_text())
        assert rep["missing"] == [] and sorted(rep["responders"]) == ["0", "1", "2"]
        ref = make_estimator(method, random_state=5, **params).fit_clients(X_clients)
        for i, lab in enumerate(ref.client_labels_):
            np.testing.assert_array_equal(np.load(fed.tmp / f"labels{i}.npy"), lab)


@pytest.mark.slow
def test_stopped_supernode_is_reported_missing(federation):
    fed, X_clients = federation
    fed.wait_online(3)
    fed.stop("node1")
    report = fed.tmp / "report-missing.json"
    status, details = fed.run(_config("kfed", {"n_clusters": 4}, report, **{"wait-timeout": 8.0}))
    assert status == "finished:completed", details
    rep = json.loads(report.read_text())
    assert rep["missing_clients"] == [1]
    assert rep["missing"] and "2 of 3 SuperNodes" in rep["missing"][0]["reason"]
    assert (fed.tmp / "labels0.npy").exists() and not (fed.tmp / "labels1.npy").exists()
    # and with on-missing="fail" the run stops with a clear error instead
    report2 = fed.tmp / "report-fail.json"
    status, details = fed.run(_config("kfed", {"n_clusters": 4}, report2, **{"wait-timeout": 5.0,
                                                                           "on-missing": '"fail"'}))
    assert status == "finished:failed"
    assert "SuperNodes connected" in json.loads(report2.read_text())["error"]
