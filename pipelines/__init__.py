"""Apache Beam pipelines built on beamtok's per-shard step.

This package is installed with beamtok and imports Apache Beam (``pip install beamtok[beam]``);
the library itself (``beamtok``) never does.
"""
