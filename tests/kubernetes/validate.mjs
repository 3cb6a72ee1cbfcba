// Validates Kubernetes objects (multi-document YAML files, or "-" for stdin) offline against the
// Kubernetes API schemas of the kubernetes-models package (validators generated from the Kubernetes
// 1.34 OpenAPI spec), strictly: an object whose kind has no schema, a schema violation (type, enum,
// required field, format) or a field the schema does not define fails, the last the way
// `kubectl apply --validate=strict` refuses unknown fields. Prints one line per problem and exits 1
// when there is any; prints "N objects valid" and exits 0 otherwise.
//
// The generated validators do not reject unknown fields themselves (the OpenAPI spec leaves
// additionalProperties open). Every object is therefore handed to its validator through a proxy
// that records which properties the validator looked up: a validator reads each property its
// schema defines (and enumerates maps such as labels), so a key it never read is a field the
// schema does not have.
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const modelsDir = path.join(here, "schema", "node_modules", "kubernetes-models");
const { parseAllDocuments } = await import(
  pathToFileURL(path.join(here, "schema", "node_modules", "yaml", "dist", "index.js")).href);

// The generated validator of apiVersion/kind, or null when kubernetes-models has no such kind.
const validators = new Map();
async function validatorFor(apiVersion, kind) {
  const key = `${apiVersion}/${kind}`;
  if (validators.has(key)) return validators.get(key);
  let validate = null;
  if (/^[a-z0-9.]*\/?v[0-9a-z]+$/.test(apiVersion) && /^[A-Za-z0-9]+$/.test(kind)) {
    const modelFile = path.join(modelsDir, apiVersion, `${kind}.js`);
    let source = "";
    try {
      source = readFileSync(modelFile, "utf8");
    } catch {
      source = "";
    }
    const schema = /_schemas\/([A-Za-z0-9]+)\.js/.exec(source);
    if (schema) {
      const module = await import(
        pathToFileURL(path.join(modelsDir, "_schemas", `${schema[1]}.js`)).href);
      validate = module.validate;
    }
  }
  validators.set(key, validate);
  return validate;
}

// Wraps `value` so that every property a validator reads is recorded in `read` (object -> keys).
function recordReads(value, read) {
  if (value === null || typeof value !== "object") return value;
  if (!read.has(value)) read.set(value, new Set());
  const keys = read.get(value);
  return new Proxy(value, {
    get(target, key, receiver) {
      if (typeof key === "string") keys.add(key);
      return recordReads(Reflect.get(target, key, receiver), read);
    },
    has(target, key) {
      if (typeof key === "string") keys.add(key);
      return Reflect.has(target, key);
    },
    ownKeys(target) {
      for (const key of Reflect.ownKeys(target)) if (typeof key === "string") keys.add(key);
      return Reflect.ownKeys(target);
    },
    getOwnPropertyDescriptor(target, key) {
      if (typeof key === "string") keys.add(key);
      return Reflect.getOwnPropertyDescriptor(target, key);
    },
  });
}

// Paths of the keys under `value` that the validator never read.
function unreadFields(value, where, read, out) {
  if (value === null || typeof value !== "object") return out;
  const keys = read.get(value) ?? new Set();
  for (const [key, child] of Object.entries(value)) {
    const at = Array.isArray(value) ? `${where}[${key}]` : `${where}.${key}`;
    if (!Array.isArray(value) && !keys.has(key)) out.push(at);
    else unreadFields(child, at, read, out);
  }
  return out;
}

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node validate.mjs FILE.yaml... (- for stdin)");
  process.exit(2);
}
// Base64 fields (Secret data, ConfigMap binaryData) may be wrapped over several lines, as kustomize
// writes long ones: the API server's decoder skips line breaks, the schema's byte format does not.
function unwrapBase64(object) {
  for (const field of ["data", "binaryData"]) {
    if ((object.kind === "Secret" && field === "data") ||
        (object.kind === "ConfigMap" && field === "binaryData")) {
      for (const [key, value] of Object.entries(object[field] ?? {})) {
        if (typeof value === "string") object[field][key] = value.replace(/[\r\n]/g, "");
      }
    }
  }
}

let problems = 0;
let valid = 0;
for (const file of files) {
  const seenNames = new Set();  // per file: each file is one set of objects applied together
  const text = readFileSync(file === "-" ? 0 : file, "utf8");
  const documents = parseAllDocuments(text, { uniqueKeys: true });
  for (const [index, document] of documents.entries()) {
    const where = `${file === "-" ? "stdin" : file} document ${index + 1}`;
    if (document.errors.length > 0) {
      for (const error of document.errors) console.log(`${where}: YAML: ${error.message}`);
      problems += document.errors.length;
      continue;
    }
    const object = document.toJS();
    if (object === null || object === undefined) continue;  // an empty document (a trailing ---)
    const name = `${object?.kind ?? "?"} ${object?.metadata?.namespace ?? ""}/${object?.metadata?.name ?? "?"}`;
    if (typeof object !== "object" || typeof object.apiVersion !== "string" ||
        typeof object.kind !== "string") {
      console.log(`${where}: not a Kubernetes object (apiVersion and kind are required)`);
      problems++;
      continue;
    }
    unwrapBase64(object);
    const validate = await validatorFor(object.apiVersion, object.kind);
    if (!validate) {
      console.log(`${where} (${name}): no schema for apiVersion ${object.apiVersion} kind ${object.kind} in Kubernetes 1.34`);
      problems++;
      continue;
    }
    if (seenNames.has(`${object.apiVersion} ${name}`)) {
      console.log(`${where} (${name}): defined twice`);
      problems++;
    }
    seenNames.add(`${object.apiVersion} ${name}`);
    const read = new Map();
    let ok = validate(recordReads(object, read));
    for (const error of validate.errors ?? []) {
      console.log(`${where} (${name}): ${error.instancePath || "/"} ${error.keyword}: ${JSON.stringify(error.params)}`);
      problems++;
    }
    // Unknown fields are judged only on an object the validator walked whole (a failing validator
    // may stop early and leave valid fields unread).
    if (ok) {
      for (const field of unreadFields(object, "", read, [])) {
        console.log(`${where} (${name}): unknown field ${field}`);
        problems++;
        ok = false;
      }
    }
    if (ok) valid++;
  }
}
if (problems > 0) {
  console.log(`${problems} problem(s); ${valid} object(s) valid`);
  process.exit(1);
}
console.log(`${valid} objects valid`);
