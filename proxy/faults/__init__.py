"""Fault injection: rules and the book that holds them, the machinery that cuts, stalls or injects, endings, and the control-API client."""
