"""The judge: the trusted part of an evaluation (problems, the judge process, runners, wire, clock, isolation, static
scan, correctness, numerics, memory plan, typed result). Imports only itself and kernelsearch.store (docs/design.md)."""
