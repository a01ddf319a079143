"""Runs: a run's life once it is sent. Submit, refresh, wait, collect, repair
(`lifecycle`), the retry decision (`retry`), what an `analyze` argument names when it is a run
(`inputs`), and `analyze --on-cluster` as jobs (`on_cluster`). May import every room below
the campaigns and the CLI."""
