"""The floor for Python: a relay of raw asyncio Protocols on uvloop that parses nothing.

    python bench/raw_relay.py --upstream http://127.0.0.1:PORT [--port 0]

Each client connection gets its own upstream connection; whatever one side sends is written to
the other from `data_received`, as it arrived. No HTTP parsing, no recording: what a Python proxy
cannot go below on this machine, so every benchmark run shows how close streamtap is to it.
"""

import argparse
import asyncio
from urllib.parse import urlsplit

import uvloop


class UpstreamSide(asyncio.Protocol):
    """The relay's connection to the upstream: what it receives goes to the client."""

    def __init__(self, client: "ClientSide"):
        self.client = client
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport):
        self.transport = transport
        self.client.upstream_ready(self)

    def data_received(self, data):
        self.client.transport.write(data)

    def connection_lost(self, exc):
        self.client.transport.close()


class ClientSide(asyncio.Protocol):
    """A client's connection: its bytes go upstream (held until the upstream connects)."""

    def __init__(self, upstream: tuple[str, int]):
        self.upstream_address = upstream
        self.transport: asyncio.Transport | None = None
        self.upstream: UpstreamSide | None = None
        self.pending: list[bytes] = []

    def connection_made(self, transport):
        self.transport = transport
        asyncio.get_running_loop().create_task(self.connect())

    async def connect(self) -> None:
        try:
            await asyncio.get_running_loop().create_connection(
                lambda: UpstreamSide(self), *self.upstream_address)
        except OSError:
            self.transport.close()

    def upstream_ready(self, upstream: UpstreamSide) -> None:
        self.upstream = upstream
        if self.pending:
            upstream.transport.write(b"".join(self.pending))
            self.pending.clear()

    def data_received(self, data):
        if self.upstream is None:
            self.pending.append(data)
        else:
            self.upstream.transport.write(data)

    def connection_lost(self, exc):
        if self.upstream is not None:
            self.upstream.transport.close()


async def main(args: argparse.Namespace) -> None:
    upstream = urlsplit(args.upstream)
    address = (upstream.hostname, upstream.port)
    server = await asyncio.get_running_loop().create_server(
        lambda: ClientSide(address), "127.0.0.1", args.port, backlog=4096)
    print(f"listening on http://127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
    await asyncio.Event().wait()  # until SIGTERM/SIGINT


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--port", type=int, default=0)
    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(main(parser.parse_args()))
    except KeyboardInterrupt:
        pass
