"""The one compiled part of gh-run: the Kineto layout scan (orchestrator/analysis/_kineto_scan.c,
loaded with ctypes by kineto_scan.py). Optional: without a C compiler the install still succeeds
and the Kineto reader uses its numpy scan. Everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "orchestrator.analysis._kineto_scan",
            sources=["orchestrator/analysis/_kineto_scan.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
