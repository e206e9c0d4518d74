"""The core layer beside ``transforms/`` and ``sources/``: the Spec and its fingerprint, the
per-document steps, and the one table of cache options."""
