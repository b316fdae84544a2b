"""amplint: static analyzer and autofixer for PyTorch automatic mixed precision (AMP)."""

__version__ = "0.1.0"
