// A chat completion streamed with the official `openai` npm package, for `streamtap probe`
// (docs/clients.md). Run it from a folder where `npm install openai` was done:
//   streamtap probe -- node probe-openai-npm.mjs
// The SDK reads OPENAI_BASE_URL and OPENAI_API_KEY (streamtap sets both); it times out after
// 2 s and retries as it does by default (twice).
import OpenAI from "openai";

const client = new OpenAI({ timeout: 2000 });
const stream = await client.chat.completions.create({
  model: "gpt-4o-mini", stream: true,
  messages: [{ role: "user", content: "What is the weather in Paris?" }],
});
let text = "";
for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
console.log(text);
