"""How a shard's examples are produced: the shard-backend protocol, decoded row spans, the
shard processing run in this process or in worker processes. Below both ``beamtok._src.stream``
and ``beamtok._src.cache``; imports neither."""
