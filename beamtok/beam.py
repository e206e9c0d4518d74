"""The Apache Beam transforms that build a cache, for a build inside a Beam pipeline of your
own (``pip install 'beamtok[beam]'``). ``Dataset.cache`` and ``beamtok cache`` run the same
transform in a pipeline they make. Each name imports Beam when first used; importing this
namespace imports nothing and changes no logging.
"""

from __future__ import annotations

from beamtok._src.base.lazy_names import lazy_names

_NAMES_FOR_TOOLS = (
    False  # the block below never runs: type checkers and the API reference read it, and so does lazy_names
)
if _NAMES_FOR_TOOLS:
    from beamtok._src.beam.build import BuildCache
    from beamtok._src.beam.pipelines import LOCAL_RUNNERS, beam_counters, is_local, make_pipeline

__all__ = ["LOCAL_RUNNERS", "BuildCache", "beam_counters", "is_local", "make_pipeline"]

__getattr__, __dir__ = lazy_names(__name__, __file__)
