"""Kandev: a self-hosted control plane for AI coding agents."""

__version__ = "0.1.0"
