"""How readers share a stream: each reader's part (ReaderSplit), splitting by examples, even ends, balanced batches across ranks, and resuming on another world size."""
