"""Reading: URL expansion (``urls``), format readers (``readers``), documents and their
cursors (``documents``), remote reads (``retrying``), Hugging Face and MDS datasets."""
