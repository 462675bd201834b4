"""The control API under `/_streamtap/`: arm, list and remove fault rules. Behind the guard
(proxy/serve/guard.py: loopback, streamtap's own Host and Origin, JSON bodies); JSON in and out;
errors name the field at fault."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from streamtap.diagnostics.faults.rules import FaultBook, FaultError, rule_from_mapping
from streamtap.proxy.serve.guard import control_error as _error
from streamtap.proxy.serve.guard import guarded, read_json


def add_control_routes(app: web.Application, prefix: str,
                       book_of: Callable[[web.Request], FaultBook]) -> None:
    async def list_faults(request: web.Request) -> web.Response:
        return web.json_response({"faults": book_of(request).listing()})

    async def add_fault(request: web.Request) -> web.Response:
        data = await read_json(request)
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

    app.router.add_get(prefix + "faults", guarded(list_faults))
    app.router.add_post(prefix + "faults", guarded(add_fault))
    app.router.add_delete(prefix + "faults", guarded(clear_faults))
    app.router.add_delete(prefix + "faults/{name}", guarded(remove_fault))
