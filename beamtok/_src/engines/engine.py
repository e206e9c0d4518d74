"""What every exact engine answers: a name, and token ids of texts as ``tokenizers`` gives
them. ``EngineChoice.encoder`` is typed by it; mypy checks that every engine satisfies it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

__all__ = ["Engine"]


class Engine(Protocol):
    """An exact encoder of one tokenizer file."""

    @property
    def engine_name(self) -> str:
        """Its name as ``Tokenizer.engine`` reports it (``kitoken``, ``beamtok cached words``...)."""
        ...

    def encode_batch(self, texts: Sequence[str], add_special_tokens: bool = True) -> list[np.ndarray]:
        """Token ids (int32) of each text, as ``tokenizers`` gives them.

        Args:
            texts: The texts.
            add_special_tokens: Add the file's post-processor tokens (BOS/EOS), as
                ``tokenizers`` does.
        """
        ...
