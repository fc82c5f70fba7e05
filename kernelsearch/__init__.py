"""kernelsearch: LLM-driven tree search for fast GPU kernels of PyTorch operations."""
__version__ = "0.1.0"
