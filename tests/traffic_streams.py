"""Streams for issue 11 (classes 2 to 5), written from the providers' public documentation, never
captured. Every model word is a CANARY string, so a test can prove none reaches a record.

Sources:
- OpenAI Responses streaming events and retrieve (`GET /v1/responses/{id}?stream=true&
  starting_after=N`): platform.openai.com/docs/api-reference/responses-streaming and
  /docs/guides/background; tool items: /docs/guides/tools-web-search, -file-search,
  -code-interpreter, -tool-search.
- Anthropic Messages streaming with server tools: docs.anthropic.com/en/docs/build-with-claude/
  streaming ("Web search tool" example), /agents-and-tools/tool-use/web-search-tool and
  code-execution-tool.
- Gemini code execution: ai.google.dev/gemini-api/docs/code-execution (executableCode,
  codeExecutionResult parts); Vertex AI paths: cloud.google.com/vertex-ai/generative-ai/docs/
  reference/rest.
- Mistral reasoning (typed content chunks `thinking` / `text`): docs.mistral.ai/capabilities/
  reasoning.
- OpenRouter mid-stream errors (an error chunk with `finish_reason: "error"`, usage on the last
  chunk): openrouter.ai/docs/api-reference/streaming and /docs/use-cases/usage-accounting.
"""

from __future__ import annotations

import json


def sse(obj: object, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    data = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))
    return f"{head}data: {data}\n\n".encode()


def crlf_sse(obj: object) -> bytes:
    return f"data: {json.dumps(obj)}\r\n\r\n".encode()


# -- OpenAI Responses: resume a background response ---------------------------------------------
def responses_event(kind: str, seq: int, **fields) -> bytes:
    return sse({"type": kind, "sequence_number": seq, **fields}, kind)


def responses_resumed(after: int = 4) -> bytes:
    """What `GET /v1/responses/resp_bg1?stream=true&starting_after=4` replays: the events after
    sequence number 4 of a background response, through `response.completed`."""
    seq = after
    out = b""
    for piece in ("CANARY-TEXT-a", "CANARY-TEXT-b"):
        seq += 1
        out += responses_event("response.output_text.delta", seq, item_id="msg_1",
                               output_index=0, content_index=0, delta=piece)
    seq += 1
    out += responses_event("response.output_text.done", seq, item_id="msg_1", output_index=0,
                           content_index=0, text="CANARY-TEXT-ab")
    seq += 1
    out += responses_event("response.completed", seq, response={
        "id": "resp_bg1", "object": "response", "status": "completed", "background": True,
        "usage": {"input_tokens": 9, "output_tokens": 4, "total_tokens": 13}})
    return out


def responses_server_tools(cut_while: str | None = None) -> bytes:
    """A web search, a file search, a code interpreter run and a tool search, each an output item
    the provider runs, then the answer. `cut_while="web_search"` ends the stream while the web
    search is still searching."""
    seq = 0

    def nxt() -> int:
        nonlocal seq
        seq += 1
        return seq

    out = responses_event("response.created", nxt(), response={"id": "resp_tools1",
                                                               "status": "in_progress"})
    out += responses_event("response.output_item.added", nxt(), output_index=0, item={
        "type": "web_search_call", "id": "ws_1", "status": "in_progress"})
    out += responses_event("response.web_search_call.in_progress", nxt(), output_index=0,
                           item_id="ws_1")
    out += responses_event("response.web_search_call.searching", nxt(), output_index=0,
                           item_id="ws_1")
    if cut_while == "web_search":
        return out
    out += responses_event("response.web_search_call.completed", nxt(), output_index=0,
                           item_id="ws_1")
    out += responses_event("response.output_item.done", nxt(), output_index=0, item={
        "type": "web_search_call", "id": "ws_1", "status": "completed",
        "action": {"type": "search", "query": "CANARY-QUERY"}})
    out += responses_event("response.output_item.added", nxt(), output_index=1, item={
        "type": "file_search_call", "id": "fs_1", "status": "in_progress", "queries": []})
    out += responses_event("response.file_search_call.searching", nxt(), output_index=1,
                           item_id="fs_1")
    out += responses_event("response.file_search_call.completed", nxt(), output_index=1,
                           item_id="fs_1")
    out += responses_event("response.output_item.done", nxt(), output_index=1, item={
        "type": "file_search_call", "id": "fs_1", "status": "completed",
        "queries": ["CANARY-QUERY"]})
    out += responses_event("response.output_item.added", nxt(), output_index=2, item={
        "type": "code_interpreter_call", "id": "ci_1", "status": "in_progress", "code": ""})
    out += responses_event("response.code_interpreter_call_code.delta", nxt(), output_index=2,
                           item_id="ci_1", delta="CANARY-CODE")
    out += responses_event("response.code_interpreter_call.interpreting", nxt(),
                           output_index=2, item_id="ci_1")
    out += responses_event("response.code_interpreter_call.completed", nxt(), output_index=2,
                           item_id="ci_1")
    out += responses_event("response.output_item.done", nxt(), output_index=2, item={
        "type": "code_interpreter_call", "id": "ci_1", "status": "completed",
        "code": "CANARY-CODE", "outputs": []})
    # tool search: the whole item arrives in its `done` event
    out += responses_event("response.output_item.done", nxt(), output_index=3, item={
        "type": "tool_search_call", "id": "ts_1", "status": "completed"})
    out += responses_event("response.output_item.added", nxt(), output_index=4, item={
        "type": "message", "id": "msg_2", "status": "in_progress", "role": "assistant",
        "content": []})
    out += responses_event("response.output_text.delta", nxt(), item_id="msg_2",
                           output_index=4, content_index=0, delta="CANARY-TEXT")
    out += responses_event("response.output_text.done", nxt(), item_id="msg_2", output_index=4,
                           content_index=0, text="CANARY-TEXT")
    out += responses_event("response.completed", nxt(), response={
        "id": "resp_tools1", "status": "completed",
        "usage": {"input_tokens": 20, "output_tokens": 8, "total_tokens": 28}})
    return out


