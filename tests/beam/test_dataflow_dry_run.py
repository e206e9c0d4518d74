"""The Dataflow command of the docs (docs/dataflow.md), proven before anyone pays for it: the job request is built
offline (Beam's --dry_run), its graph holds the build's steps, the workers get beamtok from
--setup_file (or the Dockerfile's image), and the tokenizer reaches them through the output
directory, never a path of the launching machine, keeping the graph small."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from beamtok import ConfigError, Dataset, load_tokenizer
from beamtok._src.cache.format.manifest import TOKENIZER_FILE
from beamtok._src.cache.format.storage import Storage
from beamtok._src.sources.urls import check_bucket_names

from conftest import CORPUS, ROOT

pytest.importorskip("apache_beam")
pytest.importorskip(
    "apache_beam.runners.dataflow.internal.apiclient", reason="the dataflow extra (apache-beam[gcp]) is not installed"
)
TOKENIZER = ROOT / "data" / "tokenizers" / "gpt2"
STEPS = {
    "Plan",
    "WriteShards",
    "TokenizeRanges",
    "PlanPacking",
    "PackRows",
    "JoinParts",
    "WriteManifest",
}  # concat_chunk rows pack in parallel
DATAFLOW = [
    "--runner=DataflowRunner",
    "--project=my-project",
    "--region=us-central1",
    "--temp_location=gs://my-bucket/tmp",
]


def dataflow_command(tokenizer: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "beamtok._src.cli", "cache", "gs://my-bucket/corpus/train-{00..03}.jsonl.zst",
        "--output", "gs://my-bucket/caches/gpt2-1024", "--tokenizer", str(tokenizer), "--seq-len", "1024",
        *DATAFLOW, "--dry_run=True", *extra,
    ]  # fmt: skip


@pytest.fixture
def own_tokenizer(tmp_path) -> Path:
    """A copy of the tokenizer at a path only this machine has."""
    return Path(shutil.copytree(TOKENIZER, tmp_path / "launcher-only" / "gpt2"))


def test_setup_file_job_is_built_offline(own_tokenizer, tmp_path):
    job_file = tmp_path / "job.json"
    proc = subprocess.run(
        dataflow_command(own_tokenizer, "--setup_file=./setup.py", f"--dataflow_job_file={job_file}", "--job_name=beamtok-dry-run"),
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "dry run: DataflowRunner job beamtok-dry-run built and checked, not submitted" in out
    assert "4 input files" in out
    steps = set(re.search(r"steps: (.*)", out).group(1).split(", "))
    assert STEPS <= steps
    image = re.search(r"worker image: (\S+)", out).group(1)
    assert re.fullmatch(r".*beam_python3\.\d+_sdk:2\.77\.0", image), image  # the launcher's Beam and Python
    assert f"python3.{sys.version_info.minor}_sdk" in image
    assert "workflow.tar.gz" in re.search(r"packages the workers install: (.*)", out).group(1)  # --setup_file's sdist
    assert float(re.search(r"job graph: ([\d.]+) MB", out).group(1)) < 0.2
    request = json.loads(job_file.read_text())
    names = {t["uniqueName"] for t in request["pipeline"]["components"]["transforms"].values()}
    assert {f"BuildCache/{s}" for s in STEPS} <= names


def test_container_image_job(own_tokenizer):
    image = "us-central1-docker.pkg.dev/my-project/repo/beamtok-worker:0.1.0"
    proc = subprocess.run(
        dataflow_command(own_tokenizer, f"--sdk_container_image={image}"),
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"worker image: {image}" in proc.stdout


def test_missing_options_are_one_line(own_tokenizer):
    command = [a for a in dataflow_command(own_tokenizer) if not a.startswith("--temp_location")]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "temp_location" in proc.stderr


def test_workers_need_no_path_of_the_launcher(own_tokenizer, tmp_path):
    """Take the tokenizing DoFn out of the dry-run job graph, delete the launcher's tokenizer,
    and run the DoFn in a fresh interpreter elsewhere: it writes the shard a local build writes."""
    from apache_beam.portability.api import beam_runner_api_pb2

    from beamtok._src.beam.dry_run import plan_job

    inputs = [str(CORPUS / "shakespeare-00.jsonl")]
    ds = Dataset.from_files(inputs).tokenize(str(own_tokenizer)).ensure_bos_eos().concat_chunk(1024)
    job_file = tmp_path / "job.json"
    plan = plan_job(
        ds.spec,
        ds.shards,
        str(tmp_path / "remote-cache"),
        [*DATAFLOW, "--dry_run=True", f"--dataflow_job_file={job_file}"],
        split_bytes=None,
    )
    assert plan.tokenizer_bytes > 2_000_000 and plan.graph_bytes < 200_000  # the tokenizer is not in the graph
    assert not (tmp_path / "remote-cache").exists()  # a dry run touches no output
    transforms = json.loads(job_file.read_text())["pipeline"]["components"]["transforms"]
    (write,) = [t for t in transforms.values() if t["uniqueName"] == "BuildCache/WriteShards"]
    payload = beam_runner_api_pb2.ParDoPayload.FromString(base64.b64decode(write["spec"]["payload"]))
    dofn_file = tmp_path / "dofn.bin"
    dofn_file.write_bytes(payload.do_fn.payload)
    # what the launcher does when it submits the job: the tokenizer goes to the output directory
    Storage(str(tmp_path / "remote-cache")).write_bytes(
        TOKENIZER_FILE, json.dumps(load_tokenizer(str(own_tokenizer)).serialize()).encode()
    )
    shutil.rmtree(own_tokenizer.parent)  # gone: the worker cannot load it by name
    worker = tmp_path / "worker"
    worker.mkdir()
    code = (
        "import sys; from apache_beam.internal import pickler\n"
        "fn = pickler.loads(open(sys.argv[1], 'rb').read())\n"
        "fn = fn[0] if isinstance(fn, tuple) else fn\n"  # Beam pickles (DoFn, args, kwargs, side inputs, windowing)
        "fn.setup(); print(list(fn.process(0))[0]['rows'])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(dofn_file)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=worker,
        env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    local = (
        Dataset.from_files(inputs)
        .tokenize(str(TOKENIZER))
        .ensure_bos_eos()
        .concat_chunk(1024)
        .cache(str(tmp_path / "local"), progress=False)
    )
    assert int(proc.stdout.split()[-1]) == len(list(local))
    ours = (tmp_path / "remote-cache" / "shards" / "shard-00000.parquet").read_bytes()
    assert ours == (tmp_path / "local" / "shards" / "shard-00000.parquet").read_bytes()


def test_placeholder_bucket_names_are_refused_before_beam_sees_them(tmp_path):
    """Upper-case placeholders (gs://BUCKET) are not bucket names: Beam would look for, or try to
    create, such a bucket over the network. They are refused at once, naming the URL."""
    proc = subprocess.run(
        [
            sys.executable, "-m", "beamtok._src.cli", "cache", "gs://my-bucket/corpus/train-00.jsonl.zst",
            "--output", "gs://my-bucket/caches/c", "--tokenizer", str(TOKENIZER), "--seq-len", "64",
            "--runner=DataflowRunner", "--project=p", "--region=us-central1", "--temp_location=gs://BUCKET/tmp", "--dry_run=True",
        ],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "gs://BUCKET/tmp: 'BUCKET' is not a valid gs:// bucket name" in proc.stderr
    for good in ("gs://my-bucket/x", "gs://my_bucket.v2/x", "s3://my-bucket/x"):
        check_bucket_names([good])
    for bad in ("s3://my_bucket/x", "gs://-bucket/x", "gs://ab/x", "s3://Bucket/x"):
        with pytest.raises(ConfigError, match="is not a valid"):
            check_bucket_names([f"--temp_location={bad}"])
