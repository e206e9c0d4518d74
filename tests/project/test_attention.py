"""Attention helpers for packed rows: with them, a packed row's per-token losses equal those of
its pieces run one by one (tiny random Hugging Face causal LMs on CPU, real packed rows)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from beamtok import Dataset  # noqa: E402
from beamtok._src.attention import (  # noqa: E402
    IGNORE_INDEX,
    flatten_packed,
    packed_attention_mask,
    packed_labels,
    varlen_seqlens,
)

from conftest import ROOT  # noqa: E402

TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")
SFT = str(ROOT / "data" / "sft" / "shakespeare-dialogue.jsonl")
VOCAB = 50257


@pytest.fixture(scope="module")
def sft_batch() -> dict:
    """Four rows of whole SFT examples packed first-fit, with padding at the ends."""
    ds = (
        Dataset.from_files(SFT).tokenize_sft(TOKENIZER, max_length=96).pack_examples(256, method="first_fit", window=16)
    )
    batch = next(iter(ds.batch(4)))
    assert (batch["segment_ids"].max(axis=1) > 1).all() and (batch["segment_ids"] == 0).any()
    return batch


@pytest.fixture(scope="module")
def text_batch() -> dict:
    """Rows of concatenated documents (a piece may continue a document of the row before)."""
    ds = Dataset.from_files(SFT, text_field="completion").tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(64)
    batch = next(iter(ds.batch(3)))
    assert (batch["segment_ids"].max(axis=1) > 1).all()
    return batch


def tiny(kind: str, attention: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if kind == "llama":
        config = transformers.LlamaConfig(
            vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        )  # fmt: skip
        model = transformers.LlamaForCausalLM(config)
    else:
        config = transformers.GPT2Config(vocab_size=VOCAB, n_layer=2, n_head=2, n_embd=32, n_positions=256)
        model = transformers.GPT2LMHeadModel(config)
    model.set_attn_implementation(attention)
    return model.eval()


def token_losses(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Loss of every trained token, in order (the model's own shift: logits t predict label t+1)."""
    logits, labels = logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1)
    keep = labels != IGNORE_INDEX
    return torch.nn.functional.cross_entropy(logits[keep].float(), labels[keep], reduction="none")


def one_by_one(model: torch.nn.Module, batch: dict) -> torch.Tensor:
    """The losses of each piece of each row run alone, in row order."""
    labels = packed_labels(batch)
    out = []
    for row in range(len(batch["input_ids"])):
        segments = batch["segment_ids"][row]
        for piece in range(1, int(segments.max()) + 1):
            where = np.nonzero(segments == piece)[0]
            ids = torch.as_tensor(batch["input_ids"][row][where]).long().unsqueeze(0)
            with torch.no_grad():
                logits = model(input_ids=ids).logits
            out.append(token_losses(logits, labels[row, where].unsqueeze(0)))
    return torch.cat(out)


def packed(model: torch.nn.Module, batch: dict, mask: torch.Tensor | None, restart: bool = True) -> torch.Tensor:
    positions = torch.as_tensor(batch["position_ids"]).long() if restart else None
    with torch.no_grad():
        logits = model(
            input_ids=torch.as_tensor(batch["input_ids"]).long(), attention_mask=mask, position_ids=positions
        ).logits
    assert not torch.isnan(logits).any()  # padding rows of the mask are never empty
    return token_losses(logits, packed_labels(batch))


@pytest.mark.parametrize(("kind", "attention", "dtype"), [
    ("llama", "sdpa", torch.bool), ("llama", "eager", torch.float32), ("gpt2", "sdpa", torch.bool),
])  # fmt: skip
@pytest.mark.parametrize("which", ["sft", "text"])
def test_packed_row_losses_equal_pieces_run_alone(kind, attention, dtype, which, sft_batch, text_batch):
    batch = sft_batch if which == "sft" else text_batch
    model = tiny(kind, attention)
    alone = one_by_one(model, batch)
    together = packed(model, batch, packed_attention_mask(batch["segment_ids"], dtype=dtype))
    assert len(together) == len(alone) > 50
    torch.testing.assert_close(together, alone, atol=2e-5, rtol=1e-4)
    assert abs(float(together.sum() - alone.sum())) < 1e-3 * len(alone)
    # a row given as is (padding mask, positions 0..L-1) lets pieces see each other: the
    # comparison above can fail
    naive = packed(model, batch, torch.as_tensor(batch["segment_ids"] > 0).long(), restart=False)
    assert not torch.allclose(naive, alone, atol=1e-3)


