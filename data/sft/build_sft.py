"""Derive the shipped instruction data from the shipped corpus (deterministic, no downloads).

    python data/sft/build_sft.py

- ``shakespeare-dialogue.jsonl`` (prompt/completion): for consecutive speeches in the plays,
  the prompt gives the play, the next speaker and the previous speech; the completion is the
  next speech. Speech lengths vary from one line to long monologues.
- ``pydocs-chat.jsonl`` (chat): conversations about sections of the Python documentation: a
  system turn, then one or two user questions naming a section, each answered with that
  section's text.
"""

from __future__ import annotations

import gzip
import itertools
import json
import re
from pathlib import Path

import zstandard

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent / "corpus"
SPEAKER = re.compile(r"^([A-Z][A-Z .'-]{1,30})\.\s*$")
HEADING = re.compile(r"^([^\n]+)\n([=\-~^*]{3,})\s*$", re.M)
SYSTEM = "You are a concise assistant who answers questions about the Python documentation."


def read_jsonl(path: Path) -> list[str]:
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    elif path.suffix == ".zst":
        raw = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
    return [json.loads(line)["text"] for line in raw.splitlines() if line.strip()]


def speeches(act: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    speaker, lines = None, []
    started = False  # the cast list before the first scene is not dialogue
    for line in act.splitlines():
        if not started:
            started = line.strip().startswith(("Scene", "SCENE"))
            continue
        match = SPEAKER.match(line.strip())
        if match:
            if speaker and lines:
                out.append((speaker, "\n".join(lines).strip()))
            speaker, lines = match.group(1).title(), []
        elif speaker is not None:
            if line.strip().startswith(("[", "ACT", "Scene", "SCENE")):
                if lines:
                    out.append((speaker, "\n".join(lines).strip()))
                speaker, lines = None, []
            else:
                lines.append(line.rstrip())
    return [(s, t) for s, t in out if t]


def dialogue_examples(limit: int) -> list[dict[str, str]]:
    examples = []
    for act in read_jsonl(CORPUS / "shakespeare-00.jsonl") + read_jsonl(CORPUS / "shakespeare-01.jsonl"):
        title = act.strip().splitlines()[0].strip().title()
        pairs = speeches(act)
        for (who, said), (next_who, reply) in itertools.pairwise(pairs):
            if who == next_who:
                continue
            prompt = f"In {title}, {who} says:\n{said}\n\nWrite {next_who}'s reply.\n"
            examples.append({"prompt": prompt, "completion": reply})
            if len(examples) >= limit:
                return examples
    return examples


def sections(doc: str) -> list[tuple[str, str]]:
    heads = list(HEADING.finditer(doc))
    out = []
    for head, nxt in zip(heads, [*heads[1:], None]):
        body = doc[head.end() : nxt.start() if nxt else len(doc)].strip()
        title = head.group(1).strip().strip("*`:")
        if len(body) > 80 and title:
            paragraphs = body.split("\n\n")[:4]
            out.append((title, "\n\n".join(paragraphs)))
    return out


def chat_examples(limit: int) -> list[dict[str, list[dict[str, str]]]]:
    convs = []
    for path in sorted(CORPUS.glob("pydocs-*.jsonl.zst")):
        for doc in read_jsonl(path):
            secs = sections(doc)
            for i in range(0, len(secs) - 1, 2):
                (t1, b1), (t2, b2) = secs[i], secs[i + 1]
                messages = [
                    {"role": "system", "content": SYSTEM},
                    {"role": "user", "content": f"What does the documentation say under '{t1}'?"},
                    {"role": "assistant", "content": b1},
                ]
                if i % 4 == 0:
                    messages += [
                        {"role": "user", "content": f"And under '{t2}'?"},
                        {"role": "assistant", "content": b2},
                    ]
                convs.append({"messages": messages})
                if len(convs) >= limit:
                    return convs
    return convs


def write(path: Path, records: list) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


if __name__ == "__main__":
    write(HERE / "shakespeare-dialogue.jsonl", dialogue_examples(1200))
    write(HERE / "pydocs-chat.jsonl", chat_examples(400))
