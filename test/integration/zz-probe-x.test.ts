import { test } from "node:test";
import { startFakeOpenAI } from "../fakes/openai-api.js";
import { OPENCODE_BIN, opencodeEnv } from "../fakes/opencode-env.js";
import { startTestBridge, tempDir, cleanup } from "../helpers/bridge.js";
import net from "node:net";
test("probe", async () => {
  const fake = await startFakeOpenAI();
  const home = tempDir();
  const b = await startTestBridge({ backends: { oc: { type: "opencode", command: OPENCODE_BIN, env: opencodeEnv(fake.url, home) } }, models: [{ id: "fake/m1", backend: "oc" }] });
  const send = async (h: Record<string,string>, body: any) => { const r = await fetch(`${b.baseURL}/chat/completions`, { method: "POST", headers: h, body, signal: AbortSignal.timeout(4000) }).catch(e => ({ status: "ERR", text: async () => "" } as any)); await r.text(); };
  const raw = (payload: string) => new Promise<string>((res) => { const s = net.connect(b.port, "127.0.0.1", () => s.write(payload)); let d = ""; s.on("data", c => d += c); s.on("close", () => res(d)); s.setTimeout(2000, () => s.destroy()); });
  await send({ "content-type": "application/json", "content-encoding": "gzip" }, '{"a":1}');
  await send({ "content-type": "application/json", "content-encoding": "br" }, '{"a":1}');
  await send({ "content-type": "application/json" }, '{"__proto__": {"model": "fake/m1"}, "messages": 5}');
  await send({ "content-type": "application/json" }, '{"model":"fake/m1","messages":[{"role":"user","content":null}]}');
  await raw("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n");
  await raw("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\nConnection: close\r\n\r\n{\"a\":");
  const desc = () => (process as any)._getActiveHandles().map((h: any) => h.constructor?.name + (h.remotePort ? ":" + h.localPort + "->" + h.remotePort : "") + (h.pid ? " pid" + h.pid : "") + (h._idleTimeout > 0 ? " t" + h._idleTimeout : "")).join(", ");
  console.log("SKIPX before", desc());
  const t = Date.now(); const p = b.close(0); const iv = setInterval(() => console.log("SKIPX during", ((Date.now()-t)/1000).toFixed(0), desc()), 10000); await p; clearInterval(iv); console.log("SKIP6 close took", ((Date.now() - t) / 1000).toFixed(1));
  await fake.close(); cleanup(home); cleanup(b.dataDir);
});

