// One model version: validation plots, metrics, hyper-parameters, dataset, lineage, checkpoint,
// how to generate from it, and (for its owner) aliases, tags and archiving.
import { ApiError, currentSession, enc, getJson, type ModelVersion, refOf, sendJson } from "../api";
import { bytes, errorBox, facts, field, h, link, num, setMain, table, when } from "../dom";
import type { Route } from "../main";
import { histogramPlot, LinePlot } from "../plots";
import { energyBins, fieldMetricsTable, find, histogramsOf, metricsTable, PER_BIN_PLOTS, SUMMARY_PLOTS } from "../validation";

export async function renderVersion(route: Route): Promise<void> {
  const ref = route.parts.join("/");
  let m: ModelVersion;
  try {
    m = await getJson<ModelVersion>(`/api/v1/models/${enc(ref)}`);
  } catch (e) {
    const msg = e instanceof ApiError && e.httpStatus === 404 ? `Model version ${ref} does not exist or is not visible to you.` : (e as Error).message;
    setMain("Not found", h("h1", {}, ref), errorBox(msg), h("p", {}, link("/models", "Back to the models")));
    return;
  }
  const self = refOf(m);
  const owner = currentSession()?.tenant === m.owner;
  const plots = h("section", { "aria-labelledby": "plots-h" }, h("h2", { id: "plots-h" }, "Validation: generated vs held-out Monte Carlo"));
  setMain(
    self,
    h("p", { className: "crumbs" }, link("/models", "Models"), " / ", link(`/models/${enc(m.name)}`, m.name)),
    h("h1", {}, self, " ", ...(m.aliases ?? []).map((a) => h("span", { className: "badge", "data-alias": a }, a)), m.status === "MODEL_STATUS_ARCHIVED" ? h("span", { className: "badge muted" }, "archived") : null),
    m.description ? h("p", {}, m.description) : null,
    h(
      "p",
      { className: "actions" },
      link(`/generate?model=${enc(self)}`, "Generate from this version", { className: "button" }),
      link(`/compare?refs=${enc(self)}`, "Compare with…", { className: "button secondary" }),
    ),
    h("div", { className: "grid" }, overview(m), usage(self, m)),
    owner ? ownerActions(m) : null,
    h("section", { "aria-labelledby": "metrics-h" }, h("h2", { id: "metrics-h" }, "Metrics"), metricsTable([{ label: self, metrics: m.metrics ?? {} }]), fieldMetricsTable([{ label: self, metrics: m.metrics ?? {} }])),
    plots,
    hyperParameters(m),
    await lineage(m),
  );
  const hists = await histogramsOf(m, self).catch(() => []);
  if (hists.length === 0) {
    plots.append(h("p", { className: "empty" }, "This version stores no validation histograms."));
  } else {
    drawValidation(plots, hists.length ? [{ label: self, hists }] : []);
  }
  if ((m.validationCurve ?? []).length > 0) {
    const curve = new LinePlot("validation_curve", "Validation curve: metrics by training step", "step", "metric");
    plots.append(h("h3", {}, "Validation curve"), curve.element);
    for (const p of m.validationCurve ?? []) {
      const pick: Record<string, number> = {};
      for (const k of ["fom", "sf_mre", "eprof", "pos"]) if (p.metrics?.[k] !== undefined) pick[k] = p.metrics[k];
      curve.append(Number(p.step ?? 0), pick);
    }
  }
}

/** Draws the summary plots and, per energy bin, the per-bin plots of one or more versions. */
export function drawValidation(into: HTMLElement, versions: { label: string; hists: import("../api").Histogram[] }[]): void {
  const base = versions[0].hists;
  const summary = h("div", { className: "plots" });
  for (const name of SUMMARY_PLOTS) {
    const overlays = versions.flatMap((v) => {
      const x = find(v.hists, name);
      return x ? [{ label: v.label, histogram: x }] : [];
    });
    if (overlays.length) summary.append(histogramPlot(name, overlays));
  }
  if (summary.childElementCount) into.append(summary);
  for (const bin of energyBins(base)) {
    const row = h("div", { className: "plots" });
    for (const name of PER_BIN_PLOTS) {
      const overlays = versions.flatMap((v) => {
        const x = find(v.hists, name, bin);
        return x ? [{ label: v.label, histogram: x }] : [];
      });
      if (overlays.length) row.append(histogramPlot(`${name}|${bin}`, overlays));
    }
    if (row.childElementCount) into.append(h("h3", {}, `Energy bin ${bin}`), row);
  }
}

/** "80–120 GeV: fom 0.1 (MC floor 0.02), trained 140–180 GeV: fom 0.05 (…)", or "—". */
export function leftOutText(m: ModelVersion): string {
  const hp = m.lineage?.hyperParameters ?? {};
  const band = hp["left_out_energy_gev"];
  if (!band) return "—";
  const fom = (prefix: string) => {
    const v = m.metrics?.[`${prefix}fom`];
    return v === undefined ? "not scored" : `fom ${num(v)} (MC floor ${num(m.metrics?.[`${prefix}fom_null`])})`;
  };
  const control = hp["left_out_control_energy_gev"];
  return `${band.replace("-", "–")} GeV not trained on: ${fom("left_out_")}; ` + (control ? `trained ${control.replace("-", "–")} GeV: ${fom("left_out_control_")}` : "no control band");
}

