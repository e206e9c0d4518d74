"""Nothing executes from data: states and manifests are JSON, tokenizers never run
their own code unless asked, and nothing reaches a shell."""

from __future__ import annotations

import json
import re

import pytest

from beamtok import ConfigError, Dataset, StateError, load_tokenizer

from conftest import ROOT, TOKENIZER_DIR


def test_tokenizer_code_is_not_run_without_trust_remote_code(tmp_path):
    evil = tmp_path / "evil-tokenizer"
    evil.mkdir()
    marker = tmp_path / "code-ran"
    for name in ("vocab.json", "merges.txt"):
        (evil / name).write_bytes((TOKENIZER_DIR / name).read_bytes())
    (evil / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "EvilTokenizer", "auto_map": {"AutoTokenizer": ["evil.EvilTokenizer", None]}})
    )
    (evil / "evil.py").write_text(
        f"open({str(marker)!r}, 'w').write('ran')\nfrom transformers import GPT2TokenizerFast as EvilTokenizer\n"
    )
    with pytest.raises(ConfigError, match="cannot load tokenizer"):
        load_tokenizer(str(evil))
    assert not marker.exists()


class _Loud:
    def __deepcopy__(self, memo):  # would run if a state were copied object by object
        raise AssertionError("state object code ran")

    def __reduce__(self):
        raise AssertionError("state object code ran")


def test_a_state_holding_objects_is_refused_without_touching_them(tmp_path, tokenizer_dir):
    ds = Dataset.from_sequence(["one two three"] * 4).tokenize(tokenizer_dir).concat_chunk(4)
    it = ds.iter()
    next(it)
    state = it.state_dict()
    state["pipeline"]["payload"] = _Loud()
    with pytest.raises(StateError, match="only JSON values"):
        ds.iter(state)


def test_no_shell_no_eval_no_pickle_of_data_in_the_package():
    sources = {p: p.read_text() for d in ("beamtok", "pipelines") for p in (ROOT / d).rglob("*.py")}
    forbidden = re.compile(r"shell\s*=\s*True|os\.system\(|os\.popen\(|\beval\(|\bexec\(|yaml\.load\(|subprocess\.")
    # One process start is allowed: the worker server, a fixed argument list naming our own
    # module (no shell, nothing from data); every other use of subprocess stays forbidden.
    server = ROOT / "beamtok" / "_src" / "beam" / "worker_server.py"
    starts = re.findall(r"subprocess\.\w+", sources[server])
    assert set(starts) <= {"subprocess.Popen", "subprocess.PIPE", "subprocess.TimeoutExpired"}, starts
    assert '[sys.executable, "-m", "beamtok._src.beam.fork_server", str(fd)]' in sources[server]
    sources[server] = re.sub(r"subprocess\.(Popen|PIPE|TimeoutExpired)\b", "", sources[server])
    for path, text in sources.items():
        assert not forbidden.search(text), f"{path}: {forbidden.search(text).group(0)}"
    loads = {p.relative_to(ROOT).as_posix() for p, t in sources.items() if re.search(r"pickle\.loads?\(", t)}
    # Only the worker pool unpickles, and only what its own parent process pickled for it.
    assert loads <= {"beamtok/_src/production/worker_process.py"}, loads
