"""``beamtok verify``: every file of a cache against its manifest, sampled shards re-run."""

from __future__ import annotations

import sys

import click

from beamtok._src.cli.app import log_options, main, user_errors

__all__ = ["verify"]


@main.command()
@click.argument("directory")
@click.option(
    "--shards",
    "sample",
    default=2,
    show_default=True,
    help="Shards to re-run and compare row by row (0: checksums only).",
)
@click.option("--seed", default=0, show_default=True, help="Which shards are sampled.")
@click.option("--fingerprint", help="Insist the cache was built with this spec fingerprint.")
@click.option(
    "--source-root",
    type=click.Path(file_okay=False),
    help="Where the inputs are now, if they moved since the build (stands for the build's directory).",
)
@log_options
@user_errors
def verify(
    directory: str, sample: int, seed: int, fingerprint: str | None, source_root: str | None, quiet: bool
) -> None:
    """Check a cache: every file against the manifest (present, size, checksum, rows), then
    re-run the shard processing on sampled shards and compare every row. Exit 0 when all agree."""
    from beamtok._src.cache.read.verify import verify_cache

    report = verify_cache(
        directory, sample=sample, seed=seed, fingerprint=fingerprint, progress=not quiet, source_root=source_root
    )
    click.echo(
        f"{directory}: {report.files_checked}/{report.shards} shard files checked, "
        f"{len(report.shards_compared)} shard(s) re-run and compared ({report.rows_compared} rows): {report.shards_compared}"
    )
    for problem in report.problems:
        click.echo(f"PROBLEM {problem}", err=True)
    if report.repairable:
        click.echo(report.REPAIR, err=True)
    if not report.ok:
        sys.exit(1)
    if report.shards_compared:
        click.echo(
            "OK: every shard file matches the manifest, and the re-run shards equal the on-the-fly stream row by row"
        )
    else:
        click.echo(
            "OK: every shard file matches the manifest (no shard was re-run; --shards N compares rows with the on-the-fly stream)"
        )
