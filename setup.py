"""The compiled parts of gh-run, each loaded with ctypes and each optional: without a C compiler
the install still succeeds and the Python readers serve. Everything else is in pyproject.toml.
- orchestrator/analysis/_kineto_scan.c (kineto_scan.py): the Kineto scan (JSON checked, events
  read);
- orchestrator/analysis/_sqlite_pages.c (sqlite_pages.py): the nsys export's big tables, read
  from the file's pages."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "orchestrator.analysis._kineto_scan",
            sources=["orchestrator/analysis/_kineto_scan.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        Extension(
            "orchestrator.analysis._sqlite_pages",
            sources=["orchestrator/analysis/_sqlite_pages.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
    ]
)