function overview(m: ModelVersion): HTMLElement {
  const e = m.energyRangeGev;
  const t = m.thetaRangeRad;
  return h(
    "section",
    { "aria-labelledby": "overview-h" },
    h("h2", { id: "overview-h" }, "Overview"),
    facts([
      ["Owner", m.owner ?? "—"],
      ["Visibility", (m.visibility ?? "").replace("VISIBILITY_", "").toLowerCase() || "private"],
      ["Preset", m.lineage?.modelPreset ?? "—"],
      ["Particle", (m.particle ?? "").replace("PARTICLE_", "").toLowerCase() || "—"],
      ["Energy range", e ? `${num(e.min)}–${num(e.max)} GeV` : "—"],
      ["Angle range", t && t.max ? `${num(t.min)}–${num(t.max)} rad` : "fixed: normal incidence only"],
      ["Left out", h("span", { "data-fact": "left-out" }, leftOutText(m))],
      ["Tags", Object.entries(m.tags ?? {}).map(([k, v]) => `${k}=${v}`).join(", ") || "—"],
      ["Created", when(m.createdAt)],
      ["Checkpoint", h("span", { "data-fact": "checkpoint" }, m.lineage?.checkpointStep !== undefined
        ? `epoch ${m.lineage?.checkpointEpoch ?? 0}, step ${m.lineage.checkpointStep}`
        : "—")],
      ["Checkpoint size", bytes(m.checkpointSizeBytes)],
      ["Checkpoint sha256", h("code", { className: "hash" }, m.checkpointSha256 ?? "—")],
      ["Code version", m.lineage?.codeVersion ?? "—"],
    ]),
  );
}

/** The CLI and Python lines for 1000 showers over the version's training energy range. */
function usage(ref: string, m: ModelVersion): HTMLElement {
  const lo = m.energyRangeGev?.min ?? 10;
  const hi = m.energyRangeGev?.max ?? 200;
  const cli = `gantry generate ${ref} --energy ${num(lo, 6)}:${num(hi, 6)} --count 1000 --seed 42 --out showers.h5`;
  const py = `import gantry_client\nclient = gantry_client.connect()\nclient.generate("${ref}", energies=(${num(lo, 6)}, ${num(hi, 6)}), count=1000, seed=42).to_hdf5("showers.h5")`;
  return h(
    "section",
    { "aria-labelledby": "usage-h" },
    h("h2", { id: "usage-h" }, "Generate from it"),
    h("h3", {}, "CLI"),
    h("pre", { "data-usage": "cli" }, h("code", {}, cli)),
    h("h3", {}, "Python"),
    h("pre", { "data-usage": "python" }, h("code", {}, py)),
    modelCard(ref, m),
  );
}

/** The model card as a download (what a detector simulation needs to use an export of it). */
function modelCard(ref: string, m: ModelVersion): HTMLElement {
  if (!m.modelCardJson) {
    return h("p", { className: "empty", "data-card": "none" }, "No model card: this version has no recorded generator interface (a baseline).");
  }
  const url = URL.createObjectURL(new Blob([m.modelCardJson + "\n"], { type: "application/json" }));
  return h(
    "p",
    {},
    h("a", { href: url, download: `${ref.replace(":", "-")}.card.json`, "data-card": "download", className: "button secondary" }, "Download the model card (JSON)"),
    ` — the interface, validity domain, provenance and metrics; an export's card adds its file (gantry models export ${ref} --format onnx).`,
    h("details", {}, h("summary", {}, "Show the model card"), h("pre", { "data-card": "json" }, h("code", {}, JSON.stringify(JSON.parse(m.modelCardJson), null, 2)))),
  );
}

function hyperParameters(m: ModelVersion): HTMLElement {
  const hp = Object.entries(m.lineage?.hyperParameters ?? {}).sort(([a], [b]) => a.localeCompare(b));
  return h(
    "section",
    { "aria-labelledby": "hp-h" },
    h("h2", { id: "hp-h" }, "Hyper-parameters"),
    hp.length ? table(["name", "value"], hp.map(([k, v]) => [h("code", {}, k), v])) : h("p", { className: "empty" }, "None recorded."),
    m.lineage?.worldSize ? h("p", {}, `Trained on ${m.lineage.worldSize} rank${m.lineage.worldSize === 1 ? "" : "s"}.`) : null,
  );
}

