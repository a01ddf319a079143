#!/bin/bash
# gh-run's unit tests under the GPU machine's Python 3.12 (issue 24: the interpreter CI cannot
# install; Debian 12 has none and PyPI has no CPython). Run by hand through the device tool, from
# the repository root, with gh-run's missing dependencies carried as cp312 wheels in .whl/:
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux2014_x86_64 -d .whl pydantic pydantic_core \
#     annotated-types typing-inspection orjson submitit typer typing_extensions
#   run: bash scripts/device-py312.sh   (carry: .whl; $OUT receives the logs)
# The image's own Python, numpy, pytest, hypothesis and Jinja are used as they are there.
set -u
# into the image's own Python (the machine is thrown away after)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl || exit 3
# gh-run itself as `make install` installs it (editable: templates mapped into the package, C parts built)
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . > $OUT/build.log 2>&1 || { tail $OUT/build.log; exit 3; }
export PYTHONUNBUFFERED=1
python3 --version; python3 -c 'import pydantic, numpy, typer, jinja2, yaml, rich; print("pydantic", pydantic.VERSION, "numpy", numpy.__version__, "typer", typer.__version__)'
ls orchestrator/analysis/readers/*.so; which python3
W="-W error -W default::ResourceWarning"
echo "== native readers, tests/unit, -n 12"
timeout 330 python3 $W -m pytest -q -p no:cacheprovider -p no:benchmark -n 12 --continue-on-collection-errors -rfE tests/unit > $OUT/unit_native.log 2>&1; echo "rc=$?"
tail -25 $OUT/unit_native.log
echo "== GH_RUN_NO_NATIVE_SCAN=1 (SQLite's path, orjson), analysis tests"
GH_RUN_NO_NATIVE_SCAN=1 timeout 200 python3 $W -m pytest -q -p no:cacheprovider -p no:benchmark -n 12 -rfE tests/unit/test_golden_outputs.py tests/unit/test_analysis_nsys.py tests/unit/test_sqlite_pages.py tests/unit/test_step_rules.py tests/unit/test_gpu_metrics.py tests/unit/test_idle_samples.py tests/unit/test_public_traces.py tests/unit/test_captures.py tests/unit/test_real_gpu_exports.py > $OUT/unit_fallback.log 2>&1; echo "rc=$?"
tail -15 $OUT/unit_fallback.log
