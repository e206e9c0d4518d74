"""A real training loop: a tiny GPT-2 (random weights, CPU) trained on a mix of two sources,
the global batch split over 2 simulated ranks with 2 StatefulDataLoader workers each,
checkpointed (model, optimizer, every loader's state), and restarted on 1 rank and on 4
ranks. The loss continues from the checkpoint, the examples of all phases are exactly the
first examples of the one global mixed stream (nothing lost, nothing repeated), and each
source's share is within 1% of its weight."""

from __future__ import annotations

import copy
import itertools
import json
from collections import Counter

import pytest

from beamtok import Dataset, reader_states

from conftest import CORPUS, ROOT

torch = pytest.importorskip("torch")
pytest.importorskip("torchdata")
transformers = pytest.importorskip("transformers")

TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")
WEIGHTS = [0.7, 0.3]
BATCH = 4  # per rank
WORKERS = 2  # DataLoader workers per rank


def mixed() -> Dataset:
    def corpus(files):
        return Dataset.from_files(files).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(64)

    shakespeare = corpus([str(CORPUS / f"shakespeare-0{i}.jsonl") for i in range(2)])
    pydocs = corpus([str(CORPUS / "pydocs-00.jsonl.zst")])
    return Dataset.mix([shakespeare, pydocs], WEIGHTS, seed=0, block_size=50)


def loaders(world: int, resume_from=None):
    from torchdata.stateful_dataloader import StatefulDataLoader

    out = []
    for rank in range(world):
        ds = mixed().shard_by_rank(rank, world, split="examples").batch(BATCH, tensors="torch")
        out.append(StatefulDataLoader(ds.to_torch(resume_from=resume_from), batch_size=None, num_workers=WORKERS))
    return out


def train(model, optimizer, loaders_, steps: int, seen: list, losses: list) -> None:
    """Each step: one batch from every rank, gradients averaged as data parallelism would."""
    iterators = [iter(loader) for loader in loaders_]
    for _ in range(steps):
        optimizer.zero_grad()
        total = 0.0
        for it in iterators:
            batch = next(it)
            seen.extend(zip(batch["source"].tolist(), batch["shard"].tolist(), batch["index"].tolist()))
            out = model(input_ids=batch["input_ids"].long(), labels=batch["input_ids"].long())
            (out.loss / len(iterators)).backward()
            total += float(out.loss.detach()) / len(iterators)
        optimizer.step()
        losses.append(total)


def new_model():
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, n_positions=64, vocab_size=50257)
    model = transformers.GPT2LMHeadModel(config)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


BEFORE = 30  # steps on 2 ranks before the checkpoint


@pytest.fixture(scope="module")
def checkpointed():
    """Train on 2 ranks x 2 workers, then save what each rank would: its loader's state and
    (rank 0) the model and optimizer."""
    model, optimizer = new_model()
    seen: list = []
    losses: list = []
    before = loaders(2)
    train(model, optimizer, before, BEFORE, seen, losses)
    checkpoint = json.loads(json.dumps([loader.state_dict() for loader in before]))
    return checkpoint, copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict()), seen, losses


@pytest.mark.parametrize("new_world", [1, 4])
def test_gpt2_trains_checkpoints_and_resumes_on_another_world_size(checkpointed, new_world):
    checkpoint, model_state, optimizer_state, seen, losses = copy.deepcopy(checkpointed)
    model, optimizer = new_model()
    model.load_state_dict(model_state)
    optimizer.load_state_dict(optimizer_state)
    states = reader_states(*checkpoint)
    assert len(states) == 2 * WORKERS
    after = loaders(new_world, resume_from=states)
    # an even count per rank (workers in step); (2 x 30 + 40) x 4 rows = 400 examples, 8 mix blocks
    train(model, optimizer, after, 40 // new_world, seen, losses)

    first, last_before, first_after = losses[0], sum(losses[BEFORE - 10 : BEFORE]) / 10, losses[BEFORE]
    assert last_before < 0.75 * first  # it learned
    assert first_after < last_before * 1.25 and first_after < 0.8 * first  # and continued, not restarted
    # the examples of both phases are exactly the first ones of the one global mixed stream
    reference = [(int(e["source"]), int(e["shard"]), int(e["index"])) for e in itertools.islice(mixed(), len(seen))]
    assert Counter(seen) == Counter(reference)
    share = Counter(source for source, _, _ in seen)
    for source, weight in enumerate(WEIGHTS):
        assert abs(share[source] / len(seen) - weight) < 0.01
