// Reads one streamed response with Node's built-in fetch (undici) and prints what the client saw
// as one JSON line: how many bytes arrived and, if the read failed, the error and its cause.
// usage: node read_stream.mjs URL [HEADERS_JSON]
const [url, headersJson] = process.argv.slice(2);
const headers = { "content-type": "application/json", ...JSON.parse(headersJson || "{}") };
const result = { status: null, bytes: 0, error: null };
try {
  const response = await fetch(url, { method: "POST", headers, body: '{"stream": true}' });
  result.status = response.status;
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    result.bytes += value.length;
  }
} catch (error) {
  result.error = {
    name: error.name,
    message: error.message,
    cause: error.cause ? { name: error.cause.name, code: error.cause.code ?? null,
                           message: error.cause.message } : null,
  };
}
console.log(JSON.stringify(result));
