"""Build a beamtok Parquet cache with Apache Beam: a runnable pipeline program.

    python pipelines/build_cache.py 'gs://BUCKET/corpus/train-{00000..01023}.jsonl.zst' \\
        --output gs://BUCKET/caches/gpt2-2048 --tokenizer gpt2 --seq-len 2048 \\
        --runner=DataflowRunner --project=PROJECT --region=us-central1 \\
        --temp_location=gs://BUCKET/tmp --setup_file=./setup.py

It takes exactly the options of ``beamtok cache`` (run it with ``--help``): beamtok's own
options build the shard processing, and every other ``--name=value`` goes to Beam as a pipeline
option, so this file works as the main program of a Dataflow, Flink or Spark job. The
pipeline is ``beamtok.beam.BuildCache``; this program only checks the output directory
around it. It is not installed with beamtok: workers get ``beamtok`` itself, through
``--setup_file`` or the worker image built from the Dockerfile.
"""

from __future__ import annotations

import sys

from beamtok._src.cli import main  # the `beamtok` command


def run(argv: list[str]) -> None:
    """Run ``beamtok cache`` with these arguments; exit with its status."""
    main(["cache", *argv], prog_name="build_cache.py")


if __name__ == "__main__":
    run(sys.argv[1:])
