"""streamtap: a flight recorder for LLM streams.

The installed package holds two subpackages that live in the repository's top-level folders:
`streamtap.proxy` (everything that does I/O) and `streamtap.diagnostics` (the pure core).
"""

__version__ = "0.1.0"
