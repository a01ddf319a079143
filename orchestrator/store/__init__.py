"""What gh-run remembers: one SQLite file (WAL) with the runs, their events, artifacts and
metrics (`db`: `Run`, `Event`, `ArtifactRecord`, `Store`), and the campaign tables beside them
(`campaigns`), and whose rows they are (`row_seal`: a row's seal under the user's key for this
home decides whether gh-run acts on it). Written before anything is sent. May import: core."""
