"""streamtap's I/O side: the aiohttp proxy, trace writing, config and the command line."""
