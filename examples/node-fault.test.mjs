// streamtap from a Node test runner, no Python in the client's repository: start a fake provider
// (`streamtap replay`) and the proxy (`streamtap serve`) on free ports with `--port 0
// --ready-json`, break a stream mid tool call with the `x-streamtap-fault` header, and check
// what Node's fetch saw and what streamtap recorded.
// Run: node --test examples/node-fault.test.mjs   (streamtap on the PATH, or STREAMTAP=/path)
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

const STREAMTAP = process.env.STREAMTAP ?? "streamtap";
const children = [];
after(() => children.forEach((child) => child.kill("SIGTERM")));

// `streamtap ARGS --port 0 --ready-json` prints one JSON line, {"url": ..., "port": ...}, once
// it listens (its banner goes to stderr).
function start(...args) {
  const child = spawn(STREAMTAP, [...args, "--port", "0", "--ready-json"],
                      { stdio: ["ignore", "pipe", "inherit"] });
  children.push(child);
  return new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", (code) => reject(new Error(`streamtap ${args[0]} exited (${code})`)));
    createInterface({ input: child.stdout }).once("line", (line) => resolve(JSON.parse(line)));
  });
}

// A record is written by a background thread just after the stream ends: wait for it.
async function firstRecord(folder) {
  for (let attempt = 0; attempt < 200; attempt++) {
    const files = existsSync(folder) ? readdirSync(folder).filter(
      (name) => name.endsWith(".json") && !name.startsWith(".")) : [];
    if (files.length) return JSON.parse(readFileSync(join(folder, files[0]), "utf8"));
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`no record in ${folder}`);
}

test("a reset mid tool call: fetch fails with `terminated`, the record says injected", async () => {
  const traces = mkdtempSync(join(tmpdir(), "streamtap-traces-"));
  const replay = await start("replay");
  const proxy = await start("serve", "--route", `openai=${replay.url}`, "--trace-dir", traces);
  const response = await fetch(`${proxy.url}/openai/v1/chat/completions`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-streamtap-session": "node-example",
      "x-streamtap-fault": "reset; at=event:tool_input_delta:5",
    },
    body: JSON.stringify({
      model: "gpt-4o-mini", stream: true, messages: [{ role: "user", content: "weather?" }],
      tools: [{ type: "function", function: { name: "get_weather" } }],
    }),
  });
  assert.equal(response.status, 200);
  await assert.rejects(response.text(), { name: "TypeError", message: "terminated" });
  const record = await firstRecord(join(traces, "node-example"));
  assert.equal(record.outcome.boundary, "injected");
  assert.equal(record.outcome.phase, "tool_input");
  // The bundled sample's call comes in 12 argument pieces: cut after the 5th, the client held
  // arguments that do not parse yet, and the summary says the model was still writing them.
  assert.equal(record.stream.tool_calls[0].arg_parsed, false);
  assert.match(record.outcome.summary, /still writing the arguments/);
});
