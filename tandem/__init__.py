"""Tandem core: the settings object, the local model registry and the `tandem` command line."""
