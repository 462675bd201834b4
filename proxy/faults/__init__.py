"""Fault injection on a live response: the machinery that cuts, stalls or injects, and the control-API client. The rules it carries out are in diagnostics/faults."""
