"""Stream stages a user adds after the root: batching (by rows or by a token budget), collating, shuffling in windows, take and enumerate."""
