"""Roots of a stream, one plan per kind: shards (files, in-memory data or a cache), a mix of
datasets, a global shuffle of a cache's rows. See ``beamtok._src.stream.roots.base``."""

from beamtok._src.stream.roots.base import RootPlan
from beamtok._src.stream.roots.global_shuffle import GlobalShuffleRoot
from beamtok._src.stream.roots.mix import MixRoot
from beamtok._src.stream.roots.shards import ShardsRoot

__all__ = ["GlobalShuffleRoot", "MixRoot", "RootPlan", "ShardsRoot"]
