"""Reading beamtok data in a training job: loaders that save and resume their position,
checkpoint helpers, and the integrations with trainers.

Each name imports its own optional dependency when first used (PyTorch and torchdata for the
loaders, ``accelerate`` for the Trainer callback, JAX and Orbax for the Orbax handlers, grain
for the grain source), so importing this namespace needs none of them.

- PyTorch: :class:`DistributedLoader` (a rank's share, a DCP ``Stateful`` holding every rank's
  position), :class:`StatefulLoader` (one process), :func:`start_process_group`,
  :func:`end_process_group`;
- checkpoints: :func:`step_directory`, :func:`mark_complete`, :func:`newest_complete`,
  :func:`pack_rank_states`, :func:`unpack_rank_states`;
- the Hugging Face Trainer: :class:`BeamtokCallback`, :class:`PackedCollator`;
- Lightning: :class:`LightningLoader`; torchtitan: :class:`BeamtokDataLoader`;
- torchft (replica groups that die and rejoin mid-run): :class:`TorchftLoader`;
- JAX: :class:`BeamtokSave`, :class:`BeamtokRestore` (Orbax), :class:`CacheDataSource` (grain);
- packed rows in a model: :func:`packed_attention_mask`, :func:`packed_labels`,
  :func:`flatten_packed`, :func:`varlen_seqlens`;
- Megatron: ``Dataset.to_megatron`` writes ``.bin/.idx``; :func:`beamtok.cache.read_index` reads them.
"""

from __future__ import annotations

from beamtok._src.base.lazy_names import lazy_names

_NAMES_FOR_TOOLS = (
    False  # the block below never runs: type checkers and the API reference read it, and so does lazy_names
)
if _NAMES_FOR_TOOLS:
    from beamtok._src.attention import flatten_packed, packed_attention_mask, packed_labels, varlen_seqlens
    from beamtok._src.distributed.checkpoint_dirs import mark_complete, newest_complete, step_directory
    from beamtok._src.distributed.lightning_loader import LightningLoader
    from beamtok._src.distributed.orbax_state import BeamtokRestore, BeamtokSave
    from beamtok._src.distributed.process_group import end_process_group, start_process_group
    from beamtok._src.distributed.rank_states import pack_rank_states, unpack_rank_states
    from beamtok._src.distributed.torch_loader import DistributedLoader
    from beamtok._src.distributed.torchft_loader import TorchftLoader
    from beamtok._src.distributed.torchtitan_loader import BeamtokDataLoader
    from beamtok._src.grain_source import CacheDataSource
    from beamtok._src.stream.stateful_loader import StatefulLoader
    from beamtok._src.trainer import BeamtokCallback, PackedCollator

__all__ = [
    "BeamtokCallback",
    "BeamtokDataLoader",
    "BeamtokRestore",
    "BeamtokSave",
    "CacheDataSource",
    "DistributedLoader",
    "LightningLoader",
    "PackedCollator",
    "StatefulLoader",
    "TorchftLoader",
    "end_process_group",
    "flatten_packed",
    "mark_complete",
    "newest_complete",
    "pack_rank_states",
    "packed_attention_mask",
    "packed_labels",
    "start_process_group",
    "step_directory",
    "unpack_rank_states",
    "varlen_seqlens",
]

__getattr__, __dir__ = lazy_names(__name__, __file__)
