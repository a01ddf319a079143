"""The metric families: one module per family, each a function of one entry's timeline
(`rank_metrics` puts them together; `catalogue` declares every metric they give)."""
