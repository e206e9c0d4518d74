"""Hugging Face Trainer: checkpoints hold the beamtok state, a resume reads on from it without
replaying a batch, and the batches after a resume equal those of the uninterrupted run."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from beamtok import ConfigError, Dataset, StateError  # noqa: E402
from beamtok._src.trainer import BeamtokCallback, PackedCollator  # noqa: E402

from conftest import ROOT  # noqa: E402

TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")
SFT = str(ROOT / "data" / "sft" / "shakespeare-dialogue.jsonl")
BATCH, ACCUMULATE, STEPS = 2, 2, 12


def data() -> Dataset:
    packed = (
        Dataset.from_files(SFT).tokenize_sft(TOKENIZER, max_length=96).pack_examples(128, method="first_fit", window=16)
    )
    return packed.repeat().shuffle(8, seed=3)


class Recording(transformers.Trainer):
    """Records the tokens of every micro-batch the model trains on."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seen: list[list[int]] = []

    def compute_loss(self, model, inputs, *args, **kwargs):
        self.seen.append(inputs["input_ids"].reshape(-1).tolist())
        return super().compute_loss(model, inputs, *args, **kwargs)


def trainer(out: Path, **overrides) -> tuple[Recording, object]:
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=50257, n_layer=1, n_head=2, n_embd=32, n_positions=128)
    model = transformers.GPT2LMHeadModel(config)
    settings = dict(
        output_dir=str(out), max_steps=STEPS, per_device_train_batch_size=BATCH,
        gradient_accumulation_steps=ACCUMULATE, save_steps=4, logging_steps=100, report_to=[],
        use_cpu=True, learning_rate=1e-3, dataloader_num_workers=0, seed=0,
    )  # fmt: skip
    settings.update(overrides)
    args = transformers.TrainingArguments(**settings)
    train = data().to_torch()
    callback = BeamtokCallback(train)
    return Recording(
        model=model, args=args, train_dataset=train, data_collator=PackedCollator(), callbacks=[callback]
    ), train


@pytest.mark.slow  # a whole job: make test-fast leaves it out
def test_resume_from_a_checkpoint_continues_without_replay(tmp_path):
    full, _ = trainer(tmp_path / "full")
    full.train()
    assert len(full.seen) == STEPS * ACCUMULATE
    for step in (4, 8):
        checkpoint = tmp_path / "full" / f"checkpoint-{step}"
        saved = json.loads((checkpoint / "trainer_state.json").read_text())["stateful_callbacks"]["BeamtokCallback"]
        assert saved["attributes"]["saved"]["examples"] == step * ACCUMULATE * BATCH
        resumed, train = trainer(tmp_path / f"resumed-{step}")
        resumed.train(resume_from_checkpoint=str(checkpoint))
        assert resumed.seen == full.seen[step * ACCUMULATE :], f"resumed at step {step}"
        # no replay: the resumed stream started at the saved state and read only what was trained on
        # (plus what the loader fetched ahead), never the examples before the checkpoint
        yielded = train._count - step * ACCUMULATE * BATCH
        assert (STEPS - step) * ACCUMULATE * BATCH <= yielded <= (STEPS - step) * ACCUMULATE * BATCH + 2 * BATCH
        assert min(train._history) == STEPS * ACCUMULATE * BATCH  # history pruned as steps end


def test_the_data_position_is_the_trained_one_not_the_fetched_one(tmp_path):
    full, _ = trainer(tmp_path / "full", max_steps=4, save_steps=4)
    full.train()
    saved = json.loads((tmp_path / "full" / "checkpoint-4" / "trainer_state.json").read_text())
    state = saved["stateful_callbacks"]["BeamtokCallback"]["attributes"]["saved"]["state"]
    it = data().iter(state)
    skipped = list(data().take(4 * ACCUMULATE * BATCH + 1))[-1]
    assert (next(it)["input_ids"] == skipped["input_ids"]).all()


