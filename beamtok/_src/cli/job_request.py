"""The dry run of a remote build: the job request built and described, not submitted."""

from __future__ import annotations

from typing import Any

import click

__all__ = ["show_job_request"]


def show_job_request(ds: Any, options: dict[str, Any], beam_args: list[str]) -> None:
    """Build the job request of a remote build without submitting it, and describe it."""
    from beamtok._src.beam.dry_run import plan_job
    from beamtok._src.cache.build.ranges import split_bytes_option

    plan = plan_job(
        ds.spec,
        ds.shards,
        options["output"],
        beam_args,
        split_bytes=split_bytes_option(options.get("split_bytes")),
        row_group_rows=options.get("row_group_rows"),
        row_group_bytes=options.get("row_group_bytes"),
        parquet_compat=options.get("parquet_compat", False),
    )
    click.echo(
        f"dry run: {plan.runner} job {plan.job_name} built and checked, not submitted; {options['output']} untouched"
    )
    click.echo(f"  {len(ds.shards)} input files, spec {ds.spec_fingerprint}")
    click.echo(f"  steps: {', '.join(step.removeprefix('BuildCache/') for step in plan.steps)}")
    click.echo(f"  worker image: {plan.container_image}")
    click.echo(f"  packages the workers install: {', '.join(plan.packages) or 'none'}")
    click.echo(
        f"  tokenizer: {plan.tokenizer_bytes / 1e6:.1f} MB serialized, written to {options['output']}/tokenizer.json when the job "
        "is submitted and read from there by the workers: they need no path of this machine"
    )
    click.echo(f"  job graph: {plan.graph_bytes / 1e6:.2f} MB (Dataflow takes requests up to 10 MB)")
    if plan.job_file:
        click.echo(f"  job graph written to {plan.job_file}")
