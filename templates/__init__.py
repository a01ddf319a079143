"""Package data: setup.py maps this folder into the gh-run package (orchestrator/core/shipped.py
reads it through importlib.resources)."""
