"""rosetrain: training data, recipes and evaluation for closing the
perception-to-action gap of multimodal LLMs on ROSE-style grid tasks."""

__version__ = "0.1.0"
