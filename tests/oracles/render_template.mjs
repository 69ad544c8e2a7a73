// Test oracle: renders chat templates with @huggingface/jinja's Template class,
// which always tokenizes with lstrip_blocks and trim_blocks on (as
// transformers renders chat templates).
//
// Usage: node render_template.mjs JOBS.json
//   JOBS.json: {"now_ms": <fixed clock for strftime_now, ms since epoch>,
//               "jobs": [{"template": "<path>", "context": {...}}, ...]}
// Prints one JSON array with, per job, {"ok": true, "output": "..."} or
// {"ok": false, "error": "...", "ext": {...}}. The caller sets TZ so that
// local time agrees with the renderer under test.
//
// "ext": when the library itself cannot render a job, the job is rendered
// again with a few Jinja2 builtins the library lacks (str.format, list.append
// and list.pop, the min/max/from_json filters, map with a filter name,
// select/reject with a test, |string on a dict, the `float` test), so the
// rest of such templates can still be compared. Everything else is the
// library's own behaviour.
import { readFileSync } from "node:fs";
import { Environment, Interpreter, Template } from "@huggingface/jinja";

const spec = JSON.parse(readFileSync(process.argv[2], "utf8"));

// strftime_now() reads `new Date()`; pin it so both renderers agree.
if (spec.now_ms !== undefined) {
  const RealDate = Date;
  const fixed = spec.now_ms;
  globalThis.Date = class extends RealDate {
    constructor(...args) {
      if (args.length === 0) super(fixed);
      else super(...args);
    }
    static now() {
      return fixed;
    }
  };
}

// ---- extensions (only active while EXT.on) ----
const EXT = { on: false };
const probe = new Interpreter(new Environment());
const probeEnv = new Environment();
probeEnv.set("n", null);
probeEnv.set("b", true);
const StringValue = probe.evaluate({ type: "StringLiteral", value: "" }, probeEnv).constructor;
const IntegerValue = probe.evaluate({ type: "IntegerLiteral", value: 0 }, probeEnv).constructor;
const FloatValue = probe.evaluate({ type: "FloatLiteral", value: 0.5 }, probeEnv).constructor;
const ArrayValue = probe.evaluate({ type: "ArrayLiteral", value: [] }, probeEnv).constructor;
const ObjectValue = probe.evaluate({ type: "ObjectLiteral", value: new Map() }, probeEnv).constructor;
const NullValue = probeEnv.variables.get("n").constructor;
const BooleanValue = probeEnv.variables.get("b").constructor;
const FunctionValue = probeEnv.variables.get("namespace").constructor;
const UndefinedValue = probe.evaluate({ type: "Identifier", value: "undefined_probe" }, probeEnv).constructor;

function fromJson(x) {
  if (x === null) return new NullValue(null);
  if (typeof x === "number") return Number.isInteger(x) ? new IntegerValue(x) : new FloatValue(x);
  if (typeof x === "string") return new StringValue(x);
  if (typeof x === "boolean") return new BooleanValue(x);
  if (Array.isArray(x)) return new ArrayValue(x.map(fromJson));
  return new ObjectValue(new Map(Object.entries(x).map(([k, v]) => [k, fromJson(v)])));
}

function pyStr(v) {
  if (v instanceof BooleanValue) return v.value ? "True" : "False";
  if (v instanceof NullValue) return "None";
  return v.toString();
}

function pyFormat(fmt, args) {
  let positional = args;
  let kwargs = new Map();
  if (args.length && args.at(-1).type === "KeywordArgumentsValue") {
    kwargs = args.at(-1).value;
    positional = args.slice(0, -1);
  }
  let auto = 0;
  return fmt.replace(/\{\{|\}\}|\{([^{}]*)\}/g, (m, field) => {
    if (m === "{{") return "{";
    if (m === "}}") return "}";
    let v;
    if (field === "") v = positional[auto++];
    else if (/^\d+$/.test(field)) v = positional[Number(field)];
    else v = kwargs.get(field);
    if (v === undefined) throw new Error(`format: no argument for {${field}}`);
    return pyStr(v);
  });
}

