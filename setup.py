"""Declares the Cython extensions; metadata lives in pyproject.toml.

Build switches (environment variables):
  GYREPROF_DEBUG=1     -O0 -g, Cython bounds checks and assertions on
  GYREPROF_SANITIZE=1  AddressSanitizer + UndefinedBehaviorSanitizer
                       (run with LD_PRELOAD=$(gcc -print-file-name=libasan.so))
  GYREPROF_ANNOTATE=1  write Cython's HTML annotation beside each .pyx
"""

import os

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("GYREPROF_DEBUG") == "1"
SANITIZE = os.environ.get("GYREPROF_SANITIZE") == "1"

compile_args = ["-O0", "-g"] if DEBUG else ["-O3"]
link_args = []
if SANITIZE:
    flags = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-g"]
    compile_args += flags
    link_args += flags

directives = {
    "language_level": 3,
    "embedsignature": True,
    "boundscheck": DEBUG,
    "wraparound": False,
    "initializedcheck": DEBUG,
    "cdivision": True,
}

MODULES = ["histogram", "recorder", "codec", "guard", "trace", "bodyscan"]

extensions = [
    Extension(
        f"gyreprof._core.{name}",
        [f"src/gyreprof/_core/{name}.pyx"],
        include_dirs=[np.get_include(), "src/gyreprof/_core"],
        extra_compile_args=compile_args,
        extra_link_args=link_args,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )
    for name in MODULES
]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives=directives,
        annotate=os.environ.get("GYREPROF_ANNOTATE") == "1",
        include_path=["src"],
    )
)
