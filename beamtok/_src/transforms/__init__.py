"""The shared core: pure functions and classes over token arrays, used by both modes."""

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
