"""The site: the cluster file (`cluster`: `Cluster`, `Partition`, every limit checked at its
line), which file answers for a cluster name and the admin's templates and settings
(`config`), how much a run may bring back (`limits`), and how a partition binds
each task to its GPU, socket and memory (`binding`). May import: core, nsys, spec."""
