// The official MCP TypeScript SDK client against `nsbox mcp`.
// Usage: node mcp_client.mjs SDK_DIR SCHEMA NSBOX MARKER LANGS [NSBOX MCP ARGS...]
// LANGS: comma-separated languages to call run_code with ("" for none).
// Prints TAP-like "ok - ..." / "not ok - ..." lines; the last line is
// "server pids: A B" so the caller can wait for them and look for leftovers.
import { readFileSync, readdirSync } from "node:fs";

const [sdk, schemaPath, nsbox, marker, langs, ...args] = process.argv.slice(2);
const mod = (p) => import(`${sdk}/node_modules/${p}`);
const { Client } = await mod("@modelcontextprotocol/sdk/dist/esm/client/index.js");
const { StdioClientTransport } = await mod("@modelcontextprotocol/sdk/dist/esm/client/stdio.js");
const Ajv2020 = (await mod("ajv/dist/2020.js")).default;
const validate = new Ajv2020({ strict: false, allErrors: true }).compile(JSON.parse(readFileSync(schemaPath, "utf8")));

let failed = 0;
const check = (what, ok, detail = "") => {
  if (!ok) failed++;
  console.log(`${ok ? "ok" : "not ok"} - ${what}${ok || !detail ? "" : ": " + detail}`);
};
const pids = [];
async function connect(name) {
  const transport = new StdioClientTransport({ command: nsbox, args: ["mcp", ...args], stderr: "inherit", env: { ...process.env } });
  const client = new Client({ name, version: "1.0.0" });
  await client.connect(transport);
  pids.push(transport.pid);
  return client;
}
// Host processes whose command line holds the marker (the sandbox's sh -c), but
// this one (the marker is among its arguments).
const markerProcs = () => readdirSync("/proc").filter((p) => /^[0-9]+$/.test(p) && p !== String(process.pid)).filter((p) => {
  try { return readFileSync(`/proc/${p}/cmdline`, "utf8").includes(marker); } catch { return false; }
}).length;
const text = (r) => (r.content || []).map((c) => c.text).join("");

try {
  const c = await connect("nsbox-test");
  check("initialize: the server is nsbox", c.getServerVersion()?.name === "nsbox");
  const { tools } = await c.listTools();
  const names = tools.map((t) => t.name).sort().join(",");
  check("tools/list: run_code, run_command and the stateful sandbox_* tools (tests/func/mcp-live.test)",
        names === "run_code,run_command,sandbox_create,sandbox_list_files,sandbox_read_file,sandbox_run_code," +
                  "sandbox_run_command,sandbox_stop,sandbox_write_file", names);
  check("run_code and run_command have an outputSchema",
        tools.filter((t) => t.name.startsWith("run_")).every((t) => t.outputSchema?.type === "object"));

  for (const lang of langs ? langs.split(",") : []) {
    const code = { python: 'print("hello-python")', node: 'console.log("hello-node")', bash: "echo hello-bash" }[lang];
    const r = await c.callTool({ name: "run_code", arguments: { code, language: lang } });
    const rec = r.structuredContent;
    check(`run_code ${lang}: output`, rec?.stdout === `hello-${lang}\n`, JSON.stringify(rec?.stdout ?? text(r)));
    check(`run_code ${lang}: the record matches docs/result.schema.json`, validate(rec), JSON.stringify(validate.errors));
    check(`run_code ${lang}: compact text has the output, then why it ended`,
          /^hello-.*\n\[exited, exit status 0/.test(text(r)), text(r));
  }

  if ((langs || "").split(",").includes("python")) {
    const r = await c.callTool({ name: "run_code", arguments: { code: "print(6 * 7)" } });
    check("run_code without a language runs Python", r.structuredContent?.stdout === "42\n", text(r));
  }

  let r = await c.callTool({ name: "run_command", arguments: { command: "echo out; echo err >&2; exit 3" } });
  check("run_command: exit status and both streams", r.structuredContent?.exit_status === 3 &&
        r.structuredContent.stdout === "out\n" && r.structuredContent.stderr === "err\n", JSON.stringify(r.structuredContent));
  check("run_command: its record matches the schema", validate(r.structuredContent), JSON.stringify(validate.errors));

  r = await c.callTool({ name: "run_command", arguments: { command: "sleep 30", timeout: 0.5 } });
  check("a lower timeout applies", r.structuredContent?.timed_out === true && r.structuredContent.limits.timeout_ms === 500,
        JSON.stringify(r.structuredContent));
  check("a timed-out record matches the schema", validate(r.structuredContent), JSON.stringify(validate.errors));

  r = await c.callTool({ name: "run_command", arguments: { command: "true", timeout: 100000 } });
  check("raising the timeout is refused", r.isError === true && /refused timeout/.test(text(r)), text(r));
  r = await c.callTool({ name: "run_command", arguments: { command: "true", network: "user" } });
  check("opening the network is refused", r.isError === true && /refused argument 'network'/.test(text(r)), text(r));
  r = await c.callTool({ name: "run_code", arguments: { code: "1", language: "python", volume: "/:/host" } });
  check("adding a volume is refused", r.isError === true && /refused argument 'volume'/.test(text(r)), text(r));

  // Cancellation: the SDK sends notifications/cancelled on abort.
  const ac = new AbortController();
  const pending = c.callTool({ name: "run_command", arguments: { command: `sleep 300; : ${marker}` } }, undefined,
                             { signal: ac.signal, timeout: 600000 });
  let running = 0;
  for (let i = 0; i < 100 && !running; i++) {
    await new Promise((res) => setTimeout(res, 100));
    running = markerProcs();
  }
  check("cancellation: the call's sandbox is running before", running > 0);
  ac.abort("test cancels");
  let rejected = false;
  try { await pending; } catch { rejected = true; }
  check("cancellation: the call ends for the client", rejected);
  // The server kills the sandbox at once; wait (bounded) for it to be gone
  // while this client is still connected.
  let left = markerProcs();
  for (let i = 0; i < 100 && left; i++) {
    await new Promise((res) => setTimeout(res, 100));
    left = markerProcs();
  }
  check("cancellation: the sandbox is gone while the server serves on", left === 0, `${left} processes`);
  await c.ping();
  check("the server keeps serving after a cancellation", true);

  // Two clients at once, each with its own call running concurrently.
  const c2 = await connect("nsbox-test-2");
  const [a, b] = await Promise.all([
    c.callTool({ name: "run_command", arguments: { command: "sleep 1; echo A" } }),
    c2.callTool({ name: "run_command", arguments: { command: "sleep 1; echo B" } }),
  ]);
  check("two clients at once", a.structuredContent?.stdout === "A\n" && b.structuredContent?.stdout === "B\n",
        `${text(a)} | ${text(b)}`);
  await c2.close();
  await c.close();
} catch (e) {
  check("no exception", false, String(e?.stack || e));
}
console.log(`server pids: ${pids.join(" ")}`);
process.exit(failed ? 1 : 0);
