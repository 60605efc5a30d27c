// The page's OpenAI API in Node on Dawn: a tool round trip (a call, the tool's result, the answer)
// sent through the page's client (static/client.js openai(): the worker protocol's `openai`
// message) to the real worker/worker.js + Pyodide + py_engine/api, exactly as static/openai.js
// sends it in a browser. Prints one JSON object: both responses.
//
//   node benchmarks/dawn/openai.mjs --model FILE.gguf [--context 2048] [--webgpu /tmp/webgpu]

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";

import { openDawn } from "./dawn_gpu.mjs";
import { openPage } from "./page.mjs";

const { values: args } = parseArgs({ options: {
  model: { type: "string" }, context: { type: "string", default: "2048" },
  webgpu: { type: "string", default: "/tmp/webgpu" }, "dawn-backend": { type: "string", default: "vulkan" },
} });
const WEATHER = { type: "function", function: {
  name: "get_weather", description: "Get the current weather in a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
} };

async function main() {
  const storeDir = fs.mkdtempSync(path.join(os.tmpdir(), "wisp-opfs-"));
  const { gpu } = await openDawn(args.webgpu, args["dawn-backend"], []);
  const page = await openPage({ model: args.model, gpu, storeDir });
  const { client, model } = page;
  await client.load(page.modelRef(model), { context: Number(args.context) });
  const ask = async (body) => client.openai("chat.completions", { model: model.id, ...body }).done;
  const messages = [{ role: "user", content: "What is the weather in Paris right now?" }];
  const call = await ask({ messages, tools: [WEATHER], temperature: 0, max_tokens: 100 });
  const message = call.choices[0].message;
  const results = (message.tool_calls || []).map((c) => ({ role: "tool", tool_call_id: c.id,
    content: JSON.stringify({ city: "Paris", temperature_c: 18, sky: "sunny" }) }));
  const answer = await ask({ messages: [...messages, message, ...results], tools: [WEATHER], temperature: 0,
    max_tokens: 60 });
  await page.close();
  fs.rmSync(storeDir, { recursive: true, force: true });
  return { model: model.id, call, answer };
}

main().then((result) => {
  process.stdout.write(JSON.stringify(result) + "\n", () => process.exit(0));
}, (err) => {
  console.error(`failed: ${err?.kind ? `[${err.kind}] ` : ""}${err?.message || err}`);
  process.exit(1);
});
