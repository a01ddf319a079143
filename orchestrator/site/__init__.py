"""The site: the cluster file (`cluster`: `Cluster`, `Partition`, every limit checked at its
line), which file answers for a cluster name and the admin's templates and settings
(`config`), and how much a run may bring back (`limits`). May import: core, nsys, spec."""
