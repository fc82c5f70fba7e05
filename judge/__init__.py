"""Problems, correctness, timing, roofline and the built-in kernel families. Imports only kernelsearch.store."""
