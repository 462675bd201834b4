"""streamtap's I/O side: the aiohttp proxy, trace writing, config and the command line."""

__version__ = "0.1.0"
