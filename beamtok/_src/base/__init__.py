"""The base layer: errors, option checks, sizes and ceilings, read-ahead helpers, progress,
optional extras, the collector pause. Imports nothing else of beamtok."""
