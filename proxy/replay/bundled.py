"""The starter corpus that ships inside the package: content-free samples for every dialect and
ending (made from our own fixtures, see samples/README.md in the repository)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def bundled_samples_dir() -> Path:
    """The folder holding the bundled `*.sample.json` files, installed or in a checkout."""
    return Path(str(resources.files("streamtap.corpus")))
