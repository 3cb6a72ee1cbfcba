// Generate: a form (model, energies, angles, count, seed) whose answer, an HDF5 file, the browser
// saves. The server bounds the count (docs/API.md "HTTP API"); the form says so before sending.
import { getJson, type ModelVersion, refOf, request } from "../api";
import { errorBox, field, h, setMain } from "../dom";
import type { Route } from "../main";

/** The largest count the form sends: gantry-server's default --http-max-generate-showers (a
 * server started with another bound answers with its own message). */
export const MAX_COUNT = 2000;

/** "50" -> [50, 50], "10:200" -> [10, 200]; throws a message naming the field. */
export function parseRange(what: string, text: string, unit: string): [number, number] | null {
  const t = text.trim();
  if (!t) return null;
  const parts = t.split(/[:\-–]/).map((x) => Number(x.trim()));
  if (parts.length > 2 || parts.some((x) => !Number.isFinite(x) || x < 0)) {
    throw new Error(`${what} "${t}": write one value or min:max in ${unit}, e.g. 10:200.`);
  }
  const [lo, hi] = parts.length === 1 ? [parts[0], parts[0]] : parts;
  if (lo > hi) throw new Error(`${what} "${t}": the minimum ${lo} is above the maximum ${hi}.`);
  return [lo, hi];
}

export async function renderGenerate(route: Route): Promise<void> {
  const model = h("input", { name: "model", required: true, value: route.query.get("model") ?? "", list: "model-refs", placeholder: "name:version or name@alias" });
  const refs = h("datalist", { id: "model-refs" });
  const energies = h("input", { name: "energies", required: true, value: "10:200", placeholder: "10:200" });
  const angles = h("input", { name: "angles", placeholder: "empty = the model's default", value: "" });
  const count = h("input", { name: "count", type: "number", min: "1", max: String(MAX_COUNT), value: "100", required: true });
  const seed = h("input", { name: "seed", type: "number", min: "0", value: "42" });
  const status = h("div", { "aria-live": "polite", className: "status" });
  const submit = h("button", { type: "submit" }, "Generate and download");
  const form = h(
    "form",
    // The checks below name the field and what to change; the browser's own bubbles would not.
    { className: "card", novalidate: true },
    field("Model", model),
    refs,
    field("Energies (GeV)", energies, "One value or min:max, drawn uniformly."),
    field("Angles (rad)", angles, "One value or min:max; variable-angle models only."),
    field("Count", count, `1 to ${MAX_COUNT} showers.`),
    field("Seed", seed, "The same seed, model and conditions give the same showers; 0 = random."),
    submit,
    status,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    status.replaceChildren();
    let body: Record<string, unknown>;
    try {
      const e = parseRange("Energies", energies.value, "GeV");
      if (!e) throw new Error("Give the energies in GeV, e.g. 10:200.");
      const a = parseRange("Angles", angles.value, "rad");
      const n = Number(count.value);
      if (!Number.isInteger(n) || n < 1 || n > MAX_COUNT) throw new Error(`Count ${count.value}: give a whole number from 1 to ${MAX_COUNT}.`);
      const s = seed.value.trim() === "" ? 0 : Number(seed.value);
      if (!Number.isInteger(s) || s < 0) throw new Error(`Seed ${seed.value}: give a whole number, 0 or more.`);
      const range: Record<string, unknown> = { energyGev: { min: e[0], max: e[1] }, count: String(n) };
      if (a) range.thetaRad = { min: a[0], max: a[1] };
      if (!model.value.trim()) throw new Error("Model: give name:version or name@alias.");
      body = { model: model.value.trim(), range, seed: String(s) };
    } catch (e) {
      status.append(errorBox((e as Error).message));
      return;
    }
    submit.disabled = true;
    status.append(h("p", {}, "Generating…"));
    try {
      const r = await request("POST", "/api/v1/generate", body);
      const blob = await r.blob();
      const name = /filename="?([^";]+)"?/.exec(r.headers.get("Content-Disposition") ?? "")?.[1] ?? `${String(body.model).replace(/[^A-Za-z0-9_.-]/g, "_")}.h5`;
      const url = URL.createObjectURL(blob);
      const a = h("a", { href: url, download: name }, `Save ${name} again`);
      a.click();
      status.replaceChildren(h("p", { className: "ok", "data-downloaded": name }, `Downloaded ${name} (${blob.size} bytes). `, a));
      setTimeout(() => URL.revokeObjectURL(url), 60000);
    } catch (e) {
      status.replaceChildren(errorBox((e as Error).message));
    } finally {
      submit.disabled = false;
    }
  });
  setMain("Generate", h("h1", {}, "Generate showers"), form);
  try {
    const all = await getJson<{ models?: ModelVersion[] }>("/api/v1/models?pageSize=200");
    for (const m of all.models ?? []) refs.append(h("option", { value: refOf(m) }));
  } catch {
    // typing the reference still works
  }
}
