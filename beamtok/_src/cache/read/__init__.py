"""Reading a cache: the same stream of examples with the same cursors, shard backends over
it, random access for the global shuffle, local row copies, and verification."""
