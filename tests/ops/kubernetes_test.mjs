// The Kubernetes manifests of deploy/kubernetes, validated offline:
//   1. every object against the Kubernetes API's JSON schemas (the npm
//      package kubernetes-models: validators generated from the upstream
//      OpenAPI specification; types, required fields, enums, formats);
//   2. strictly: no field the API does not define (a typo such as
//      `readinesProbe` passes JSON-schema validation, since the upstream
//      schemas allow additional properties; kubeconform calls this -strict).
//      The known fields come from the same package's type declarations;
//   3. references inside the set: every Deployment's selector matches its
//      template; Services, PDBs and HPAs select / target objects that
//      exist; every ConfigMap/Secret volume, probe port name exists;
//   4. the embedded configurations by their consumers: each replica's
//      serve.yaml through `kvserve serve --print-config` (unknown keys and
//      bad values are refused), the Prometheus configuration through
//      `promtool check config`, the adapter rules' PromQL parsed by promtool
//      (tests/ops/prometheus_test.mjs also evaluates them);
//   5. the validator rejects broken manifests (an unknown field, a string
//      where an integer belongs, a missing required field);
//   6. the optional tensor-parallel replica (deploy/kubernetes/parallel): its
//      LeaderWorkerSet (a CRD the schemas do not know) field by field against
//      the LWS v1 API, its leader and worker pod templates as core
//      PodTemplates (schemas, strictly), the files and Secret they mount,
//      its serve.yaml through `kvserve serve --print-config` (tensor_parallel
//      equal to the group size), the leader script through `sh -n`.
// Skips (77) when the npm oracles are not installed.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";

import { binary, skipFile, sourceDir } from "../server/common.mjs";

const nm = path.join(sourceDir, "tests/oracles/node_modules");
if (!existsSync(path.join(nm, "kubernetes-models")) || !existsSync(path.join(nm, "js-yaml"))) {
  skipFile(`${nm}/kubernetes-models or js-yaml is missing (run scripts/setup.sh to install the npm test oracles)`);
}
const yaml = (await import(path.join(nm, "js-yaml/index.js"))).default;
const manifestDir = path.join(sourceDir, "deploy/kubernetes");

// apiVersion + kind -> the kubernetes-models module path.
function modelPath(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : [null, apiVersion];
  return path.join(nm, "kubernetes-models", group ? `${group}/${version}` : version, `${kind}.js`);
}

// --- Strict field check from the .d.ts declarations.
const interfaces = new Map();  // d.ts file -> {fields: Map(name -> {type, file})}
function resolveImport(fromFile, spec) {
  const base = spec.startsWith(".") ? path.resolve(path.dirname(fromFile), spec) : path.join(nm, spec);
  return base.replace(/\.js$/, "") + ".d.ts";
}
function declaration(file) {
  if (interfaces.has(file)) return interfaces.get(file);
  const text = readFileSync(file, "utf8");
  const imports = new Map();
  for (const m of text.matchAll(/import \{ (\w+) \} from "([^"]+)";/g)) imports.set(m[1], resolveImport(file, m[2]));
  const body = /export interface I\w+ (?:extends [\w, ]+ )?\{\n([\s\S]*?)\n\}/.exec(text);
  let decl = null;
  if (body) {
    decl = new Map();
    let depth = 0;
    for (const line of body[1].split("\n")) {
      const trimmed = line.trim();
      if (depth === 0) {
        const f = /^"([^"]+)"\??: (.+?);?$/.exec(trimmed);
        if (f) {
          const type = f[2];
          if (type.endsWith("{")) {
            decl.set(f[1], { map: true });  // { [key: string]: T }: free keys
          } else {
            const ref = /\b(IIoK8s\w+)\b/.exec(type);
            decl.set(f[1], { file: ref ? imports.get(ref[1]) : null });
          }
        }
      }
      depth += (trimmed.match(/\{/g) || []).length - (trimmed.match(/\}/g) || []).length;
    }
  }
  interfaces.set(file, decl);
  return decl;
}
function strictCheck(value, file, where, errors) {
  if (value === null || typeof value !== "object" || !file || !existsSync(file)) return;
  if (Array.isArray(value)) {
    value.forEach((v, i) => strictCheck(v, file, `${where}[${i}]`, errors));
    return;
  }
  const decl = declaration(file);
  if (!decl) return;  // a scalar alias (Quantity, IntOrString)
  for (const [k, v] of Object.entries(value)) {
    const f = decl.get(k);
    if (!f) {
      errors.push(`${where}.${k}: unknown field`);
      continue;
    }
    if (!f.map) strictCheck(v, f.file, `${where}.${k}`, errors);
  }
}

