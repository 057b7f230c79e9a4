// shots.mjs times screenshots through the official TypeScript SDK, for
// mcpserver's BenchmarkScreenshot/mcp-changed-typescript.
//
//   node shots.mjs URL
//
// It connects to the MCP endpoint URL over streamable HTTP, then for every
// line read on stdin (the Go benchmark writes one after it changed the
// screen) calls the computer tool's screenshot, checks an image came back,
// and writes the call's time in milliseconds as one line. It ends at the end
// of stdin.
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const url = process.argv[2];
if (!url) {
  console.error("shots.mjs: usage: node shots.mjs URL");
  process.exit(2);
}
const client = new Client({ name: "deskenv-shots", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
process.stdout.write("ready\n");
for await (const _ of createInterface({ input: process.stdin })) {
  const t0 = performance.now();
  const res = await client.callTool({ name: "computer", arguments: { action: "screenshot" } });
  const ms = performance.now() - t0;
  const img = (res.content ?? []).find((c) => c.type === "image");
  if (res.isError || !img || !img.data) {
    console.error(`shots.mjs: no image in the answer: ${JSON.stringify(res).slice(0, 300)}`);
    process.exit(1);
  }
  process.stdout.write(`${ms.toFixed(3)}\n`);
}
await client.close();
