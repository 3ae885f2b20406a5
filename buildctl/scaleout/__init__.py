"""Several recipes over several engines: the plan (pure) and the multi-build."""
