"""Datasets on disk: the ROSE release layout (``release``: reading splits and
predictions), the Hugging Face Parquet shards (``hf``) and the generator's
writers (``generate``). Import the submodules directly; this package imports
nothing heavy."""