async function validate(obj, where) {
  const errors = [];
  const p = modelPath(obj.apiVersion, obj.kind);
  if (!existsSync(p)) return [`${where}: no schema for ${obj.apiVersion} ${obj.kind}`];
  const mod = await import(p);
  try {
    new mod[obj.kind](obj).validate();
  } catch (e) {
    errors.push(`${where}: ${e.message}`);
  }
  strictCheck(obj, p.replace(/\.js$/, ".d.ts"), where, errors);
  return errors;
}

function loadAll() {
  const objects = [];
  for (const f of readdirSync(manifestDir).filter((f) => f.endsWith(".yaml")).sort()) {
    yaml.loadAll(readFileSync(path.join(manifestDir, f), "utf8"), (doc) => {
      if (doc) objects.push({ file: f, obj: doc });
    });
  }
  return objects;
}

const matches = (selector, labels) => Object.entries(selector).every(([k, v]) => labels?.[k] === v);

test("manifests validate against the Kubernetes schemas, strictly", async () => {
  const objects = loadAll();
  const kinds = new Set(objects.map((o) => o.obj.kind));
  for (const k of ["Deployment", "Service", "ConfigMap", "PodDisruptionBudget", "HorizontalPodAutoscaler"]) {
    assert.ok(kinds.has(k), `no ${k} in deploy/kubernetes`);
  }
  const errors = [];
  for (const { file, obj } of objects) errors.push(...(await validate(obj, `${file}: ${obj.kind}/${obj.metadata?.name}`)));
  assert.deepEqual(errors, []);
  console.log(`kubernetes: ${objects.length} objects (${[...kinds].sort().join(", ")}) valid`);
});

