"""A cache build's job request, made and checked without submitting it (Beam's ``--dry_run``).

For the DataflowRunner, Beam's dry run does everything up to the submission: it checks the
options, builds the worker's package from ``--setup_file`` (or takes ``--sdk_container_image``),
and translates the pipeline into the portable job graph the service would receive. Nothing is
staged, no cloud API is called and the output directory is not touched. :func:`plan_job`
returns what a user (or a test) needs to trust the request: its steps, the worker image, the
packages the workers install, the graph's size, and how the tokenizer reaches the workers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from beamtok._src.base.errors import ConfigError
from beamtok._src.core.spec import Spec
from beamtok._src.sources.urls import Shard, check_bucket_names

__all__ = ["JobPlan", "is_dry_run", "plan_job"]


def is_dry_run(beam_args: Sequence[str]) -> bool:
    """Whether the Beam options ask for a dry run (``--dry_run`` or ``--dry_run=True``)."""
    from apache_beam.options.pipeline_options import PipelineOptions, TestOptions

    value = PipelineOptions(list(beam_args)).view_as(TestOptions).dry_run
    return str(value).lower() not in ("false", "0", "", "none")


@dataclass
class JobPlan:
    """What a cache build would submit."""

    runner: str
    job_name: str | None
    steps: list[str]  # the build's transforms, in the order the job graph lists them
    container_image: str | None
    packages: list[str]  # files the workers install before running the DoFns
    tokenizer_bytes: int  # serialized tokenizers, read by the workers from the output's tokenizer.json
    graph_bytes: int  # the job graph's size (Dataflow refuses requests over 10 MB unless uploaded)
    job_file: str | None  # where the job graph was written as JSON, if asked

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def plan_job(
    spec: Spec,
    shards: Sequence[Shard],
    output: str,
    beam_args: Sequence[str],
    *,
    split_bytes: int | None,
    row_group_rows: int | None = None,
    row_group_bytes: int | None = None,
    parquet_compat: bool = False,
) -> JobPlan:
    """Run the cache build's pipeline as a dry run and describe the request it made."""
    from apache_beam.options.pipeline_options import DebugOptions, GoogleCloudOptions, PipelineOptions, StandardOptions
    from apache_beam.portability.api import beam_runner_api_pb2

    from beamtok._src.beam.build import BuildCache
    from beamtok._src.beam.pipelines import is_local, pipeline_for
    from beamtok._src.beam.run import cache_transform

    check_bucket_names([output, *beam_args, *(s.url for s in shards)])
    options = PipelineOptions(list(beam_args))
    cloud = options.view_as(GoogleCloudOptions)
    if options.view_as(StandardOptions).runner == "DataflowRunner" and not (
        cloud.temp_location or cloud.staging_location
    ):
        # without one, Beam looks for (or creates) a default bucket: network calls in a dry run
        raise ConfigError(
            "DataflowRunner needs --temp_location=gs://my-bucket/tmp (where Dataflow stages the job and its files)"
        )
    with pipeline_for(beam_args) as pipeline:
        if is_local(pipeline):
            raise ConfigError(
                "--dry_run builds a job for a remote runner: add --runner=DataflowRunner (or another runner)"
            )
        transform = cache_transform(
            spec,
            shards,
            output,
            row_group_rows=row_group_rows,
            row_group_bytes=row_group_bytes,
            parquet_compat=parquet_compat,
            split_bytes=split_bytes,
        )
        _ = pipeline | BuildCache.__name__ >> transform
        try:
            result = pipeline.run()
        except ImportError as e:
            raise ConfigError(
                f"the {pipeline.options.view_as(StandardOptions).runner} needs its extra: pip install 'beamtok[dataflow]' ({e})"
            ) from e
        except ValueError as e:  # Beam's checks of the options (a missing --project, --temp_location...)
            raise ConfigError(f"the job request is not valid: {e}") from e
    job = getattr(result, "job", None)
    proto = getattr(job, "proto_pipeline", None)
    if proto is None:
        raise ConfigError(
            f"{pipeline.options.view_as(StandardOptions).runner} does not support --dry_run (DataflowRunner does)"
        )
    transforms = proto.components.transforms
    (root,) = [t for t in transforms.values() if t.unique_name == BuildCache.__name__]
    steps = [transforms[child].unique_name.removeprefix(f"{BuildCache.__name__}/") for child in root.subtransforms]
    image, packages = None, []
    for environment in proto.components.environments.values():
        if environment.urn == "beam:env:docker:v1":
            image = beam_runner_api_pb2.DockerPayload.FromString(environment.payload).container_image
        for artifact in environment.dependencies:
            role = beam_runner_api_pb2.ArtifactStagingToRolePayload.FromString(artifact.role_payload)
            packages.append(role.staged_name)
    job_proto = getattr(job, "proto", None)
    job_name = job_proto.name if job_proto is not None else pipeline.options.view_as(GoogleCloudOptions).job_name
    job_file = pipeline.options.view_as(DebugOptions).dataflow_job_file
    if job_file:
        from google.protobuf import json_format

        request = {
            "name": job_name,
            "pipeline": json.loads(json_format.MessageToJson(proto)),
        }
        os.makedirs(os.path.dirname(os.path.abspath(job_file)), exist_ok=True)
        with open(job_file, "w", encoding="utf-8") as f:
            json.dump(request, f)
    return JobPlan(
        runner=str(pipeline.options.view_as(StandardOptions).runner),
        job_name=job_name,
        steps=steps,
        container_image=image,
        packages=sorted(set(packages)),
        tokenizer_bytes=sum(len(json.dumps(blob)) for blob in transform.tokenizers),
        graph_bytes=proto.ByteSize(),
        job_file=job_file,
    )
