"""The shards layer: the per-shard step (``ShardProcessor``: read, steps, pack, from a cursor)
and rows in column blocks."""
