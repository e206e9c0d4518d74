"""Where a tokenizer name points, checked before transformers is asked to load it.

A path that does not exist gets a clear answer (with the nearest existing directory), not
the hub client's complaint about repository ids; a hub name that is not cached fails at once
when the hub cannot be reached, instead of after a minute of retries.
"""

from __future__ import annotations

import difflib
import os
import socket
from typing import Any
from urllib.parse import urlsplit

from beamtok._src.base.errors import ConfigError

__all__ = [
    "TOKENIZER_FILES",
    "check_hub_reachable",
    "from_local_files",
    "is_path_like",
    "missing_directory_error",
    "tokenizer_files_of",
]

PROBE_SECONDS = 3.0


def is_path_like(name: str) -> bool:
    """A name meant as a local path: explicit (./, ../, /, ~) or deeper than owner/name."""
    return name.startswith((".", "/", "~")) or name.count("/") > 1 or (os.sep != "/" and os.sep in name)


def missing_directory_error(name: str) -> ConfigError:
    """The error for a tokenizer directory that does not exist, naming the closest sibling."""
    path = os.path.expanduser(name)
    parent = os.path.dirname(os.path.normpath(path)) or "."
    hint = ""
    if os.path.isdir(parent):
        siblings = [e for e in os.listdir(parent) if os.path.isdir(os.path.join(parent, e))]
        close = difflib.get_close_matches(os.path.basename(os.path.normpath(path)), siblings, n=1)
        if close:
            hint = f"; did you mean {os.path.join(parent, close[0])!r}?"
    elif parent not in (".", ""):
        hint = f" ({parent!r} does not exist either)"
    return ConfigError(f"tokenizer directory {name!r} does not exist{hint}")


def _local_lookalike(name: str) -> str:
    """For an ``owner/name`` whose owner is a local directory: the nearest directory in it, said
    first (a typo in a local path reads as a hub name)."""
    owner = name.split("/", 1)[0]
    if "/" not in name or not os.path.isdir(owner):
        return ""
    siblings = [e for e in os.listdir(owner) if os.path.isdir(os.path.join(owner, e))]
    close = difflib.get_close_matches(name.split("/", 1)[1], siblings, n=1)
    found = f"; did you mean {os.path.join(owner, close[0])!r}?" if close else f"; it holds {sorted(siblings)[:5]}"
    return f"a local directory {owner!r} exists but holds no {name.split('/', 1)[1]!r}{found} If a hub name was meant: "


def check_hub_reachable(name: str) -> None:
    """Raise at once if ``name`` would need the Hugging Face Hub and the hub cannot be reached."""
    hint = (
        "download the tokenizer where there is network (AutoTokenizer.from_pretrained(...).save_pretrained(DIR)) "
        "and pass DIR, or fill the Hugging Face cache and set HF_HUB_OFFLINE=1"
    )
    hint = _local_lookalike(name) + hint
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        raise ConfigError(
            f"tokenizer {name!r} is not a local directory nor in the Hugging Face cache, and HF_HUB_OFFLINE is set; {hint}"
        )
    if any(
        os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
    ):
        return  # the hub is reached through a proxy: a direct probe would say nothing; let the client try
    endpoint = urlsplit(constants.ENDPOINT)
    host = endpoint.hostname or "huggingface.co"
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=PROBE_SECONDS):
            return
    except OSError as e:
        reason = e.strerror or type(e).__name__
    raise ConfigError(
        f"tokenizer {name!r} is not a local directory nor in the Hugging Face cache, and the hub "
        f"({host}:{port}) cannot be reached: {reason}; {hint}"
    )


def tokenizer_files_of(name: str) -> str | None:
    """The directory whose files make the tokenizer ``name`` names: a local directory, or the
    Hugging Face cache's snapshot of a hub name (None when it is not cached)."""
    path = os.path.expanduser(name)
    if os.path.isdir(path):
        return path
    if is_path_like(name) or os.path.exists(path):
        return None
    try:
        from huggingface_hub import snapshot_download

        return str(snapshot_download(name, local_files_only=True))
    except Exception:  # not cached, or not a repository id: transformers speaks for it below
        return None


# the files one of which a saved fast tokenizer's directory holds
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model", "vocab.txt")


def from_local_files(name: str, trust_remote_code: bool) -> Any:
    """The tokenizer from a local directory or the hub cache, or None when it needs the hub
    (checked reachable first); a path that does not exist is refused."""
    path = os.path.expanduser(name)
    if os.path.isfile(path):
        raise ConfigError(
            f"tokenizer {name!r} is a file: pass the directory that holds it ({os.path.dirname(os.path.abspath(path))!r})"
        )
    if os.path.isdir(path):
        if not any(os.path.isfile(os.path.join(path, f)) for f in TOKENIZER_FILES):
            raise ConfigError(
                f"tokenizer directory {name!r} holds none of {', '.join(TOKENIZER_FILES)}: not a saved tokenizer"
            )
        return None  # transformers loads a directory itself, with its own errors for bad files
    if is_path_like(name):
        raise missing_directory_error(name)
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(name, trust_remote_code=trust_remote_code, local_files_only=True)
    except (OSError, ValueError):
        check_hub_reachable(name)
        return None
