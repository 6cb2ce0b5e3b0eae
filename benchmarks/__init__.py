"""fastfc's benchmarks: asv suites (``bench_*.py``) and the scripts that write ``results/``.

asv imports this folder as a package named ``benchmarks`` to discover its suites; the
scripts import their helpers (``_provenance``, ``_shared``) by bare name, as when run as
``python benchmarks/SCRIPT.py``. Putting this folder on ``sys.path`` here lets both ways work.
"""
import os as _os
import sys as _sys

_HERE = _os.path.dirname(_os.path.abspath(__file__))
if _HERE not in _sys.path:
    _sys.path.append(_HERE)
