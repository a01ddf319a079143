"""gh-run: profiled LLM-training jobs on SLURM clusters of NVIDIA GH200 nodes."""

__version__ = "0.1.0"
