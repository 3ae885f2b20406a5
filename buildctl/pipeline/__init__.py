"""`invoke build`: the pipeline, its stages and records, resume, the compile cache, the rebuild
check, the --until report, the ETA."""
