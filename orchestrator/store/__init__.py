"""What gh-run remembers: one SQLite file (WAL) with the runs, their events, artifacts and
metrics (`db`: `Run`, `Event`, `ArtifactRecord`, `Store`), and the campaign tables beside them
(`campaigns`). Written before anything is sent. May import: core."""