# -- Anthropic Messages with server tools -------------------------------------------------------
def anthropic(kind: str, **fields) -> bytes:
    return sse({"type": kind, **fields}, kind)


def anthropic_web_search(cut: str | None = None, tool: str = "web_search",
                         result: str = "web_search_tool_result") -> bytes:
    """A web search (or code execution) the provider runs: the model writes the query, the
    provider runs it and streams the result block, then the model answers. `cut="running"` ends
    the stream after the query block stopped, before the result."""
    out = anthropic("message_start", message={
        "id": "msg_srv1", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [], "usage": {"input_tokens": 30, "output_tokens": 1}})
    out += anthropic("content_block_start", index=0, content_block={
        "type": "server_tool_use", "id": "srvtoolu_01", "name": tool, "input": {}})
    for piece in ('{"query": "', "CANARY-QUERY", '"}'):
        out += anthropic("content_block_delta", index=0,
                         delta={"type": "input_json_delta", "partial_json": piece})
    out += anthropic("content_block_stop", index=0)
    if cut == "running":
        return out
    out += anthropic("content_block_start", index=1, content_block={
        "type": result, "tool_use_id": "srvtoolu_01",
        "content": [{"type": "web_search_result", "title": "CANARY-TITLE",
                     "url": "https://example.com/CANARY", "encrypted_content": "CANARYENC"}]})
    out += anthropic("content_block_stop", index=1)
    if cut == "after_result":
        return out
    out += anthropic("content_block_start", index=2, content_block={"type": "text", "text": ""})
    out += anthropic("content_block_delta", index=2,
                     delta={"type": "text_delta", "text": "CANARY-TEXT"})
    out += anthropic("content_block_stop", index=2)
    out += anthropic("message_delta", delta={"stop_reason": "end_turn", "stop_sequence": None},
                     usage={"output_tokens": 40, "server_tool_use": {"web_search_requests": 1}})
    out += anthropic("message_stop")
    return out


# -- Gemini code execution ------------------------------------------------------------------------
def gemini_chunk(parts: list | None = None, finish: str | None = None, **extra) -> bytes:
    candidate: dict = {"content": {"role": "model", "parts": parts or []}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return crlf_sse({"candidates": [candidate], "usageMetadata": {
        "promptTokenCount": 11, "candidatesTokenCount": 7, "totalTokenCount": 18},
        "modelVersion": "gemini-x", "responseId": "gem-resp-1", **extra})


def gemini_code_execution(cut: str | None = None) -> bytes:
    out = gemini_chunk([{"text": "CANARY-TEXT-before"}])
    out += gemini_chunk([{"executableCode": {"language": "PYTHON", "code": "CANARY-CODE"}}])
    if cut == "running":
        return out
    out += gemini_chunk([{"codeExecutionResult": {"outcome": "OUTCOME_OK",
                                                  "output": "CANARY-OUTPUT"}}])
    out += gemini_chunk([{"text": "CANARY-TEXT-after"}], finish="STOP")
    return out


# -- Mistral typed content lists ------------------------------------------------------------------
def mistral_chunk(content: object = None, finish: str | None = None,
                  usage: dict | None = None) -> bytes:
    delta: dict = {} if content is None else {"content": content}
    body: dict = {"id": "cmpl-mistral1", "object": "chat.completion.chunk", "model": "magistral",
                  "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage:
        body["usage"] = usage
    return sse(body)


def thinking(text: str) -> list:
    return [{"type": "thinking", "thinking": [{"type": "text", "text": text}]}]


def mistral_reasoning(cut_while_thinking: bool = False) -> bytes:
    out = mistral_chunk("")
    out += mistral_chunk([{"type": "thinking", "thinking": []}])  # opens empty: not progress
    for piece in ("CANARY-THINK-a", "CANARY-THINK-b", "CANARY-THINK-c"):
        out += mistral_chunk(thinking(piece))
    if cut_while_thinking:
        return out
    out += mistral_chunk([{"type": "text", "text": "CANARY-TEXT-a"}])
    out += mistral_chunk([{"type": "text", "text": "CANARY-TEXT-b"},
                          {"type": "reference", "reference_ids": [1]}])
    out += mistral_chunk(finish="stop", usage={"prompt_tokens": 10, "completion_tokens": 25,
                                              "total_tokens": 35})
    out += sse("[DONE]")
    return out


# -- OpenRouter: an error chunk that also carries the final usage ---------------------------------
def openrouter_error_with_usage() -> bytes:
    chunk = {"id": "gen-or1", "object": "chat.completion.chunk", "model": "x/y",
             "provider": "Upstream"}
    out = b": OPENROUTER PROCESSING\n\n"
    out += sse({**chunk, "choices": [{"index": 0, "delta": {"role": "assistant",
                                                            "content": "CANARY-TEXT"},
                                      "finish_reason": None}]})
    out += sse({**chunk, "error": {"code": 502, "message": "Upstream provider error"},
                "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error",
                             "native_finish_reason": "error"}],
                "usage": {"prompt_tokens": 14, "completion_tokens": 3, "total_tokens": 17}})
    return out
