"""Hugging Face ``Trainer`` integration: checkpoints that hold the data position, resumes
without replay, and collators for packed rows.

``Trainer`` resumes an iterable dataset by reading and discarding every batch up to the
checkpoint's step, so a resume late in a run re-tokenizes (or re-reads) everything before it.
:class:`BeamtokCallback` instead stores the beamtok state in each checkpoint (in
``trainer_state.json``, beside the other callbacks' states) and, on
``trainer.train(resume_from_checkpoint=...)``, hands it to the dataset before the first batch
is read, with the Trainer's own skipping turned off (the callback sets ``ignore_data_skip``, and
``remove_unused_columns=False`` so the collator sees ``segment_ids``)::

    train = ds.to_torch()  # unbatched examples: the Trainer batches them
    trainer = Trainer(model, args, train_dataset=train, data_collator=PackedCollator(),
                      callbacks=[BeamtokCallback(train)])

The state is the one after the examples the optimizer steps consumed, not after what the
loader fetched ahead: the dataset keeps the state after each example it yielded and the
callback picks the one for the examples the steps since the start (or the resume) consumed,
``per_device_train_batch_size x gradient_accumulation_steps x processes`` a step.

On several processes (``accelerate launch --num_processes N``) give the Trainer the whole
stream: accelerate reads it on process 0 and deals each global batch out (its default for an
iterable dataset), so the one position the checkpoint holds is the whole job's, and a resume
on another number of processes, or with another batch size, goes on from the next example.
``dataloader_num_workers=0`` (tokenize in workers with ``ds.parallel(n)``) and a stream that
does not end before ``max_steps`` (``repeat()``, or a mix with ``stop="never"``) keep the count
exact; other setups are refused by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from beamtok._src.base.extras import missing_extra

try:
    import torch
    from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
    from transformers.trainer_callback import ExportableState
except ImportError as error:
    raise ModuleNotFoundError(missing_extra("beamtok._src.trainer", "torch", "accelerate") or str(error)) from None

from beamtok._src.attention import flatten_packed, packed_attention_mask, packed_labels
from beamtok._src.base.errors import ConfigError, StateError
from beamtok._src.dataset.iterating import saved_iterator
from beamtok._src.stream.stages.collate import collate
from beamtok._src.stream.torch_dataset import TorchIterableDataset

__all__ = ["BeamtokCallback", "PackedCollator"]


class BeamtokCallback(TrainerCallback, ExportableState):
    """Saves the beamtok state in every Trainer checkpoint and resumes from it without replay."""

    def __init__(self, dataset: TorchIterableDataset | None = None) -> None:
        """Give the dataset the Trainer reads, or let the callback find it at ``on_init_end``.

        Args:
            dataset: The ``ds.to_torch()`` object given to the Trainer.
        """
        self.dataset = dataset
        self.saved: dict[str, Any] | None = None  # what the next checkpoint records
        self.start = (0, 0)  # (global step, examples consumed) the run started or resumed at
        if dataset is not None:
            dataset.record_states()

    def state(self) -> dict[str, Any]:
        return {"args": {}, "attributes": {"saved": self.saved}}

    def on_init_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        """Check the Trainer reads the data as the callback can follow it.

        Args:
            args: The Trainer's ``TrainingArguments``.
            state: The Trainer's ``TrainerState``.
            control: The Trainer's ``TrainerControl``.
            **kwargs: What the Trainer passes besides (unused).
        Raises:
            ConfigError: The Trainer reads the data in a way the callback cannot follow.
        """
        if self.dataset is None:
            raise ConfigError("BeamtokCallback(dataset): pass the ds.to_torch() object given to the Trainer")
        if args.dataloader_num_workers:
            raise ConfigError(
                f"BeamtokCallback needs dataloader_num_workers=0 (got {args.dataloader_num_workers}): the loader's "
                "workers hold the data position out of reach; tokenize in workers with ds.parallel(n) instead"
            )
        if args.world_size > 1 and self.dataset.dataset.pipeline.reader.world_size > 1:
            raise ConfigError(
                f"on {args.world_size} processes, give the Trainer the whole stream, not shard_by_rank(...): accelerate "
                "deals each global batch out to the processes itself"
            )
        if args.restore_callback_states_from_checkpoint:
            raise ConfigError(
                "restore_callback_states_from_checkpoint=True would rebuild BeamtokCallback without its dataset; "
                "leave it False (BeamtokCallback restores the data position itself)"
            )
        args.ignore_data_skip = True  # the state resumes the data; skipping batches as well would lose them
        args.remove_unused_columns = False  # the collator needs segment_ids, which no model's forward takes

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Resume the data where the checkpoint the Trainer resumes from left it.

        Args:
            args: The Trainer's ``TrainingArguments``.
            state: The Trainer's ``TrainerState``.
            control: The Trainer's ``TrainerControl``.
            **kwargs: What the Trainer passes besides (unused).
        """
        assert self.dataset is not None
        self.start = (0, 0)
        if state.global_step == 0:
            return
        callbacks: Any = state.stateful_callbacks or {}  # a dict once loaded from a checkpoint
        stored = callbacks.get(type(self).__name__)
        saved = stored.get("attributes", {}).get("saved") if isinstance(stored, dict) else None
        if saved is None:
            raise StateError(
                f"the checkpoint at step {state.global_step} holds no beamtok state (it was saved without "
                "BeamtokCallback); resuming would replay or lose data"
            )
        if saved.get("step", state.global_step) != state.global_step:
            raise StateError(
                f"the checkpoint's beamtok state was saved at step {saved['step']}, the checkpoint is of step "
                f"{state.global_step}: it was copied from another checkpoint"
            )
        if "step" not in saved and saved["examples"] != _per_step(args) * state.global_step:
            raise StateError(  # a state of an earlier beamtok, which did not record the step
                f"the checkpoint's beamtok state is after {saved['examples']} examples, but step {state.global_step} "
                f"with this batch size and accumulation consumed {_per_step(args) * state.global_step}: resume with the "
                "per_device_train_batch_size and gradient_accumulation_steps of the saved run"
            )
        self.dataset.load_state_dict(saved["state"])
        self.dataset.start_count(saved["examples"])
        self.start = (state.global_step, saved["examples"])
        if _dispatches(args) and self._at_the_end(saved["state"]):
            raise StateError(
                f"the checkpoint at step {state.global_step} was saved at the end of the data: nothing is left to train. "
                "accelerate's batch dispatcher (the Trainer's default for iterable datasets) fails on data that yields "
                "nothing; pass accelerator_config={'dispatch_batches': False} for the run to end by itself, or add "
                ".repeat() to the dataset for more epochs"
            )

    def _at_the_end(self, saved: dict[str, Any]) -> bool:
        """Whether a stream resumed from ``saved`` has nothing left (it reads at most one item)."""
        assert self.dataset is not None
        with saved_iterator(self.dataset.dataset.pipeline, saved) as rest:
            return next(rest, None) is None

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        """Record the data position after this optimizer step, for the next checkpoint.

        Args:
            args: The Trainer's ``TrainingArguments``.
            state: The Trainer's ``TrainerState``.
            control: The Trainer's ``TrainerControl``.
            **kwargs: What the Trainer passes besides (unused).
        """
        assert self.dataset is not None
        if not state.is_world_process_zero and not self.dataset.recorded():
            return  # accelerate dispatches batches read on process 0; this process never reads the data
        step0, examples0 = self.start
        examples = examples0 + (state.global_step - step0) * _per_step(args)
        self.saved = {"examples": examples, "step": state.global_step, "state": self.dataset.state_after(examples)}


