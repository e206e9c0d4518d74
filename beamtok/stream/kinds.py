"""Every stage and root module of the stream, imported so ``Stage.named`` and
``root_plan_of_kind`` know them all (a state names its stages and root by kind)."""

from beamtok.stream import balance, batch, enumerate, shuffle, take, token_batch
from beamtok.stream.roots import global_shuffle, mix, shards

__all__ = ["balance", "batch", "enumerate", "global_shuffle", "mix", "shards", "shuffle", "take", "token_batch"]
