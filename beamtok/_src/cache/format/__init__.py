"""What a cache is on disk: the Parquet schema of a shard, the manifest and its shard table,
the files of a cache directory (local or on an object store), Parquet footers."""
