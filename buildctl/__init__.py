"""buildctl: build deep-learning frameworks from source in containers, from declarative recipes."""

__version__ = "0.1.0"