/** dataset -> job -> (parent ->) this version -> the versions fine-tuned from it. */
async function lineage(m: ModelVersion): Promise<HTMLElement> {
  const self = refOf(m);
  const l = m.lineage ?? {};
  let children: ModelVersion[] = [];
  try {
    const parent = m.owner ? `${m.owner}/${self}` : self;
    const found = await getJson<{ models?: ModelVersion[] }>(
      `/api/v1/models?fineTunedFrom=${encodeURIComponent(parent)}&includeArchived=true&pageSize=100`,
    );
    children = found.models ?? [];
  } catch {
    // the chain without children is still worth showing
  }
  const chain = h(
    "ol",
    { className: "lineage" },
    h("li", {}, h("span", { className: "kind" }, "dataset"), " ", h("code", {}, l.dataset || "—"), l.datasetSha256 ? h("div", { className: "hash" }, `sha256 ${l.datasetSha256}`) : null),
    h("li", {}, h("span", { className: "kind" }, "job"), " ", l.jobId ? link(`/jobs/${enc(l.jobId)}`, l.jobId) : "—"),
    l.parentModel ? h("li", {}, h("span", { className: "kind" }, "fine-tuned from"), " ", link(`/version/${enc(l.parentModel)}`, l.parentModel)) : null,
    h("li", {}, h("span", { className: "kind" }, "model"), " ", h("strong", {}, self)),
    h(
      "li",
      {},
      h("span", { className: "kind" }, "fine-tuned into"),
      " ",
      children.length ? h("ul", {}, ...children.map((c) => h("li", {}, link(`/version/${enc(refOf(c))}`, refOf(c))))) : "none yet",
    ),
  );
  return h("section", { "aria-labelledby": "lineage-h" }, h("h2", { id: "lineage-h" }, "Lineage"), chain);
}

/** Alias, tag and archive forms; the server checks ownership again on every write. */
function ownerActions(m: ModelVersion): HTMLElement {
  const self = refOf(m);
  const status = h("div", { "aria-live": "polite", className: "status" });
  const done = (what: string) => () => {
    status.replaceChildren(h("p", { className: "ok" }, what));
    setTimeout(() => window.dispatchEvent(new HashChangeEvent("hashchange")), 400);
  };
  const fail = (e: unknown) => status.replaceChildren(errorBox((e as Error).message));

  const alias = h("input", { name: "alias", placeholder: "champion", required: true, pattern: "[a-z][a-z0-9_\\-]{0,62}", title: "a lower-case letter, then letters, digits, _ or -" });
  const aliasForm = h("form", { className: "inline" }, field("Point alias at this version", alias), h("button", { type: "submit" }, "Set alias"));
  aliasForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    sendJson("POST", `/api/v1/models/${enc(m.name)}/aliases`, { name: m.name, alias: alias.value.trim(), version: m.version })
      .then(done(`Alias ${alias.value.trim()} now points at ${self}.`))
      .catch(fail);
  });
  const removeAlias = (a: string) =>
    h(
      "button",
      {
        type: "button",
        className: "secondary",
        onclick: () => sendJson("DELETE", `/api/v1/models/${enc(m.name)}/aliases/${enc(a)}`).then(done(`Alias ${a} removed.`)).catch(fail),
      },
      `Remove alias ${a}`,
    );

  const tag = h("input", { name: "tag", placeholder: "key=value", required: true });
  const tagForm = h("form", { className: "inline" }, field("Set a tag", tag), h("button", { type: "submit" }, "Set tag"));
  tagForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const [k, ...rest] = tag.value.split("=");
    if (!k.trim() || rest.length === 0) {
      fail(new Error("Write the tag as key=value."));
      return;
    }
    sendJson("POST", `/api/v1/models/${enc(self)}:setTags`, { model: self, set: { [k.trim()]: rest.join("=").trim() } })
      .then(done(`Tag ${k.trim()} set.`))
      .catch(fail);
  });
  const removeTag = (k: string) =>
    h(
      "button",
      { type: "button", className: "secondary", onclick: () => sendJson("POST", `/api/v1/models/${enc(self)}:setTags`, { model: self, remove: [k] }).then(done(`Tag ${k} removed.`)).catch(fail) },
      `Remove tag ${k}`,
    );
  const archive = h(
    "button",
    {
      type: "button",
      className: "danger",
      onclick: () => {
        if (!confirm(`Archive ${self}? It stays in the lineage but can no longer be generated from.`)) return;
        sendJson("POST", `/api/v1/models/${enc(self)}:archive`, { model: self }).then(done(`${self} archived.`)).catch(fail);
      },
    },
    "Archive this version",
  );
  return h(
    "section",
    { className: "card", "aria-labelledby": "owner-h" },
    h("h2", { id: "owner-h" }, "Manage (owner)"),
    aliasForm,
    h("div", { className: "actions" }, ...(m.aliases ?? []).map(removeAlias)),
    tagForm,
    h("div", { className: "actions" }, ...Object.keys(m.tags ?? {}).map(removeTag)),
    m.status === "MODEL_STATUS_ARCHIVED" ? null : h("div", { className: "actions" }, archive),
    status,
  );
}
