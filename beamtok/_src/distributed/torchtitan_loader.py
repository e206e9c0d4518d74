"""beamtok's loader as torchtitan's data loader, saved by torchtitan's own checkpoint manager
and resumed on another data-parallel degree.

torchtitan builds its loader from the job's config (``config.dataloader.build(dp_world_size=,
dp_rank=, tokenizer=, seq_len=, local_batch_size=, ...)``) and saves it in its DCP checkpoint
under ``dataloader``. Its own loader keeps each rank's state under that rank's key and refuses
a checkpoint of another degree; :class:`BeamtokDataLoader` is a
``beamtok._src.distributed.torch_loader.DistributedLoader`` underneath, which gathers every rank's
state into the one value DCP writes, so any later degree resumes with nothing lost or repeated.

Batches are what torchtitan's trainer takes: ``({"input": ids, "positions": positions},
labels)``. A packed row of ``L`` tokens gives ``L - 1`` inputs and their next tokens as labels,
-100 on padding, where the loss mask is 0, and where the next token starts another document
(``beamtok._src.attention.packed_labels``); ``positions`` restart at each document, which
torchtitan's flex and varlen attention turn into per-document masks. So a stream packed with
``concat_chunk(seq_len + 1)`` trains at torchtitan's ``training.seq_len``.

Data parallelism only: with tensor, context or pipeline parallelism the data-parallel ranks are
a sub-group torchtitan does not hand to the loader, so such a job is refused by name unless
the loader is built with ``group=`` (its data-parallel mesh dimension).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from beamtok._src.base.extras import missing_extra

try:
    import torch
    import torch.distributed as dist
    from torchtitan.components.dataloader import BaseDataLoader
except ImportError as error:
    raise ModuleNotFoundError(
        missing_extra("beamtok._src.distributed.torchtitan_loader", "torch", "torchtitan") or str(error)
    ) from None

from beamtok._src.attention import packed_labels
from beamtok._src.base.errors import ConfigError
from beamtok._src.dataset.dataset import Dataset
from beamtok._src.distributed.torch_loader import DistributedLoader

__all__ = ["BeamtokDataLoader", "torchtitan_batch"]

log = logging.getLogger(__name__)

BATCHING_STAGES = ("batch", "batch_tokens")


def torchtitan_batch(batch: dict[str, Any]) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """A beamtok batch of packed rows as torchtitan's trainer takes it.

    Args:
        batch: A batch of ``input_ids``, ``segment_ids``, ``position_ids`` and ``loss_mask``
            (or ``labels``), ``[rows, L]``.

    Returns:
        ``({"input": ids, "positions": positions}, labels)``, each ``[rows, L - 1]``: the
        labels are the next tokens, -100 where no loss is taken.
    """
    ids = torch.as_tensor(batch["input_ids"]).long()
    labels = packed_labels(batch).long()  # unshifted: -100 on padding, masked tokens and each piece's first
    positions = torch.as_tensor(batch["position_ids"]).long()
    return {"input": ids[:, :-1], "positions": positions[:, :-1]}, labels[:, 1:]


class BeamtokDataLoader(BaseDataLoader):
    """A beamtok stream as torchtitan's data loader: set ``dataloader`` in the job's config to
    ``BeamtokDataLoader.Config(dataset_path=...)``.

    ``state_dict()`` gathers every data-parallel rank's state (a collective: every rank saves,
    as torchtitan's checkpoint manager has them do), and ``load_state_dict()`` resumes this
    rank's share at any degree.
    """

    @dataclass(kw_only=True, slots=True)
    class Config(BaseDataLoader.Config):
        """What the job's config sets.

        Attributes:
            dataset_path: A beamtok data config (YAML; its ``train`` stream, unbatched) or a
                cache directory.
            num_workers: DataLoader workers a rank.
            split: ``"shards"`` or ``"examples"``: how the data is split over the readers.
            even: ``"drop"``, ``"pad"`` or None: how ranks that run out early are kept in step.
        """

        num_workers: int = 0
        split: str = "shards"
        even: str | None = "drop"

    def __init__(
        self,
        config: Config,
        *,
        dp_world_size: int,
        dp_rank: int,
        local_batch_size: int,
        seq_len: int | None = None,
        tokenizer: Any = None,
        snapshot_every_n_steps: int | None = None,
        stream: Dataset | None = None,
        group: Any = None,
    ) -> None:
        """Build the loader for this data-parallel rank (torchtitan's trainer passes these).

        Args:
            config: The job config's ``dataloader`` section.
            dp_world_size: The data-parallel degree.
            dp_rank: This rank's data-parallel index.
            local_batch_size: Rows a batch on this rank.
            seq_len: torchtitan's ``training.seq_len``; a batch of other inputs is refused.
            tokenizer: torchtitan's tokenizer; not used (the stream tokenizes as its config says).
            snapshot_every_n_steps: Not used: any step can be saved.
            stream: The stream, when built in code instead of from ``dataset_path``.
            group: The data-parallel process group or one-dimensional mesh, where it is not
                every rank.

        Raises:
            ConfigError: No stream, a stream that batches itself, or data-parallel ranks that
                are not the whole job with no ``group``.
        """
        del tokenizer, snapshot_every_n_steps
        stream = stream if stream is not None else _stream_at(config.dataset_path)
        if any(stage.NAME in BATCHING_STAGES for stage in stream.pipeline.stages):
            raise ConfigError(
                "BeamtokDataLoader batches by torchtitan's local_batch_size: give it the stream without .batch()"
            )
        if group is None and dist.is_available() and dist.is_initialized() and dp_world_size != dist.get_world_size():
            raise ConfigError(
                f"the data-parallel degree ({dp_world_size}) is not the job's world size ({dist.get_world_size()}): "
                "with tensor, context or pipeline parallelism build the loader with group= (the data-parallel mesh dimension)"
            )
        self.dp_rank = dp_rank
        self.dp_world_size = dp_world_size
        self.seq_len = seq_len
        self.loader = DistributedLoader(
            stream.batch(local_batch_size, tensors="torch"),
            split=config.split,
            even=config.even,
            num_workers=config.num_workers,
            rank=dp_rank,
            world_size=dp_world_size,
            group=group,
        )

    def __iter__(self) -> Iterator[tuple[dict[str, torch.Tensor], torch.Tensor]]:
        for batch in self.loader:
            inputs, labels = torchtitan_batch(batch)
            if self.seq_len is not None and inputs["input"].shape[1] != self.seq_len:
                raise ConfigError(
                    f"the stream's rows give {inputs['input'].shape[1]} inputs, torchtitan's training.seq_len is "
                    f"{self.seq_len}: pack with concat_chunk({self.seq_len + 1}) (a row of L tokens gives L - 1 inputs)"
                )
            yield inputs, labels

    def state_dict(self) -> dict[str, Any]:
        """Every data-parallel rank's state, gathered (every rank calls it)."""
        return self.loader.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Resume this rank's share of what the saved ranks left, at any degree.

        Args:
            state_dict: What DCP loaded into ``state_dict()``'s keys.
        """
        self.loader.load_state_dict(state_dict)


def _stream_at(path: str | None) -> Dataset:
    """The stream ``dataset_path`` names: a data config's training stream, or a cache."""
    if not path:
        raise ConfigError("BeamtokDataLoader: set dataloader.dataset_path (a beamtok data config or a cache directory)")
    if path.endswith((".yaml", ".yml")):
        from beamtok._src.dataset.config import load_config

        train = load_config(path).train
        stages = train.pipeline.stages
        if stages and stages[-1].NAME in BATCHING_STAGES:  # torchtitan's local_batch_size batches instead
            log.info("%s: the train stream's batch stage is left out; torchtitan's local_batch_size batches", path)
            return Dataset(dataclasses.replace(train.pipeline, stages=stages[:-1]))
        return train
    return Dataset.from_cache(path)
