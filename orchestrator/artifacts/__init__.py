"""Artifacts: what a run brings back. Collect and verify (`collect`: no links followed, size
limits, size + sha256 read back, manifest.json), a remote run's files (`remote_collect`), the
reports left on the cluster (`left_reports`), the job's own secret scrub (`secret_scrub`:
copied into a run folder, stdlib only) and collection's refusal of what is not shown clean of
the secrets (`secret_guard`). May import: core, spec, site, store, transport, executors,
analysis (the bounded loaders of `analysis.readers.side_inputs`, the report digests' cache)."""