def test_mistakes_are_refused_by_name(tmp_path):
    with pytest.raises(ConfigError, match="dataloader_num_workers=0"):
        trainer(tmp_path / "w", dataloader_num_workers=1)
    with pytest.raises(ConfigError, match="restore_callback_states_from_checkpoint"):
        trainer(tmp_path / "r", restore_callback_states_from_checkpoint=True)
    plain, _ = trainer(tmp_path / "plain", max_steps=4)
    plain.callback_handler.remove_callback(BeamtokCallback)
    plain.train()
    resumed, _ = trainer(tmp_path / "again")
    with pytest.raises(StateError, match="holds no beamtok state"):
        resumed.train(resume_from_checkpoint=str(tmp_path / "plain" / "checkpoint-4"))
    full, _ = trainer(tmp_path / "full", max_steps=4)
    full.train()
    checkpoint = tmp_path / "full" / "checkpoint-4"
    stored = json.loads((checkpoint / "trainer_state.json").read_text())
    stored["stateful_callbacks"]["BeamtokCallback"]["attributes"]["saved"]["step"] = 2  # copied from checkpoint-2
    (checkpoint / "trainer_state.json").write_text(json.dumps(stored))
    copied, _ = trainer(tmp_path / "copied")
    with pytest.raises(StateError, match="copied from another checkpoint"):
        copied.train(resume_from_checkpoint=str(checkpoint))


def test_another_batch_size_goes_on_from_the_next_example(tmp_path):
    full, _ = trainer(tmp_path / "full", max_steps=4)
    full.train()
    bigger, _ = trainer(tmp_path / "bigger", max_steps=6, per_device_train_batch_size=3)
    bigger.train(resume_from_checkpoint=str(tmp_path / "full" / "checkpoint-4"))
    consumed = 4 * BATCH * ACCUMULATE
    reference = [list(map(int, ex["input_ids"])) for ex in itertools.islice(data(), consumed + 2 * 3 * ACCUMULATE)]
    trained = [row for micro in bigger.seen for row in _rows(micro, 128)]
    assert trained == reference[consumed:]
    with pytest.raises(ConfigError, match=r"leave \.batch"):
        PackedCollator()([next(iter(data().batch(2)))])


def _rows(flat: list[int], width: int) -> list[list[int]]:
    return [flat[i : i + width] for i in range(0, len(flat), width)]


@pytest.mark.slow  # a whole job: make test-fast leaves it out
def test_a_checkpoint_at_the_end_of_the_data_resumes_to_nothing(tmp_path):
    rows = 16  # a finite dataset: every row trained once in 8 steps of 2

    def finite_trainer(out: Path, steps: int, dispatch: bool = False) -> Recording:
        torch.manual_seed(0)
        config = transformers.GPT2Config(vocab_size=50257, n_layer=1, n_head=2, n_embd=32, n_positions=128)
        args = transformers.TrainingArguments(
            output_dir=str(out), max_steps=steps, per_device_train_batch_size=2, save_steps=rows // 2,
            logging_steps=100, report_to=[], use_cpu=True, dataloader_num_workers=0, seed=0,
            accelerator_config={"dispatch_batches": dispatch},
        )  # fmt: skip
        train = (
            Dataset.from_files(SFT)
            .tokenize_sft(TOKENIZER, max_length=96)
            .pack_examples(128, method="first_fit", window=16)
            .take(rows)
            .to_torch()
        )
        model = transformers.GPT2LMHeadModel(config)
        return Recording(
            model=model,
            args=args,
            train_dataset=train,
            data_collator=PackedCollator(),
            callbacks=[BeamtokCallback(train)],
        )

    full = finite_trainer(tmp_path / "full", rows // 2)
    full.train()
    assert len(full.seen) == rows // 2
    resumed = finite_trainer(tmp_path / "resumed", rows // 2 + 4)  # steps left to take, but no data
    resumed.train(resume_from_checkpoint=str(tmp_path / "full" / f"checkpoint-{rows // 2}"))
    assert resumed.seen == []
    # accelerate's dispatcher fails on data that yields nothing: said in one line, before a step
    dispatching = finite_trainer(tmp_path / "dispatching", rows // 2 + 4, dispatch=True)
    with pytest.raises(StateError, match="saved at the end of the data: nothing is left to train") as refused:
        dispatching.train(resume_from_checkpoint=str(tmp_path / "full" / f"checkpoint-{rows // 2}"))
    assert "\n" not in str(refused.value) and dispatching.seen == []