function patchBuiltins(cls, extra) {
  const desc = Object.getOwnPropertyDescriptor(cls.prototype, "builtins");
  Object.defineProperty(cls.prototype, "builtins", {
    get() {
      const map = desc.get.call(this);
      if (EXT.on) {
        for (const [name, make] of Object.entries(extra)) {
          if (!map.has(name)) map.set(name, new FunctionValue(make(this)));
        }
      }
      return map;
    },
    configurable: true,
  });
}

patchBuiltins(StringValue, {
  format: (self) => (args) => new StringValue(pyFormat(self.value, args)),
});
patchBuiltins(ArrayValue, {
  append: (self) => (args) => {
    self.value.push(args[0]);
    return new NullValue(null);
  },
  pop: (self) => (args) => {
    let i = args.length ? args[0].value : -1;
    if (i < 0) i += self.value.length;
    if (i < 0 || i >= self.value.length) throw new Error("pop index out of range");
    return self.value.splice(i, 1)[0];
  },
});

function numericOrString(v) {
  if (v instanceof IntegerValue || v instanceof FloatValue || v instanceof BooleanValue) return Number(v.value);
  if (v instanceof StringValue) return v.value.toLowerCase();
  throw new Error(`Cannot compare ${v.type}`);
}

const applyFilter = Interpreter.prototype.applyFilter;
Interpreter.prototype.applyFilter = function (operand, filterNode, environment) {
  if (EXT.on) {
    const name = filterNode.type === "Identifier" ? filterNode.value : filterNode.callee?.value;
    const [args] = this.evaluateArguments(filterNode.args ?? [], environment);
    if (name === "from_json" && operand instanceof StringValue) return fromJson(JSON.parse(operand.value));
    if (name === "string" && operand instanceof ObjectValue) return new StringValue(operand.toString());
    if (operand instanceof ArrayValue) {
      if (name === "min" || name === "max") {
        if (operand.value.length === 0) return new UndefinedValue();
        let best = operand.value[0];
        for (const x of operand.value.slice(1)) {
          const a = numericOrString(x), b = numericOrString(best);
          if (name === "min" ? a < b : a > b) best = x;
        }
        return best;
      }
      if (name === "map" && args.length && args[0] instanceof StringValue) {
        return new ArrayValue(
          operand.value.map((x) => applyFilter.call(this, x, { type: "Identifier", value: args[0].value }, environment)),
        );
      }
      if ((name === "select" || name === "reject") && args.length && args[0] instanceof StringValue) {
        const test = environment.tests.get(args[0].value);
        if (!test) throw new Error(`Unknown test: ${args[0].value}`);
        return new ArrayValue(operand.value.filter((x) => test(x, args[1]) === (name === "select")));
      }
    }
  }
  return applyFilter.call(this, operand, filterNode, environment);
};
Environment.TESTS.set("float", (operand) => {
  if (!EXT.on) throw new Error("Unknown test: float");
  return operand instanceof FloatValue;
});

// ---- rendering ----
function render(path, context, cache) {
  let template = cache.get(path);
  if (template === undefined) {
    try {
      template = new Template(readFileSync(path, "utf8"));
    } catch (e) {
      template = e instanceof Error ? e : new Error(String(e));
    }
    cache.set(path, template);
  }
  if (template instanceof Error) throw template;
  return template.render(context);
}

function attempt(job, cache) {
  try {
    // A fresh copy: extension methods may mutate lists in the context.
    return { ok: true, output: render(job.template, structuredClone(job.context), cache) };
  } catch (e) {
    return { ok: false, error: e instanceof Error ? e.message : String(e) };
  }
}

const cache = new Map();
const results = [];
for (const job of spec.jobs) {
  EXT.on = false;
  const result = attempt(job, cache);
  if (!result.ok) {
    EXT.on = true;
    result.ext = attempt(job, cache);
    EXT.on = false;
  }
  results.push(result);
}
process.stdout.write(JSON.stringify(results));
