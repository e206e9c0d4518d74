"""The filesystem a cache on an object store is read and written through.

Input files are read through smart-open, which reaches S3 with boto3; caches are written and
read through pyarrow's filesystems. Left alone, the two would resolve credentials, region and
endpoint each their own way (the AWS C++ SDK does not read every setting boto3 does, such as
a profile's ``endpoint_url``), so one bucket could work for inputs and fail for caches. An
``s3://`` cache therefore takes what boto3 resolves — the standard chain: environment
(``AWS_ACCESS_KEY_ID``, ``AWS_PROFILE``, ``AWS_ENDPOINT_URL``, ...), ``~/.aws/config`` and
credentials files, instance or container roles — and hands it to pyarrow. Credentials are
taken when the cache is opened; temporary ones are refreshed by opening it again.

``gs://`` and other schemes use pyarrow's own resolution (Application Default Credentials
for Google Cloud Storage, as the Google client library used for inputs does).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

import pyarrow.fs as pafs

from beamtok._src.base.errors import ConfigError

__all__ = ["filesystem_for"]


def filesystem_for(url: str) -> tuple[Any, str]:
    """The pyarrow filesystem of ``url`` (``scheme://bucket/path``) and the path in it."""
    if url.startswith("s3://"):
        return s3_filesystem(), url[len("s3://") :]
    return pafs.FileSystem.from_uri(url)


def s3_filesystem() -> pafs.S3FileSystem:
    """pyarrow's S3 filesystem with the credentials, region and endpoint boto3 resolves."""
    try:
        import boto3
    except ImportError as e:
        raise ConfigError("s3:// caches need boto3 (pip install 'beamtok[remote]')") from e
    session = boto3.Session()
    client = session.client("s3")
    options: dict[str, Any] = {"region": client.meta.region_name or "us-east-1"}
    credentials = session.get_credentials()
    if credentials is None:
        options["anonymous"] = True
    else:
        frozen = credentials.get_frozen_credentials()
        options.update(access_key=frozen.access_key, secret_key=frozen.secret_key, session_token=frozen.token)
    endpoint = urlparse(client.meta.endpoint_url or "")
    if endpoint.hostname and not endpoint.hostname.endswith("amazonaws.com"):
        options["endpoint_override"] = endpoint.netloc
        options["scheme"] = endpoint.scheme or "https"
    return pafs.S3FileSystem(**options)
