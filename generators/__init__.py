"""The offline provider's generators: matchers over a traced reference and the Triton kernels they write."""
