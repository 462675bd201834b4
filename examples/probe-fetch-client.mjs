// A chat completion streamed with Node's built-in fetch, read the way many hand-written clients
// read it: the body's SSE lines, each `data:` parsed as JSON, text and tool-call arguments
// joined, `[DONE]` awaited but not required. For `streamtap probe` (docs/clients.md):
//   streamtap probe -- node examples/probe-fetch-client.mjs
// It uses $OPENAI_BASE_URL (streamtap sets it) and gives up after 2 s without a byte.
const base = process.env.OPENAI_BASE_URL ?? "https://api.openai.com/v1";
const response = await fetch(`${base}/chat/completions`, {
  method: "POST",
  headers: {
    "content-type": "application/json",
    authorization: `Bearer ${process.env.OPENAI_API_KEY ?? ""}`,
  },
  body: JSON.stringify({
    model: "gpt-4o-mini", stream: true,
    messages: [{ role: "user", content: "What is the weather in Paris?" }],
    tools: [{ type: "function", function: { name: "get_weather", parameters: {
      type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }],
  }),
  signal: AbortSignal.timeout(2000),
});
if (!response.ok) throw new Error(`HTTP ${response.status}`);

let text = "", args = "", buffer = "";
const decoder = new TextDecoder();
for await (const chunk of response.body) {
  buffer += decoder.decode(chunk, { stream: true });
  const lines = buffer.split("\n");
  buffer = lines.pop();
  for (const line of lines) {
    if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
    const delta = JSON.parse(line.slice(6)).choices?.[0]?.delta ?? {};
    text += delta.content ?? "";
    for (const call of delta.tool_calls ?? []) args += call.function?.arguments ?? "";
  }
}
console.log(text, args);
