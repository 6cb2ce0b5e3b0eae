"""Compiled numeric kernels of fastfc.

Numeric work only: callers validate their inputs.  Cython extensions
(``_assign``) are built by ``setup.py``; Numba kernels (``_cpl``, ``_feca``) are
JIT-compiled on first use and cached on disk (see :mod:`fastfc._config`).
"""
