"""Built-in kernel families: one folder each (reference, spec, starter and search space, wrong/ fixtures)."""
