"""Writing a cache: a shard's Parquet file, the output directory and its lock, large inputs in
ranges packed in parallel and joined, build progress, caching as the data streams."""
