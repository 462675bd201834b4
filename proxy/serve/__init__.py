"""Serving: the aiohttp application, the pass-through exchange and body relay, watchdogs, the control API and start-up."""