test("references between the manifests resolve", () => {
  const objects = loadAll().map((o) => o.obj);
  const byKind = (k) => objects.filter((o) => o.kind === k);
  const pods = byKind("Deployment").map((d) => ({ d, labels: d.spec.template.metadata.labels, ns: d.metadata.namespace }));
  for (const { d, labels } of pods) {
    assert.ok(matches(d.spec.selector.matchLabels, labels), `${d.metadata.name}: selector does not match its template`);
    for (const c of d.spec.template.spec.containers) {
      const ports = new Set((c.ports || []).map((p) => p.name));
      for (const probe of ["startupProbe", "livenessProbe", "readinessProbe"]) {
        const port = c[probe]?.httpGet?.port;
        if (typeof port === "string") assert.ok(ports.has(port), `${d.metadata.name}: ${probe} port ${port}`);
      }
      assert.ok(c.resources?.requests?.memory && c.resources?.limits?.memory, `${d.metadata.name}: memory resources`);
      if (!c.image.startsWith("kvserve:")) continue;  // prometheus-adapter: its own probes
      assert.ok(c.readinessProbe?.httpGet?.path === "/ready", `${d.metadata.name}: readiness on /ready`);
      assert.ok(c.livenessProbe?.httpGet?.path === "/health", `${d.metadata.name}: liveness on /health`);
      assert.ok(c.lifecycle?.preStop, `${d.metadata.name}: a preStop hook (drain)`);
    }
    for (const v of d.spec.template.spec.volumes || []) {
      if (v.configMap) {
        assert.ok(objects.some((o) => o.kind === "ConfigMap" && o.metadata.name === v.configMap.name),
          `${d.metadata.name}: ConfigMap ${v.configMap.name}`);
      }
    }
  }
  for (const s of byKind("Service")) {
    assert.ok(pods.some((p) => p.ns === s.metadata.namespace && matches(s.spec.selector, p.labels)),
      `Service ${s.metadata.name} selects no Deployment's pods`);
  }
  for (const b of byKind("PodDisruptionBudget")) {
    assert.ok(pods.some((p) => matches(b.spec.selector.matchLabels, p.labels)), `PDB ${b.metadata.name} selects nothing`);
  }
  // The gateway's pools name headless Services (one replica per pod, not one
  // virtual IP per pool) that exist, on a port they expose.
  const gwConfig = yaml.load(objects.find((o) => o.kind === "ConfigMap" && o.data?.["gateway.yaml"]).data["gateway.yaml"]);
  for (const pool of gwConfig.pools) {
    assert.ok(!pool.replicas, `gateway pool ${pool.name}: a Service URL hides the pods; use replicas_dns`);
    assert.ok(pool.replicas_dns?.length >= 1, `gateway pool ${pool.name}: no replicas_dns`);
    for (const entry of pool.replicas_dns) {
      const [host, port] = (typeof entry === "string" ? entry : entry.address).split(":");
      const [name, ns] = host.split(".");
      const svc = byKind("Service").find((x) => x.metadata.name === name && x.metadata.namespace === ns);
      assert.ok(svc, `gateway pool ${pool.name}: no Service ${name} in ${ns}`);
      assert.equal(svc.spec.clusterIP, "None", `Service ${name} must be headless for per-pod replicas`);
      assert.ok(svc.spec.ports.some((p) => String(p.port) === port), `Service ${name} has no port ${port}`);
    }
  }
  const hpas = byKind("HorizontalPodAutoscaler");
  assert.ok(hpas.length >= 1);
  const adapter = objects.find((o) => o.kind === "ConfigMap" && o.metadata.name === "prometheus-adapter");
  const adapterNames = yaml.load(adapter.data["config.yaml"]).rules.map((r) => r.name.as);
  for (const h of hpas) {
    const t = h.spec.scaleTargetRef;
    assert.ok(byKind(t.kind).some((d) => d.metadata.name === t.name), `HPA ${h.metadata.name}: no ${t.kind} ${t.name}`);
    for (const m of h.spec.metrics) {
      assert.ok(adapterNames.includes(m.pods.metric.name), `HPA ${h.metadata.name}: ${m.pods.metric.name} is not served by the adapter`);
    }
    assert.ok(h.spec.behavior.scaleDown.stabilizationWindowSeconds >= 900, "a long scale-down stabilisation window");
  }
});

