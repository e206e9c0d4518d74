"""What a document becomes, the same on the fly and in a Beam build: the tokenizer (loaded,
registered, encoded through the engine ``engines/`` chose), BOS/EOS, the packers and their
modes, SFT and chat rendering with their loss masks. ``core/`` holds the Spec that names
these steps; this package does them."""

from beamtok._src.transforms.bos_eos import ensure_bos_eos
from beamtok._src.transforms.pack import PadTruncate, Row, SlidingWindow, WholeDocument
from beamtok._src.transforms.packing_modes import make_packer
from beamtok._src.transforms.tokenize import Tokenizer
from beamtok._src.transforms.tokenizer_registry import load_tokenizer, resolve_tokenizer

__all__ = [
    "PadTruncate",
    "Row",
    "SlidingWindow",
    "Tokenizer",
    "WholeDocument",
    "ensure_bos_eos",
    "load_tokenizer",
    "make_packer",
    "resolve_tokenizer",
]
