"""streamtap inside a client's own test suite: the Python API (Proxy, FakeProvider) and the
pytest plugin. Everything here is imported only when used, so `import streamtap` stays cheap."""