def _dispatches(args: TrainingArguments) -> bool:
    """Whether accelerate dispatches the batches (its default for an iterable dataset)."""
    config = getattr(args, "accelerator_config", None)
    return getattr(config, "dispatch_batches", None) is not False


def _per_step(args: TrainingArguments) -> int:
    """Examples one optimizer step consumes from the stream, over every process: accelerate
    reads a global batch of one per-device batch per process (or splits one batch of the
    per-device size over them, with ``split_batches``)."""
    split = bool(getattr(getattr(args, "accelerator_config", None), "split_batches", False))
    processes = 1 if split else max(1, args.world_size)
    return args.gradient_accumulation_steps * args.per_device_train_batch_size * processes


class PackedCollator:
    """Collates beamtok examples (packed rows) into model inputs that keep the examples packed
    into one row apart.

    ``flatten=False``: ``input_ids``, ``position_ids``, ``labels`` (:func:`packed_labels`) and a
    4-D block-diagonal ``attention_mask`` (boolean for ``sdpa``; pass ``mask_dtype=torch.float32``
    for ``eager``). ``flatten=True``: the Hugging Face flattening convention
    (:func:`flatten_packed`), for ``flash_attention_2`` or for ``sdpa`` models that find the pieces
    from restarting ``position_ids``."""

    def __init__(self, pad_id: int = 0, *, flatten: bool = False, mask_dtype: torch.dtype = torch.bool) -> None:
        """Set how rows are collated (see the class docstring).

        Args:
            pad_id: The id padding rows get where they are flattened.
            flatten: Collate into one flattened row (see above).
            mask_dtype: The attention mask's dtype: ``torch.bool``, or a float dtype for an additive mask.
        """
        self.pad_id = pad_id
        self.flatten = flatten
        self.mask_dtype = mask_dtype

    def __call__(self, examples: Sequence[dict[str, Any]]) -> dict[str, Any]:
        if not examples or "segment_ids" not in examples[0]:
            raise ConfigError(
                "PackedCollator needs packed beamtok examples with segment_ids "
                "(with a Trainer: remove_unused_columns=False, which BeamtokCallback sets)"
            )
        if getattr(examples[0]["segment_ids"], "ndim", 0) != 1:
            raise ConfigError("PackedCollator takes single packed examples; leave .batch() to the Trainer")
        batch = collate(list(examples), self.pad_id)
        if self.flatten:
            return flatten_packed(batch)
        return {
            "input_ids": torch.as_tensor(batch["input_ids"]).long(),
            "position_ids": torch.as_tensor(batch["position_ids"]).long(),
            "labels": packed_labels(batch),
            "attention_mask": packed_attention_mask(batch["segment_ids"], dtype=self.mask_dtype),
        }
