// The official MCP TypeScript SDK client against `nsbox mcp --workspace DIR
// --session NAME`: the workspace tools, with hostile file names and a
// symlink that leads out. The client validates structuredContent against
// each tool's outputSchema itself.
// Usage: node mcp_workspace.mjs SDK_DIR NSBOX [NSBOX MCP ARGS...]
// Prints "ok - ..." / "not ok - ..." lines; exits 1 if any failed.
const [sdk, nsbox, ...args] = process.argv.slice(2);
const mod = (p) => import(`${sdk}/node_modules/${p}`);
const { Client } = await mod("@modelcontextprotocol/sdk/dist/esm/client/index.js");
const { StdioClientTransport } = await mod("@modelcontextprotocol/sdk/dist/esm/client/stdio.js");

let failed = 0;
const check = (what, ok, detail = "") => {
  if (!ok) failed++;
  console.log(`${ok ? "ok" : "not ok"} - ${what}${ok || !detail ? "" : ": " + JSON.stringify(detail).slice(0, 400)}`);
};
const text = (r) => (r.content || []).map((c) => c.text).join("");
async function connect(extra) {
  const transport = new StdioClientTransport({ command: nsbox, args: ["mcp", ...extra], stderr: "inherit", env: { ...process.env } });
  const client = new Client({ name: "nsbox-ws-test", version: "1.0.0" });
  await client.connect(transport);
  return client;
}

try {
  const c = await connect(args);
  const { tools } = await c.listTools();
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  check("tools/list: the four workspace tools", ["workspace_changes", "workspace_diff", "workspace_apply", "workspace_discard"].every((n) => byName[n]), Object.keys(byName));
  check("workspace_apply is annotated destructive", byName.workspace_apply?.annotations?.destructiveHint === true);
  check("workspace_discard is annotated destructive", byName.workspace_discard?.annotations?.destructiveHint === true);
  check("workspace_changes is read-only", byName.workspace_changes?.annotations?.readOnlyHint === true);

  let r = await c.callTool({ name: "workspace_changes", arguments: {} });
  check("before any run: no changes, not an error", !r.isError && r.structuredContent?.count === 0, r);

  r = await c.callTool({ name: "run_command", arguments: { command:
    "cd /workspace && echo new > b.txt && echo changed >> a.txt && " +
    "printf x > \"$(printf 'evil\\033[31mred\\nline')\" && ln -s /etc/passwd link" } });
  check("run_command changed the session", !r.isError && r.structuredContent?.exit_status === 0, r);

  r = await c.callTool({ name: "workspace_changes", arguments: {} });
  const t = text(r);
  check("workspace_changes lists four changes", r.structuredContent?.count === 4, r.structuredContent);
  check("...its text escapes the terminal escape", t.includes("evil\\x1b[31mred\\x0aline") && !t.includes("\x1b"), t);
  check("...one line per change (the name's newline escaped)", t.trim().split("\n").length === 4, t);

  r = await c.callTool({ name: "workspace_diff", arguments: {} });
  check("workspace_diff shows the modification", !r.isError && text(r).includes("+changed") && !text(r).includes("\x1b"), text(r));

  r = await c.callTool({ name: "workspace_apply", arguments: { paths: ["link"] } });
  check("workspace_apply of a symlink leading out is refused", r.isError && /leads out of the workspace/.test(text(r)), text(r));
  r = await c.callTool({ name: "workspace_apply", arguments: { paths: ["../outside"] } });
  check("workspace_apply of a path outside is refused", r.isError === true, text(r));
  r = await c.callTool({ name: "workspace_apply", arguments: { paths: ["b.txt"], session: "other" } });
  check("another session cannot be named", r.isError && /refused argument/.test(text(r)), text(r));
  r = await c.callTool({ name: "workspace_changes", arguments: { workspace: "/" } });
  check("another workspace cannot be named", r.isError && /refused argument/.test(text(r)), text(r));

  r = await c.callTool({ name: "workspace_apply", arguments: { paths: ["b.txt"] } });
  check("workspace_apply of one path", !r.isError && r.structuredContent?.exit_status === 0, r);
  r = await c.callTool({ name: "workspace_changes", arguments: {} });
  check("...it is no longer a change", r.structuredContent?.count === 3 && !r.structuredContent.changes.some((x) => x.path === "b.txt"), r.structuredContent);

  r = await c.callTool({ name: "workspace_discard", arguments: {} });
  check("workspace_discard", !r.isError, text(r));
  r = await c.callTool({ name: "workspace_changes", arguments: {} });
  check("after discard: no changes", !r.isError && r.structuredContent?.count === 0, r);
  r = await c.callTool({ name: "workspace_apply", arguments: {} });
  check("apply after discard applies nothing", r.isError === true || r.structuredContent?.exit_status === 0, text(r));
  await c.close();

  const plain = await connect(args.filter((a, i) => a !== "--session" && args[i - 1] !== "--session"));
  const names = (await plain.listTools()).tools.map((x) => x.name);
  check("without --session: no workspace tools", !names.some((n) => n.startsWith("workspace_")), names);
  await plain.close();
} catch (e) {
  check("no exception", false, String(e?.stack || e));
}
process.exit(failed ? 1 : 0);
