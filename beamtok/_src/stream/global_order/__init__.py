"""A global shuffle of a cache: a keyed permutation computed, never stored, the order of an epoch, the units of the spread shuffle, and the live source."""
