"""Serving: the aiohttp application, the pass-through exchange and body relay, connection endings, watchdogs, the control API and start-up."""
