"""Megatron-Core's indexed dataset written by the Beam pipeline (beamtok._src.beam.megatron): the
same bytes Megatron-Core's own builder writes for the same documents with the ids
``tokenizers`` gives (``preprocess_data.py --append-eod``), read by its ``IndexedDataset``, and
consumed by a ``GPTDataset`` built by its ``BlendedMegatronDatasetBuilder`` on CPU."""

from __future__ import annotations

import io
import json
import warnings

import numpy as np
import pytest
import zstandard

from beamtok import ConfigError, Dataset
from beamtok._src.cache.format.megatron_index import read_index

from conftest import CORPUS, TOKENIZER_DIR

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # "Transformer Engine and Apex are not installed": not needed to read data
    indexed = pytest.importorskip("megatron.core.datasets.indexed_dataset")
    torch = pytest.importorskip("torch")

FILES = [str(CORPUS / "shakespeare-00.jsonl"), str(CORPUS / "pydocs-00.jsonl.zst")]


def texts(path: str) -> list[str]:
    raw = open(path, "rb").read()
    if path.endswith(".zst"):
        raw = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw)).read()
    return [json.loads(line)["text"] for line in raw.decode().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    root = tmp_path_factory.mktemp("megatron")
    prefix = str(root / "corpus_text_document")
    ds = Dataset.from_files(FILES).tokenize(str(TOKENIZER_DIR)).ensure_bos_eos(bos=False)
    report = ds.to_megatron(prefix, direct_running_mode="multi_processing", direct_num_workers=2)
    return root, prefix, report


def test_the_files_are_megatron_s_own_builder_s_bytes(written):
    from transformers import AutoTokenizer

    root, prefix, report = written
    tok = AutoTokenizer.from_pretrained(str(TOKENIZER_DIR))
    builder = indexed.IndexedDatasetBuilder(str(root / "ref.bin"), dtype=indexed.DType.optimal_dtype(len(tok)))
    count = 0
    for path in FILES:  # what preprocess_data.py --append-eod does with each JSON line
        for text in texts(path):
            ids = tok(text)["input_ids"] + [tok.eos_token_id]
            builder.add_document(torch.tensor(ids), [len(ids)])
            count += 1
    builder.finalize(str(root / "ref.idx"))
    assert report["documents"] == report["read"] == count and report["dtype"] == "uint16"
    assert (root / "ref.bin").read_bytes() == open(prefix + ".bin", "rb").read()
    assert (root / "ref.idx").read_bytes() == open(prefix + ".idx", "rb").read()
    assert not (root / "corpus_text_document.parts").exists()


def test_megatron_reads_it_and_a_gpt_dataset_consumes_it(written):
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.megatron_tokenizer import MegatronLegacyTokenizer

    root, prefix, _ = written
    data = indexed.IndexedDataset(prefix)
    docs = list(Dataset.from_files(FILES).tokenize(str(TOKENIZER_DIR)).ensure_bos_eos(bos=False).iter())
    assert len(data) == len(docs) and all((data[i] == docs[i]["input_ids"]).all() for i in range(len(docs)))

    class GPT2(MegatronLegacyTokenizer):
        def __init__(self) -> None:
            super().__init__(str(TOKENIZER_DIR))

        def tokenize(self, text: str) -> np.ndarray:
            raise NotImplementedError

        @property
        def vocab(self):
            return {}

        @property
        def inv_vocab(self):
            return {}

        @property
        def vocab_size(self) -> int:
            return 50257

        @property
        def eod(self) -> int:
            return 50256

    config = GPTDatasetConfig(
        random_seed=1234,
        sequence_length=256,
        blend=([prefix], None),
        split="1,0,0",
        tokenizer=GPT2(),
        reset_position_ids=False,
        reset_attention_mask=False,
        eod_mask_loss=False,
        path_to_cache=str(root / "index-cache"),
    )
    train, _, _ = BlendedMegatronDatasetBuilder(GPTDataset, [200, None, None], lambda: True, config).build()
    assert len(train) >= 200
    sample = train[0]
    assert sample["tokens"].shape == (256,) and sample["labels"].shape == (256,)
    every = np.concatenate([d["input_ids"] for d in docs])
    text = sample["tokens"].numpy()
    starts = np.flatnonzero(every[: len(every) - 256] == text[0])
    assert any((every[s : s + 256] == text).all() for s in starts)  # a window of the documents, end to end


def test_refusals(tmp_path):
    base = Dataset.from_files(FILES[:1]).tokenize(str(TOKENIZER_DIR))
    with pytest.raises(ConfigError, match="Megatron packs its own samples"):
        base.concat_chunk(64).to_megatron(str(tmp_path / "x"))
    with pytest.raises(ConfigError, match="call it before shuffle"):
        base.batch(2).to_megatron(str(tmp_path / "x"))
    with pytest.raises(ConfigError, match="written to a local path"):
        base.to_megatron("s3://bucket/x")
    with pytest.raises(ConfigError, match="holds token ids"):
        Dataset.from_files(FILES[:1]).to_megatron(str(tmp_path / "x"))


def test_the_index_reader_refuses_what_is_not_one(tmp_path):
    from beamtok import CacheError

    (tmp_path / "x.idx").write_bytes(b"not an index")
    with pytest.raises(CacheError, match="not a Megatron index"):
        read_index(str(tmp_path / "x.idx"))


def test_the_cli_writes_what_to_megatron_writes(written):
    from click.testing import CliRunner

    from beamtok._src.cli.app import main

    root, prefix, report = written
    out = str(root / "cli_text_document")
    result = CliRunner().invoke(
        main, ["cache", *FILES, "--tokenizer", str(TOKENIZER_DIR), "--megatron", "--output", out]
    )
    assert result.exit_code == 0, result.output
    assert f"megatron {out}: {report['documents']:,} documents, {report['tokens']:,} tokens as uint16" in result.output
    for suffix in (".bin", ".idx"):
        assert open(out + suffix, "rb").read() == open(prefix + suffix, "rb").read()
    packed = CliRunner().invoke(
        main, ["cache", *FILES, "--tokenizer", str(TOKENIZER_DIR), "--megatron", "--pack", "concat_chunk", "--seq-len", "64", "--output", out]
    )  # fmt: skip
    assert packed.exit_code == 2 and "Megatron packs its own samples" in packed.output
