"""The control API under `/_streamtap/`: arm, list and remove fault rules. Loopback only, JSON
in and out; errors name the field at fault."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable

from aiohttp import web

from streamtap.proxy.faults.rules import FaultBook, FaultError, rule_from_mapping


def _error(status: int, message: str, field: str | None = None) -> web.Response:
    error = {"type": "streamtap_control_error", "message": message}
    if field is not None:
        error["field"] = field
    return web.json_response({"error": error}, status=status)


def _from_loopback(request: web.Request) -> bool:
    try:
        return ipaddress.ip_address(request.remote or "").is_loopback
    except ValueError:
        return False


def add_control_routes(app: web.Application, prefix: str,
                       book_of: Callable[[web.Request], FaultBook]) -> None:
    def loopback_only(handler):
        """The control API changes what the proxy does to traffic: loopback clients only."""
        async def guarded(request: web.Request) -> web.StreamResponse:
            if not _from_loopback(request):
                return _error(403, "the control API answers loopback clients only")
            return await handler(request)
        return guarded

    async def list_faults(request: web.Request) -> web.Response:
        return web.json_response({"faults": book_of(request).listing()})

    async def add_fault(request: web.Request) -> web.Response:
        try:
            data = json.loads(await request.read() or b"null")
        except ValueError as exc:
            return _error(400, f"the body is not JSON: {exc}")
        items = data if isinstance(data, list) else [data]
        book = book_of(request)
        try:
            rules = [rule_from_mapping(item, "api") for item in items]
        except FaultError as exc:
            return _error(400, str(exc), exc.field)
        replace = request.query.get("replace", "").lower() in ("1", "true", "yes")
        added: list[str] = []
        try:
            for rule in rules:
                added.append(book.add(rule, replace=replace).name)
        except FaultError as exc:
            for name in added:  # all or nothing: a refused batch arms none of its rules
                book.remove(name)
            return _error(409 if exc.field == "name" else 400, str(exc), exc.field)
        return web.json_response({"faults": [rule.as_dict() | rule.counters() for rule in rules]},
                                 status=201)

    async def remove_fault(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if not book_of(request).remove(name):
            return _error(404, f"no fault rule named `{name}`", "name")
        return web.json_response({"removed": [name]})

    async def clear_faults(request: web.Request) -> web.Response:
        return web.json_response({"removed": book_of(request).clear()})

    app.router.add_get(prefix + "faults", loopback_only(list_faults))
    app.router.add_post(prefix + "faults", loopback_only(add_fault))
    app.router.add_delete(prefix + "faults", loopback_only(clear_faults))
    app.router.add_delete(prefix + "faults/{name}", loopback_only(remove_fault))
