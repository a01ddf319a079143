"""Presentation: what the metrics mean to a reader: comparisons (`compare`, `changes`), the
verdict and advice (`verdict`, `advice`, `gpu_metric_findings`), reports (`report`,
`gpu_metric_lane`) and how numbers and names read (`labels`)."""
