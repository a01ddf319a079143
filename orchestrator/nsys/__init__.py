"""The profiler: what gh-run knows of the nsys CLI. The flags, report names and export types of
each version (`versions`, the one place a version-dependent name is spelled), asking a binary
what it takes (`probe`), a job's `profile:` turned into argv and post steps (`profile`), which
collectors record the whole node and which rank of a node runs them (`node_wide`), a pasted
`nsys profile` command line read back (`command`) and a report exported here (`export`).
Beside nsys, PyTorch's allocator history (`profile.memory`): what a job needs to record it
(`memory_collect`) and the hook that records it in the job (`memory_hook`, loaded by
`memory_sitecustomize`: both copied into the run folder, stdlib only). May import: core."""
