// Test oracle: validates documents against JSON Schemas with ajv (draft
// 2020-12, or draft-07 when the schema's $schema says so) and ajv-formats.
//
// Usage: node validate_json.mjs JOBS.json
//   JOBS.json: [{"schema": {...}, "documents": ["<text>", ...]}, ...]
// Prints one JSON array with, per job, {"compiled": true, "results": [null
// or "error message", ...]} or {"compiled": false, "error": "..."}; a
// document that is not JSON gets "not JSON: ...".
import { readFileSync } from "node:fs";
import Ajv from "ajv";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

const jobs = JSON.parse(readFileSync(process.argv[2], "utf8"));
const make = (Cls) => {
  const ajv = new Cls({ strict: false, allErrors: false, validateFormats: true });
  addFormats(ajv);
  return ajv;
};
const ajv2020 = make(Ajv2020);
const ajv07 = make(Ajv);
const out = [];
for (const job of jobs) {
  const draft07 = typeof job.schema === "object" && String(job.schema.$schema || "").includes("draft-07");
  let validate;
  try {
    validate = (draft07 ? ajv07 : ajv2020).compile(job.schema);
  } catch (e) {
    out.push({ compiled: false, error: String(e.message || e) });
    continue;
  }
  const results = job.documents.map((text) => {
    let value;
    try {
      value = JSON.parse(text);
    } catch (e) {
      return "not JSON: " + e.message;
    }
    return validate(value) ? null : JSON.stringify(validate.errors);
  });
  out.push({ compiled: true, results });
}
process.stdout.write(JSON.stringify(out));
