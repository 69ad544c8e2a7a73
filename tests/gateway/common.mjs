// Helpers for the gateway integration tests: replicas (`kvserve serve`, real
// models or the fake backend) and `kvserve gateway` processes on free
// loopback ports, key files through `kvserve gateway keys`, redis-server,
// the audit log. Everything runs on 127.0.0.1 and stops with the test.
import { execFileSync, spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";

import { binary, madeTempDir, metrics, request, sourceDir, spawnListening, startServer, waitFor } from "../server/common.mjs";

export * from "../server/common.mjs";

export const stories = () => {
  const p = path.join(process.env.KVSERVE_SHARED_DIR || path.resolve(sourceDir, "../shared"), "models/stories260K.gguf");
  return existsSync(p) ? p : null;
};
export const bundled = () => {
  const p = path.join(sourceDir, "models/kvserve-tiny.gguf");
  return existsSync(p) ? p : null;
};

export function tempDir() {
  return madeTempDir("kvserve-gw-");
}

export async function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// A replica: real model (model: path) or the fake backend (fake: true).
// ca: for a TLS replica (--tls-cert-file ...), the PEM CA that request() trusts.
export async function startReplica({ model = null, port = 0, args = [], env = {}, ca, waitReady = true } = {}) {
  const argv = ["--port", String(port), "--threads", "1", ...args];
  if (model) argv.push("--model", model);
  return startServer({ args: argv, fake: !model, env, ca, waitReady });
}

// `kvserve gateway keys add`: returns the plain key.
export function addKey(file, tenant, limits = {}) {
  const argv = ["gateway", "keys", "add", "--file", file, "--tenant", tenant];
  for (const [k, v] of Object.entries(limits)) argv.push(`--${k}`, String(v));
  return execFileSync(binary, argv, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();
}

export function revokeKey(file, id) {
  execFileSync(binary, ["gateway", "keys", "revoke", "--file", file, id], { stdio: ["ignore", "pipe", "pipe"] });
}

export function keyIds(file) {
  const out = execFileSync(binary, ["gateway", "keys", "list", "--file", file], { encoding: "utf8" });
  return out.split("\n").slice(1).filter((l) => l.trim()).map((l) => l.split(/\s+/)[0]);
}

function yamlValue(v) {
  return typeof v === "string" ? JSON.stringify(v) : String(v);
}

// The lines of a file that another process appends to, up to its last
// newline (a read can catch a line half written).
function completeLines(text) {
  return text.slice(0, text.lastIndexOf("\n") + 1).split("\n").filter((l) => l);
}

function gatewayYaml({ pools, gateway = {}, model, auditLog }) {
  const lines = ["gateway:"];
  for (const [k, v] of Object.entries({ port: 0, admin_port: 0, health_interval_seconds: 0.2, ...gateway })) {
    lines.push(`  ${k}: ${yamlValue(v)}`);
  }
  lines.push("model:", `  path: ${yamlValue(model)}`);
  lines.push("logging:", `  audit_log: ${yamlValue(auditLog)}`);
  lines.push("pools:");
  for (const p of pools) {
    lines.push(`  - name: ${p.name}`);
    for (const [k, v] of Object.entries(p)) {
      if (k === "name" || k === "replicas" || k === "replicas_dns") continue;
      lines.push(`    ${k}: ${yamlValue(v)}`);
    }
    if (p.replicas_dns) {
      lines.push("    replicas_dns:");
      for (const r of p.replicas_dns) {
        if (typeof r === "string") {
          lines.push(`      - ${yamlValue(r)}`);
          continue;
        }
        lines.push(`      - address: ${yamlValue(r.address)}`);
        for (const [k, v] of Object.entries(r)) if (k !== "address") lines.push(`        ${k}: ${yamlValue(v)}`);
      }
    }
    if (!p.replicas) continue;
    lines.push("    replicas:");
    for (const r of p.replicas) {
      if (typeof r === "string") {
        lines.push(`      - url: ${r}`);
        continue;
      }
      lines.push(`      - url: ${r.url}`);
      for (const [k, v] of Object.entries(r)) if (k !== "url") lines.push(`        ${k}: ${yamlValue(v)}`);
    }
  }
  return lines.join("\n") + "\n";
}

// Writes a gateway config and starts `kvserve gateway` on a free port.
// pools: [{name, max_context, replicas: [url or {url, version, ...}], ...pool keys}].
// gw.reconfigure(pools) rewrites the file with other pools and sends SIGHUP.
// waitAll: also wait until every listed replica is healthy (the gateway is
// ready once one per pool is; on a loaded machine the others' first probes can
// answer late, and until then all traffic goes to the first).
export async function startGateway({ pools, gateway = {}, model, dir = tempDir(), args = [], waitReady = true, waitAll = false, ca, env = {} }) {
  const auditLog = path.join(dir, `audit-${Math.random().toString(16).slice(2)}.log`);
  const config = path.join(dir, `gateway-${Math.random().toString(16).slice(2)}.yaml`);
  writeFileSync(config, gatewayYaml({ pools, gateway, model, auditLog }));
  const listening = await spawnListening(binary, ["gateway", "--config", config, ...args], { what: "gateway", env });
  listening.ca = ca;  // https: the PEM CA request() trusts
  // The admin listener (/metrics, /status) is logged right after the public one.
  await waitFor(() => /admin listening on http:\/\/[^:]+:\d+/.test(listening.stderr()), 10000);
  const adminPort = Number(/admin listening on http:\/\/[^:]+:(\d+)/.exec(listening.stderr())[1]);
  const gw = {
    ...listening,
    adminPort,
    admin: { port: adminPort, baseURL: `http://127.0.0.1:${adminPort}` },
    config,
    auditLog,
    // Complete lines only: the gateway may be writing the last one.
    audit: () =>
      existsSync(auditLog)
        ? completeLines(readFileSync(auditLog, "utf8")).map((l) => JSON.parse(l))
        : [],
    reconfigure(newPools) {
      writeFileSync(config, gatewayYaml({ pools: newPools, gateway, model, auditLog }));
      gw.child.kill("SIGHUP");
    },
  };
  // The gateway is ready once any pool can serve; tests start when every
  // pool can (/ready lists each pool's state).
  if (waitReady) {
    await waitFor(async () => {
      const r = await request(gw, "GET", "/ready");
      return r.status === 200 && Object.values(r.json?.pools ?? {}).every((p) => p.ready);
    }, 30000);
  }
  if (waitAll) {
    for (const url of pools.flatMap((p) => (p.replicas ?? []).map((r) => (typeof r === "string" ? r : r.url)))) {
      await waitFor(async () => (await metricSum(gw, "kvserve_gateway:replica_healthy", { replica: url })) === 1, 30000);
    }
  }
  return gw;
}

// Sum of a metric over every label set matching all the given labels.
export async function metricSum(server, name, labels = {}) {
  const m = await metrics(server);
  let sum = 0;
  for (const [k, v] of m) {
    const brace = k.indexOf("{");
    const n = brace < 0 ? k : k.slice(0, brace);
    if (n !== name) continue;
    const ls = brace < 0 ? "" : k.slice(brace);
    if (Object.entries(labels).every(([lk, lv]) => ls.includes(`${lk}="${lv}"`))) sum += v;
  }
  return sum;
}

// redis-server on 127.0.0.1:port (null when it is not installed). args:
// more options (--requirepass ...). tls {cert, key, ca}: the port speaks TLS
// only (--tls-port), with that certificate.
export function startRedis(port, { args = [], tls = null } = {}) {
  if (!existsSync("/usr/bin/redis-server")) return null;
  const ports = tls
    ? ["--port", "0", "--tls-port", String(port), "--tls-cert-file", tls.cert, "--tls-key-file", tls.key,
      "--tls-ca-cert-file", tls.ca, "--tls-auth-clients", "no"]
    : ["--port", String(port)];
  const child = spawn("/usr/bin/redis-server", [...ports, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
    "--dir", tempDir(), ...args], { stdio: "ignore" });
  const exited = new Promise((resolve) => child.on("exit", resolve));
  return {
    child,
    port,
    async ready() {
      await waitFor(() => new Promise((resolve) => {
        const s = net.connect(port, "127.0.0.1", () => { s.end(); resolve(true); });
        s.on("error", () => resolve(false));
      }), 10000, 50);
    },
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      return exited;
    },
  };
}

// The audit line written after a response (the client may see the response
// first): waits for the n-th line matching pred, counting from the end.
export async function auditLine(gw, pred, timeoutMs = 5000) {
  let line;
  await waitFor(() => {
    line = gw.audit().filter(pred).pop();
    return line !== undefined;
  }, timeoutMs);
  return line;
}

export const auth = (key) => ({ authorization: `Bearer ${key}` });
