// check.mjs drives a running deskenv MCP server with the official TypeScript
// SDK, the client most MCP hosts are built on, over streamable HTTP.
//
//   node check.mjs URL WIDTHxHEIGHT X,Y
//
// URL is the MCP endpoint, WIDTHxHEIGHT the model space the screenshots must
// have, X,Y the model-space point to left_click (the Go test checks on its
// probe window that the click landed there). It prints one JSON line with
// what it saw and exits non-zero, naming the failed check, if anything is off.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const ACTIONS = [
  "screenshot", "left_click", "right_click", "middle_click", "double_click", "triple_click",
  "mouse_move", "left_click_drag", "left_mouse_down", "left_mouse_up", "scroll", "type",
  "key", "hold_key", "wait", "cursor_position", "zoom",
];

function fail(msg) {
  console.error(`check.mjs: ${msg}`);
  process.exit(1);
}

function parsePair(s, sep, what) {
  const parts = (s ?? "").split(sep).map(Number);
  if (parts.length !== 2 || parts.some((n) => !Number.isInteger(n))) {
    fail(`${what} ${JSON.stringify(s)} is not valid: want two integers joined by "${sep}"`);
  }
  return parts;
}

// pngSize reads width and height from a PNG's IHDR chunk, after checking the
// signature, so a JPEG or garbage labelled image/png is caught.
function pngSize(buf) {
  const sig = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
  if (buf.length < 24 || sig.some((b, i) => buf[i] !== b)) fail("image data is not a PNG (bad signature)");
  if (buf.toString("latin1", 12, 16) !== "IHDR") fail("PNG has no IHDR chunk first");
  return [buf.readUInt32BE(16), buf.readUInt32BE(20)];
}

function image(result, what, want) {
  if (result.isError) fail(`${what}: tool error: ${JSON.stringify(result.content)}`);
  const img = result.content.find((c) => c.type === "image");
  if (!img) fail(`${what}: no image content in ${JSON.stringify(result.content.map((c) => c.type))}`);
  if (img.mimeType !== "image/png") fail(`${what}: mimeType ${img.mimeType}, want image/png`);
  const [w, h] = pngSize(Buffer.from(img.data, "base64"));
  if (w !== want[0] || h !== want[1]) fail(`${what}: image is ${w}x${h}, want ${want[0]}x${want[1]}`);
  return [w, h];
}

const [url, sizeArg, pointArg] = process.argv.slice(2);
if (!url) fail("usage: node check.mjs URL WIDTHxHEIGHT X,Y");
const model = parsePair(sizeArg, "x", "model size");
const point = parsePair(pointArg, ",", "click point");

const client = new Client({ name: "deskenv-ts-check", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(url));
await client.connect(transport);
const seen = { server: client.getServerVersion(), protocol: transport.protocolVersion };

const { tools } = await client.listTools();
const byName = new Map(tools.map((t) => [t.name, t]));
for (const name of ["computer", "screenshot", "left_click"]) {
  if (!byName.has(name)) fail(`tools/list has no ${name} tool (got ${[...byName.keys()].join(", ")})`);
}
for (const reserved of ["reset", "step", "state", "close"]) {
  if (byName.has(reserved)) fail(`tools/list has a tool named ${reserved}, which OpenEnv reserves`);
}
const computer = byName.get("computer");
const action = computer.inputSchema?.properties?.action;
if (!action || JSON.stringify([...action.enum].sort()) !== JSON.stringify([...ACTIONS].sort())) {
  fail(`computer.inputSchema.properties.action.enum is ${JSON.stringify(action?.enum)}, want the 17 computer_20251124 actions`);
}
if (!computer.inputSchema.required?.includes("action")) fail("computer.inputSchema does not require action");
const click = byName.get("left_click");
if (!click.inputSchema?.properties?.coordinate) fail("left_click.inputSchema has no coordinate property");
if (byName.get("screenshot").annotations?.readOnlyHint !== true) fail("screenshot is not annotated readOnlyHint");
if (click.annotations?.readOnlyHint !== false) fail("left_click is not annotated readOnlyHint: false");
seen.tools = tools.length;

seen.screenshot = image(await client.callTool({ name: "computer", arguments: { action: "screenshot" } }), "computer screenshot", model);
seen.granular_screenshot = image(await client.callTool({ name: "screenshot", arguments: {} }), "screenshot tool", model);
seen.left_click = image(await client.callTool({ name: "left_click", arguments: { coordinate: point } }), "left_click", model);

const bad = await client.callTool({ name: "computer", arguments: { action: "fly" } });
if (!bad.isError) fail(`unknown action was not a tool error: ${JSON.stringify(bad)}`);
seen.error = bad.content.find((c) => c.type === "text")?.text ?? "";
if (!seen.error) fail("the tool error for an unknown action carries no text");

await client.close();
console.log(JSON.stringify(seen));
