"""Packed rows in the conventions other trainers use, held to their own collators:
``batch(mask_starts=True)`` masks the loss at each piece's first token as TRL's padding-free
``DataCollatorForLanguageModeling`` and ``transformers``' ``DataCollatorWithFlattening`` mask
each sequence's first label; ``batch(pad_positions="continue")`` gives padding position ids
that ``transformers``' flash-attention helper does not take for sequence starts."""

from __future__ import annotations

import json

import numpy as np
import pytest

from beamtok import Dataset
from beamtok._src.stream.stages.batch import Batch

from conftest import ROOT, TOKENIZER_DIR, write_jsonl

torch = pytest.importorskip("torch")
TOKENIZER = str(TOKENIZER_DIR)
SFT = str(ROOT / "data" / "sft" / "shakespeare-dialogue.jsonl")


@pytest.fixture(scope="module")
def prose(tmp_path_factory) -> str:
    from conftest import real_paragraphs

    path = tmp_path_factory.mktemp("prose") / "p.jsonl"
    return str(write_jsonl(path, [{"text": t} for t in real_paragraphs(80)]))


def pretraining(prose: str) -> Dataset:
    return Dataset.from_files([prose]).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(128)


def sft() -> Dataset:
    return (
        Dataset.from_files([SFT])
        .tokenize_sft(TOKENIZER, max_length=120)
        .pack_examples(128, method="first_fit", window=16)
    )


def pieces_of(batch: dict, row: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(ids, loss mask) of each piece of ``row``, in order."""
    segments = batch["segment_ids"][row]
    out = []
    for s in sorted(set(segments.tolist()) - {0}):
        at = segments == s
        out.append((batch["input_ids"][row][at], batch["loss_mask"][row][at]))
    return out


def labels_of(ids: np.ndarray, mask: np.ndarray) -> list[int]:
    return np.where(mask == 1, ids, -100).tolist()


@pytest.mark.parametrize("kind", ["pretraining", "sft"])
def test_masked_starts_equal_trl_and_transformers_collators(prose, kind):
    from transformers import DataCollatorWithFlattening
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    ds = pretraining(prose) if kind == "pretraining" else sft()
    plain = next(iter(ds.batch(6)))
    ours = next(iter(ds.batch(6, mask_starts=True)))
    real = plain["segment_ids"] > 0
    ours_flat = labels_of(ours["input_ids"][real], ours["loss_mask"][real])
    if "labels" in ours:
        assert ours["labels"][real].tolist() == ours_flat
    # transformers: one feature a piece, its labels as packed (the flattening masks each first one)
    features = [
        {"input_ids": ids.tolist(), "labels": labels_of(ids, mask)}
        for row in range(6)
        for ids, mask in pieces_of(plain, row)
    ]
    flattened = DataCollatorWithFlattening(return_position_ids=True, separator_id=-100, return_tensors="np")(features)
    assert np.asarray(flattened["labels"]).reshape(-1).tolist() == ours_flat
    assert np.asarray(flattened["position_ids"]).reshape(-1).tolist() == plain["position_ids"][real].tolist()
    # TRL: one example a row with its pieces' lengths, padding-free
    examples = []
    for row in range(6):
        pieces = pieces_of(plain, row)
        ids = np.concatenate([p[0] for p in pieces])
        examples.append(
            {
                "input_ids": ids.tolist(),
                "labels": labels_of(ids, np.concatenate([p[1] for p in pieces])),
                "seq_lengths": [len(p[0]) for p in pieces],
            }
        )
    trl = DataCollatorForLanguageModeling(pad_token_id=0, padding_free=True)(examples)
    assert trl["labels"].reshape(-1).tolist() == ours_flat
    assert trl["position_ids"].reshape(-1).tolist() == plain["position_ids"][real].tolist()
    # the rest of the batch is as it was
    for name in plain:
        if name not in ("loss_mask", "labels"):
            np.testing.assert_array_equal(np.asarray(plain[name]), np.asarray(ours[name]), err_msg=name)


def test_padding_positions_are_not_taken_for_sequence_starts():
    from transformers.modeling_flash_attention_utils import prepare_fa_kwargs_from_position_ids

    from beamtok._src.attention import varlen_seqlens

    ds = sft()
    zero = next(iter(ds.batch(4)))
    cont = next(iter(ds.batch(4, pad_positions="continue", tensors="torch")))
    real = zero["segment_ids"] > 0
    assert not real.all()  # padded rows: the case in question
    np.testing.assert_array_equal(
        cont["position_ids"].numpy()[real], zero["position_ids"][real]
    )  # real tokens untouched
    for row in range(4):
        pieces = varlen_seqlens(torch.from_numpy(zero["segment_ids"][row : row + 1])).cu_seqlens.tolist()
        length = zero["segment_ids"].shape[1]
        (cu, _), _ = prepare_fa_kwargs_from_position_ids(cont["position_ids"][row : row + 1])
        assert cu.tolist() == [*pieces[:-1], length]  # the pieces; padding joins the last one
        (cu_zero, _), _ = prepare_fa_kwargs_from_position_ids(torch.from_numpy(zero["position_ids"][row : row + 1]))
        pads = int((~real[row]).sum())
        assert len(cu_zero.tolist()) == len(pieces) + pads  # with zeros every pad token is a sequence of its own


def test_a_row_of_padding_alone_counts_from_zero():
    from beamtok._src.stream.stages.collate import packed_conventions

    batch = {"segment_ids": np.array([[1, 1, 0], [0, 0, 0]]), "position_ids": np.array([[0, 1, 0], [0, 0, 0]])}
    out = packed_conventions(batch, pad_positions="continue")
    assert out["position_ids"].tolist() == [[0, 1, 2], [0, 1, 2]]
    assert batch["position_ids"].tolist() == [[0, 1, 0], [0, 0, 0]]  # the batch given is unchanged


def test_cache_and_stream_give_the_same_conventions(prose, tmp_path):
    pytest.importorskip("apache_beam")
    online = pretraining(prose)
    cached = online.cache(str(tmp_path / "c"), progress=False)
    for options in (
        {"mask_starts": True},
        {"pad_positions": "continue"},
        {"mask_starts": True, "pad_positions": "continue"},
    ):
        a, b = (
            list(online.batch(5, **options)),
            list(cached.batch(5, **options)),
        )  # examples collated; row blocks stacked
        assert len(a) == len(b)
        for x, y in zip(a, b):
            for name in ("input_ids", "loss_mask", "position_ids", "segment_ids"):
                np.testing.assert_array_equal(x[name], y[name], err_msg=f"{options} {name}")


def test_defaults_keep_fingerprints_and_options_change_freely_on_resume(prose):
    assert Batch(8).to_json() == {"stage": "batch", "size": 8, "drop_last": False, "tensors": "numpy"}
    assert Batch(8, mask_starts=True).to_json()["mask_starts"] is True
    ds = pretraining(prose)
    assert ds.batch(4).stream_fingerprint != ds.batch(4, mask_starts=True).stream_fingerprint
    it = ds.batch(4).iter()
    next(it)
    state = json.loads(json.dumps(it.state_dict()))
    want = list(ds.batch(4, mask_starts=True).iter_at(1))
    got = list(ds.batch(4, mask_starts=True).iter(state))  # the conventions touch no position
    assert len(got) == len(want) and all((g["loss_mask"] == w["loss_mask"]).all() for g, w in zip(got, want))
    with pytest.raises(Exception, match="pad_positions"):
        ds.batch(4, pad_positions="ones")