test("embedded configurations are accepted by their consumers", (t) => {
  const objects = loadAll().map((o) => o.obj);
  const dir = mkdtempSync(path.join(tmpdir(), "kvserve-k8s-"));
  try {
    let serveConfigs = 0;
    // ctest passes the build tree's kvserve: without it the check fails.
    assert.ok(binary && existsSync(binary), `KVSERVE_BIN (${binary || "not set"}) is not a kvserve binary`);
    for (const cm of objects.filter((o) => o.kind === "ConfigMap" && o.data?.["serve.yaml"])) {
      const f = path.join(dir, `${cm.metadata.name}.yaml`);
      writeFileSync(f, cm.data["serve.yaml"]);
      const r = spawnSync(binary, ["serve", "--config", f, "--print-config"], { encoding: "utf8" });
      assert.equal(r.status, 0, `${cm.metadata.name}/serve.yaml: ${r.stderr}`);
      serveConfigs++;
    }
    assert.ok(serveConfigs >= 2);
    const promtool = spawnSync("promtool", ["--version"]);
    if (promtool.status === 0) {
      const cm = objects.find((o) => o.kind === "ConfigMap" && o.data?.["prometheus.yml"]);
      const rules = path.join(sourceDir, "deploy/prometheus/alerts.yaml");
      const cfg = path.join(dir, "prometheus.yml");
      // Debian builds Prometheus without Kubernetes service discovery (its
      // promtool rejects kubernetes_sd_configs as an unknown field), so the
      // discovery block is swapped for file discovery, which yields the same
      // __meta_ labels to relabel; everything else is checked as written.
      const text = cm.data["prometheus.yml"].replace("/etc/prometheus/rules/alerts.yaml", rules);
      const swapped = text.replace(/kubernetes_sd_configs:\n(\s+)- role: pod\n\s+namespaces: .*\n/,
        (_, indent) => `file_sd_configs:\n${indent}- files: ["${path.join(dir, "targets.json")}"]\n`);
      assert.notEqual(swapped, text, "the discovery block was found");
      writeFileSync(cfg, swapped);
      const r = spawnSync("promtool", ["check", "config", cfg], { encoding: "utf8" });
      assert.equal(r.status, 0, r.stdout + r.stderr);
      // The adapter's PromQL, templates filled in, parsed by promtool as rules.
      const adapter = objects.find((o) => o.kind === "ConfigMap" && o.metadata.name === "prometheus-adapter");
      const exprs = yaml.load(adapter.data["config.yaml"]).rules.map((rule) => rule.metricsQuery
        .replaceAll("<<.Series>>", /^(\S+?)\{/.exec(rule.seriesQuery)[1]).replaceAll("<<.LabelMatchers>>", 'namespace="kvserve"')
        .replaceAll("<<.GroupBy>>", "pod"));
      const rf = path.join(dir, "adapter-rules.yaml");
      writeFileSync(rf, "groups:\n  - name: adapter\n    rules:\n" +
        exprs.map((e, i) => `      - record: adapter_check_${i}\n        expr: ${JSON.stringify(e)}\n`).join(""));
      const r2 = spawnSync("promtool", ["check", "rules", rf], { encoding: "utf8" });
      assert.equal(r2.status, 0, r2.stdout + r2.stderr);
    } else {
      t.diagnostic("promtool absent: the Prometheus configuration was not checked");
    }
    console.log(`configs: ${serveConfigs} serve.yaml accepted by kvserve; Prometheus config and adapter PromQL by promtool`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// LeaderWorkerSet v1 (leaderworkerset.x-k8s.io): the fields this project
// uses and their types; pod templates are checked as core PodTemplates.
const LWS_FIELDS = {
  spec: ["replicas", "leaderWorkerTemplate", "rolloutStrategy", "startupPolicy", "networkConfig"],
  leaderWorkerTemplate: ["leaderTemplate", "workerTemplate", "size", "restartPolicy", "subGroupPolicy"],
};
async function validateLws(lws, where) {
  const errors = [];
  const unknown = (obj, allowed, at) => {
    for (const k of Object.keys(obj ?? {})) if (!allowed.includes(k)) errors.push(`${where}: unknown field ${at}.${k}`);
  };
  unknown(lws.spec, LWS_FIELDS.spec, "spec");
  const t = lws.spec?.leaderWorkerTemplate;
  if (!t) return [...errors, `${where}: spec.leaderWorkerTemplate is required`];
  unknown(t, LWS_FIELDS.leaderWorkerTemplate, "spec.leaderWorkerTemplate");
  if (!Number.isInteger(t.size) || t.size < 1) errors.push(`${where}: leaderWorkerTemplate.size must be an integer >= 1`);
  if (!Number.isInteger(lws.spec.replicas ?? 1)) errors.push(`${where}: spec.replicas must be an integer`);
  if (t.restartPolicy && !["RecreateGroupOnPodRestart", "Default", "None"].includes(t.restartPolicy)) {
    errors.push(`${where}: restartPolicy ${t.restartPolicy} is not allowed`);
  }
  if (lws.spec.startupPolicy && !["LeaderCreated", "LeaderReady"].includes(lws.spec.startupPolicy)) {
    errors.push(`${where}: startupPolicy ${lws.spec.startupPolicy} is not allowed`);
  }
  for (const name of ["leaderTemplate", "workerTemplate"]) {
    if (!t[name]) {
      errors.push(`${where}: ${name} is required here`);
      continue;
    }
    const pt = { apiVersion: "v1", kind: "PodTemplate", metadata: { name: `${lws.metadata.name}-${name}` }, template: t[name] };
    errors.push(...(await validate(pt, `${where} ${name}`)));
  }
  return errors;
}

test("the tensor-parallel replica (LeaderWorkerSet) is valid and consistent", async () => {
  const dir = path.join(manifestDir, "parallel");
  const objects = [];
  for (const f of readdirSync(dir).filter((f) => f.endsWith(".yaml"))) {
    yaml.loadAll(readFileSync(path.join(dir, f), "utf8"), (doc) => doc && objects.push(doc));
  }
  const lws = objects.find((o) => o.kind === "LeaderWorkerSet");
  assert.ok(lws, "no LeaderWorkerSet in deploy/kubernetes/parallel");
  assert.equal(lws.apiVersion, "leaderworkerset.x-k8s.io/v1");
  const errors = await validateLws(lws, "LeaderWorkerSet/" + lws.metadata.name);
  for (const o of objects.filter((o) => o !== lws)) errors.push(...(await validate(o, `${o.kind}/${o.metadata.name}`)));
  assert.deepEqual(errors, []);
  // A broken LWS is caught.
  const bad = structuredClone(lws);
  bad.spec.leaderWorkerTemplate.sise = 2;
  bad.spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].readinesProbe = {};
  const badErrors = await validateLws(bad, "bad");
  assert.ok(badErrors.some((e) => /sise/.test(e)) && badErrors.some((e) => /readinesProbe|unknown field/.test(e)),
    badErrors.join("; "));
  // The mounted ConfigMap holds serve.yaml, leader.sh and worker.sh; the Secret is named.
  const t = lws.spec.leaderWorkerTemplate;
  const cm = objects.find((o) => o.kind === "ConfigMap");
  for (const tpl of [t.leaderTemplate, t.workerTemplate]) {
    const vols = tpl.spec.volumes;
    assert.ok(vols.some((v) => v.configMap?.name === cm.metadata.name), "the ConfigMap is mounted");
    assert.ok(vols.some((v) => v.secret?.secretName === "kvserve-mpi-ssh"), "the ssh Secret is mounted");
    const script = tpl.spec.containers[0].command.at(-1).replace("/etc/kvserve/", "");
    assert.ok(cm.data[script], `${script} is in the ConfigMap`);
    const sh = spawnSync("sh", ["-n"], { input: cm.data[script], encoding: "utf8" });
    assert.equal(sh.status, 0, `${script}: ${sh.stderr}`);
  }
  // serve.yaml parses, and its tensor_parallel is the group size.
  const tmp = mkdtempSync(path.join(tmpdir(), "kvserve-k8s-tp-"));
  try {
    const f = path.join(tmp, "serve.yaml");
    writeFileSync(f, cm.data["serve.yaml"]);
    const r = spawnSync(binary, ["serve", "--config", f, "--print-config"], { encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).runtime.tensor_parallel, t.size);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  // The Service selects the leaders only (rank 0 serves HTTP).
  const svc = objects.find((o) => o.kind === "Service");
  assert.ok(matches(svc.spec.selector, t.leaderTemplate.metadata.labels));
  assert.ok(!matches(svc.spec.selector, t.workerTemplate.metadata.labels));
});

test("the validator rejects broken manifests", async () => {
  const objects = loadAll();
  const deployment = structuredClone(objects.find((o) => o.obj.kind === "Deployment").obj);
  const cases = [
    ["unknown field", (d) => { d.spec.template.spec.containers[0].readinesProbe = {}; }, /unknown field/],
    ["string replicas", (d) => { d.spec.replicas = "two"; }, /integer/],
    ["missing container name", (d) => { delete d.spec.template.spec.containers[0].name; }, /name/],
    ["bad enum", (d) => { d.spec.template.spec.containers[0].imagePullPolicy = "Sometimes"; }, /allowed|enum/],
  ];
  for (const [what, mutate, expect] of cases) {
    const d = structuredClone(deployment);
    mutate(d);
    const errors = await validate(d, what);
    assert.ok(errors.length > 0 && errors.some((e) => expect.test(e)), `${what}: ${errors.join("; ") || "accepted"}`);
  }
});
