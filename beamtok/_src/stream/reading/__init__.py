"""Reading shards in order: the root source of every stream (ShardSource), its shard order per epoch and per reader, reading examples by number, and what reached the consumer."""
