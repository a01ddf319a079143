"""Readers: an input file → timelines (`timeline.model.RankTimeline`).

nsys SQLite exports (`nsys_sqlite`, which puts together `nsys_db` the file and its schema
(`export_tables`: which table is the one gh-run means), `nsys_gpu`, `nsys_host` (`nsys_nvtx`:
NVTX and PyTorch's operator ranges), `nsys_memory`, `nsys_nccl` (NCCL operations with a shared
id) and `nsys_ranks`; the big tables' columns by
`sqlite_columns`: from the file's pages by the compiled reader `sqlite_pages`, SQLite itself the
fallback; `table_parts` proves each part was read whole;
`export_schema` the schema versions met, `capture_health` a capture that lost data,
`cpu_samples` the host threads' samples) and PyTorch-profiler Kineto traces (`kineto`; the
compiled scan `kineto_scan`, orjson the fallback; `tracetext` bounded text). `native` finds and
loads the compiled parts (`_sqlite_pages.c`, `_kineto_scan.c`, built by setup.py)."""
