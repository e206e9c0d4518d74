"""The Beam side of beamtok: the transforms that build a cache and a Megatron indexed
dataset, the pipelines and local runners they run on, and the local worker launcher
(``worker_server``, ``fork_server``, ``worker_shim``).

Importing this package imports nothing: each module that needs Apache Beam imports it through
``beam_import`` first, so the launcher can start its worker server before Beam is loaded.
The public names are in ``beamtok.beam``.
"""
