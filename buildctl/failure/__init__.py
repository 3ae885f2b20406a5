"""A failed build: its diagnosis (known signatures) and repro bundles (`invoke repro`)."""
