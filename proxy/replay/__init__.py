"""Replay: sample files on disk, and the fake provider that serves them."""
