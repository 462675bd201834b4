"""Views of a trace record: pure renderings (text, HTML, HAR, spans) for the proxy to write or serve."""
