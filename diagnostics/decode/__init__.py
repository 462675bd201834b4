"""Framing: bytes in, frames out (SSE, NDJSON, a streamed JSON array), and the scanner that finds the frame a fault trigger names."""
