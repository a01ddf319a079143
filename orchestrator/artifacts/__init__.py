"""Artifacts: what a run brings back. Collect and verify (`collect`: no links followed, size
limits, size + sha256 read back, manifest.json), a remote run's files (`remote_collect`), the
reports left on the cluster (`left_reports`), and the job's own secret scrub
(`secret_scrub`: copied into a run folder, stdlib only). May import: core, spec, site,
store, transport, executors."""
