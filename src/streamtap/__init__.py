"""streamtap: a flight recorder for LLM streams.

The installed package holds two subpackages that live in the repository's top-level folders:
`streamtap.proxy` (everything that does I/O) and `streamtap.diagnostics` (the pure core).
The public Python API (`Proxy`, `FakeProvider`) is imported on first use, so `import streamtap`
stays cheap (the pytest plugin relies on that).
"""

__version__ = "0.1.0"
__all__ = ["Proxy", "FakeProvider", "FaultHandle", "Record", "ScriptError"]

_LAZY = {"Proxy": "streamtap.proxy.testing.api", "FaultHandle": "streamtap.proxy.testing.api",
         "Record": "streamtap.proxy.testing.records",
         "FakeProvider": "streamtap.proxy.testing.fake",
         "ScriptError": "streamtap.diagnostics.samples.scripted"}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'streamtap' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