def test_labels_skip_padding_masked_tokens_and_piece_starts(sft_batch, text_batch):
    labels = packed_labels(sft_batch)
    segments = torch.as_tensor(sft_batch["segment_ids"])
    starts = torch.ones_like(segments, dtype=torch.bool)
    starts[:, 1:] = segments[:, 1:] != segments[:, :-1]
    assert (labels[(segments == 0) | starts] == IGNORE_INDEX).all()
    trained = torch.as_tensor(sft_batch["labels"]) != IGNORE_INDEX
    assert torch.equal(labels[trained & ~starts], torch.as_tensor(sft_batch["labels"]).long()[trained & ~starts])
    plain = packed_labels(text_batch)  # no labels field: from input_ids and loss_mask
    ids = torch.as_tensor(text_batch["input_ids"]).long()
    assert torch.equal(plain[:, 1:][plain[:, 1:] != IGNORE_INDEX], ids[:, 1:][plain[:, 1:] != IGNORE_INDEX])
    assert (plain[:, 0] == IGNORE_INDEX).all()


def test_mask_is_block_diagonal_and_causal():
    mask = packed_attention_mask(np.array([[1, 1, 2, 2, 2, 0]]))[0, 0]
    want = torch.tensor([
        [1, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0],
        [0, 0, 1, 0, 0, 0],
        [0, 0, 1, 1, 0, 0],
        [0, 0, 1, 1, 1, 0],
        [0, 0, 0, 0, 0, 1],
    ], dtype=torch.bool)  # fmt: skip
    assert torch.equal(mask, want)
    additive = packed_attention_mask(np.array([1, 1, 2]), dtype=torch.float16)[0, 0]
    assert additive[1, 0] == 0 and additive[0, 1] == torch.finfo(torch.float16).min
    with pytest.raises(ValueError, match="bool or a float"):
        packed_attention_mask(np.array([1]), dtype=torch.int64)


def test_varlen_pieces_match_masked_attention(sft_batch):
    """Attention run piece by piece over the unpadded tokens, cut by cu_seqlens, equals
    attention over the padded batch with the block mask; the boundaries are the ones
    Hugging Face derives from flattened position_ids."""
    segments = sft_batch["segment_ids"]
    batch, length = segments.shape
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(batch, 2, length, 8, generator=generator) for _ in range(3))
    full = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=packed_attention_mask(segments))
    seqs = varlen_seqlens(segments)
    flat = [t.transpose(1, 2).reshape(batch * length, 2, 8)[seqs.indices] for t in (q, k, v, full)]
    bounds = seqs.cu_seqlens.tolist()
    assert seqs.max_seqlen == max(b - a for a, b in itertools.pairwise(bounds))
    assert len(bounds) - 1 == sum(int(row.max()) for row in segments)
    for a, b in itertools.pairwise(bounds):
        piece = [t[a:b].transpose(0, 1) for t in flat[:3]]
        alone = torch.nn.functional.scaled_dot_product_attention(*piece, is_causal=True)
        torch.testing.assert_close(alone.transpose(0, 1), flat[3][a:b])
    from transformers.modeling_flash_attention_utils import prepare_fa_kwargs_from_position_ids

    (cu_q, _), (max_q, _) = prepare_fa_kwargs_from_position_ids(flatten_packed(sft_batch)["position_ids"])
    assert torch.equal(cu_q, seqs.cu_seqlens) and int(max_q) == seqs.max_seqlen


def test_flattening_matches_hugging_face_collator(sft_batch):
    """flatten_packed gives what DataCollatorWithFlattening gives for the same pieces."""
    features = []
    for row in range(len(sft_batch["input_ids"])):
        segments = sft_batch["segment_ids"][row]
        for piece in range(1, int(segments.max()) + 1):
            where = segments == piece
            features.append(
                {
                    "input_ids": sft_batch["input_ids"][row][where].tolist(),
                    "labels": sft_batch["labels"][row][where].tolist(),
                }
            )
    theirs = transformers.DataCollatorWithFlattening(return_flash_attn_kwargs=True)(features, return_tensors="pt")
    ours = flatten_packed(sft_batch)
    for key in ("input_ids", "labels", "position_ids", "cu_seq_lens_q", "cu_seq_lens_k"):
        assert torch.equal(ours[key].long(), torch.as_tensor(theirs[key]).long()), key
    assert ours["max_length_q"] == int(theirs["max_length_q"])


def test_flattened_row_through_a_model_equals_pieces_alone(sft_batch):
    """Hugging Face models find packed pieces from restarting position_ids when no mask is
    given (and no cache, as in training): the flattened row's losses equal the pieces run alone."""
    model = tiny("llama", "sdpa")
    flat = flatten_packed(sft_batch)
    with torch.no_grad():
        logits = model(input_ids=flat["input_ids"], position_ids=flat["position_ids"], use_cache=False).logits
    torch.testing.assert_close(token_losses(logits, flat["labels"]), one_by_one(model, sft_batch), atol=2e-5, rtol=1e-4)
