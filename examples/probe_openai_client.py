"""A small agent turn with the openai Python SDK, for `streamtap probe` (see docs/clients.md,
"Probing your client"): it streams one chat completion, with a tool the model may call, and prints
the text and any tool call. The SDK reads OPENAI_BASE_URL and OPENAI_API_KEY; it times out after 2 s
of silence and retries as it does by default (twice).

    streamtap probe -- python examples/probe_openai_client.py
"""

import json

import openai

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]

client = openai.OpenAI(timeout=2.0)
stream = client.chat.completions.create(
    model="gpt-4o-mini", stream=True, tools=TOOLS,
    messages=[{"role": "user", "content": "What is the weather in Paris?"}])
text, calls = [], {}
for chunk in stream:
    if not chunk.choices:
        continue
    delta = chunk.choices[0].delta
    text.append(delta.content or "")
    for call in delta.tool_calls or []:
        entry = calls.setdefault(call.index, {"name": "", "arguments": ""})
        entry["name"] += call.function.name or ""
        entry["arguments"] += call.function.arguments or ""
print("".join(text))
for entry in calls.values():
    print(entry["name"], json.loads(entry["arguments"] or "{}"))
