"""The shards layer: the shard processing (``ShardProcessor``: read, steps, pack, from a cursor)
and rows in column blocks."""
