import { test } from "node:test";
import { startFakeOpenAI } from "../fakes/openai-api.js";
import { OPENCODE_BIN, opencodeEnv } from "../fakes/opencode-env.js";
import { startTestBridge, tempDir, cleanup } from "../helpers/bridge.js";
import net from "node:net";
test("probe", async () => {
  const t0 = Date.now(); const T = (x: string) => console.log(((Date.now() - t0) / 1000).toFixed(1), x);
  const fake = await startFakeOpenAI();
  const home = tempDir();
  const b = await startTestBridge({ backends: { oc: { type: "opencode", command: OPENCODE_BIN, env: opencodeEnv(fake.url, home) } }, models: [{ id: "fake/m1", backend: "oc" }] });
  const send = async (h: Record<string,string>, body: any) => { const r = await fetch(`${b.baseURL}/chat/completions`, { method: "POST", headers: h, body, signal: AbortSignal.timeout(4000) }).catch(e => ({ status: "ERR " + e.message, text: async () => "" } as any)); console.log(JSON.stringify(h), r.status, (await r.text()).slice(0, 200)); };
  await send({ "content-type": "application/json", "content-encoding": "gzip" }, '{"a":1}');
  await send({ "content-type": "application/json", "content-encoding": "br" }, '{"a":1}');
  await send({ "content-type": "application/json" }, '{"__proto__": {"model": "fake/m1"}, "messages": 5}');
  await send({ "content-type": "application/json" }, '{"model":"fake/m1","messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":true},"stream":false, "tools":[{"type":"function","function":{"name":"x","parameters":5}}], "n": null, "temperature": null, "__proto__": {"x":1}}'.replace('"content":"hi"', '"content":null'));
  T("raw start");
  // raw socket: bad chunked encoding
  const raw = (payload: string) => new Promise<string>((res) => { const s = net.connect(b.port, "127.0.0.1", () => s.write(payload)); let d = ""; s.on("data", c => d += c); s.on("close", () => res(d)); s.setTimeout(2000, () => s.destroy()); });
  console.log(JSON.stringify((await raw("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n")).slice(0, 300)));
  console.log(JSON.stringify((await raw("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\nConnection: close\r\n\r\n{\"a\":")).slice(0, 300)));
  console.log(JSON.stringify((await raw("GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")).slice(0, 100)));
  T("before close"); await b.close(0); T("closed"); await fake.close(); cleanup(home); cleanup(b.dataDir);
});

