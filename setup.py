"""Build the Cython kernels of fastfc.

OpenMP is used when the C compiler supports it (``-fopenmp``); otherwise the
kernels are built serial, with identical results.  Set ``FASTFC_NO_OPENMP=1``
to force the serial build.
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

KERNELS = ["_assign", "_kstar", "_seed", "_sklloyd", "_ward"]

#: kernels whose roundings must be fixed: no fused multiply-add contraction (``_sklloyd`` reproduces
#: scikit-learn's Lloyd bit for bit, ``_ward`` SciPy's Ward linkage; ``_assign`` has AVX-512/AVX2 clones that
#: must give the baseline's bits, _kstar's subcluster moments NumPy's)
NO_CONTRACTION = {"_sklloyd", "_ward", "_assign", "_kstar"}


def _compiler_has_openmp(cc: str) -> bool:
    if os.environ.get("FASTFC_NO_OPENMP"):
        return False
    if sys.platform == "win32":
        return True  # MSVC: /openmp is always available
    tmp = tempfile.mkdtemp()
    try:
        src = os.path.join(tmp, "t.c")
        with open(src, "w") as fh:
            fh.write("#include <omp.h>\nint main(void){return omp_get_max_threads() > 0 ? 0 : 1;}\n")
        cmd = [cc, "-fopenmp", src, "-o", os.path.join(tmp, "t")]
        return subprocess.run(cmd, capture_output=True).returncode == 0
    except OSError:
        return False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class BuildExt(build_ext):
    def build_extensions(self):
        cc = self.compiler.compiler[0] if hasattr(self.compiler, "compiler") else "cc"
        if sys.platform == "win32":
            cflags, lflags = ["/openmp"], []
        elif _compiler_has_openmp(cc):
            cflags, lflags = ["-fopenmp"], ["-fopenmp"]
        else:
            cflags, lflags = [], []
            print("fastfc: compiler has no OpenMP; building serial kernels", file=sys.stderr)
        for ext in self.extensions:
            ext.extra_compile_args = list(ext.extra_compile_args or []) + cflags + (["-O3"] if sys.platform != "win32" else [])
            ext.extra_link_args = list(ext.extra_link_args or []) + lflags
        super().build_extensions()


extensions = [
    Extension(
        f"fastfc._kernels.{name}",
        [f"fastfc/_kernels/{name}.pyx"],
        include_dirs=[np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=["-ffp-contract=off"] if name in NO_CONTRACTION and sys.platform != "win32" else [],
    )
    for name in KERNELS
]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives={
            "language_level": 3,
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
    ),
    cmdclass={"build_ext": BuildExt},
)
