// A recorded stream failure made repeatable by `streamtap repro`: serve it with `streamtap replay`
// (the sample and repro.json next to this file) and check that Node's fetch meets the same ending
// the original did, at the same byte. Edit `call` to drive your own client code instead.
// Run: node --test THIS_FILE   (streamtap on the PATH, or STREAMTAP=/path/to/streamtap)
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const MANIFEST = JSON.parse(readFileSync(join(HERE, "repro.json"), "utf8"));
const STREAMTAP = process.env.STREAMTAP ?? "streamtap";
const READ_TIMEOUT_MS = 2000; // how long the client waits on a silent stream before it gives up

// What fetch does for each ending: the error it rejects with (null: none). A reset and a body cut
// without its last chunk look alike to undici: both are `TypeError: terminated`.
const EXPECTED = {
  reset: "TypeError: terminated",
  truncated: "TypeError: terminated",
  no_response: "TypeError: fetch failed",
  stalled: "TimeoutError",
  client_gone: "TimeoutError",
  http_error: null, // a resolved response with the error status: checked below
  clean_close: null,
  terminal: null,
};

const children = [];
after(() => children.forEach((child) => child.kill("SIGTERM")));

// `streamtap replay DIR --port 0 --ready-json` prints one JSON line, {"url": ..., "port": ...}.
function startReplay() {
  const child = spawn(STREAMTAP, ["replay", HERE, "--port", "0", "--ready-json"],
                      { stdio: ["ignore", "pipe", "ignore"] });
  children.push(child);
  return new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", (code) => reject(new Error(`streamtap replay exited (${code})`)));
    createInterface({ input: child.stdout }).once("line", (line) => resolve(JSON.parse(line)));
  });
}

// One request to the path the original called, read to its end: { status, bytes, error }.
async function call(url) {
  const seen = { status: null, bytes: 0, error: null };
  try {
    const response = await fetch(url + MANIFEST.request_path, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "repro", stream: MANIFEST.stream,
                             messages: [{ role: "user", content: "repro" }] }),
    });
    seen.status = response.status;
    const reader = response.body.getReader();
    for (;;) {
      const next = await Promise.race([reader.read(), silence(READ_TIMEOUT_MS)]);
      if (next.done) break;
      seen.bytes += next.value.length;
    }
  } catch (error) {
    seen.error = error.name === "TimeoutError" ? "TimeoutError" : `${error.name}: ${error.message}`;
  }
  return seen;
}

// A read that waits this long gives up, as a client with a read timeout does.
function silence(ms) {
  return new Promise((_, reject) => {
    const timer = setTimeout(() => reject(Object.assign(new Error("read timeout"),
                                                        { name: "TimeoutError" })), ms);
    timer.unref();
  });
}

test(`fetch meets the recorded ending (${MANIFEST.dialect}, ${MANIFEST.ending})`, async () => {
  const replay = await startReplay();
  const seen = await call(replay.url);
  assert.equal(seen.error, EXPECTED[MANIFEST.ending]);
  if (MANIFEST.ending === "http_error") {
    assert.equal(seen.status, MANIFEST.status);
  } else if (["reset", "truncated", "clean_close", "terminal"].includes(MANIFEST.ending)
             && MANIFEST.bytes_exact) {
    assert.equal(seen.bytes, MANIFEST.byte_offset, "the stream ends at the recorded byte");
  }
});
