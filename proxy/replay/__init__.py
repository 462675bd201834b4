"""Replay: sample files on disk, the fake provider that serves them, and the demo that replays them through a proxy."""
