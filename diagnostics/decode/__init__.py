"""Framing: bytes in, frames out (SSE, NDJSON, a streamed JSON array, chunked transfer coding)."""
