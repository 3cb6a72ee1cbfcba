// The catalog: model versions filtered by name, preset, tag, alias, dataset, owner and metric
// thresholds, sorted by any metric; the filters live in the URL so a search is a link.
import { enc, getJson, type ModelVersion, refOf } from "../api";
import { errorBox, field, h, link, num, setMain, table, when } from "../dom";
import type { Route } from "../main";

/** The metrics shown as columns, in this order, when versions carry them. */
export const KEY_METRICS = ["fom", "sf_mre", "mre_sampling_fraction", "eprof", "pos", "separation_power"];

const FILTERS = ["q", "preset", "tag", "alias", "dataset", "owner", "metric", "max", "sort", "archived", "page"] as const;

/** "5%" -> 0.05, "0.05" -> 0.05; NaN when it is not a number. */
export function parseThreshold(text: string): number {
  const t = text.trim();
  if (t.endsWith("%")) return Number(t.slice(0, -1)) / 100;
  return t === "" ? NaN : Number(t);
}

/** The API query of the form's filters; throws a message that says what to change. */
export function apiQuery(q: URLSearchParams): string {
  const p = new URLSearchParams();
  const copy = (from: string, to: string) => {
    const v = (q.get(from) ?? "").trim();
    if (v) p.set(to, v);
  };
  copy("q", "q");
  copy("preset", "modelPreset");
  copy("dataset", "dataset");
  copy("owner", "owner");
  copy("alias", "alias");
  const tag = (q.get("tag") ?? "").trim();
  if (tag) {
    if (!/^[^:=\s]+[:=].*$/.test(tag)) throw new Error(`Tag filter "${tag}": write it as key:value, e.g. campaign:2026.`);
    p.append("tags", tag.replace("=", ":"));
  }
  const metric = (q.get("metric") ?? "").trim();
  const maxText = (q.get("max") ?? "").trim();
  if (maxText) {
    const max = parseThreshold(maxText);
    if (!metric) throw new Error("A metric threshold needs a metric: choose one next to the value.");
    if (!Number.isFinite(max) || max < 0) throw new Error(`Threshold "${maxText}": give a number such as 0.05 or 5%.`);
    p.append("metricFilters", `${metric}<=${max}`);
  }
  const sort = (q.get("sort") ?? "").trim();
  if (sort) p.set("orderBy", sort === "created_at" ? "created_at" : `metric:${sort}`);
  if (q.get("archived") === "1") p.set("includeArchived", "true");
  copy("page", "pageToken");
  p.set("pageSize", "50");
  return p.toString();
}

/** A short text of a version's aliases and tags. */
function tagText(m: ModelVersion): string {
  return Object.entries(m.tags ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .join(", ");
}

export async function renderModels(route: Route): Promise<void> {
  const q = route.query;
  const input = (name: string, attrs: Record<string, string> = {}) =>
    h("input", { name, value: q.get(name) ?? "", ...attrs });
  const metricNames = new Set(KEY_METRICS);
  const metricSelect = (name: string, empty: string) => {
    const s = h("select", { name }, h("option", { value: "" }, empty));
    return s;
  };
  const metric = metricSelect("metric", "(none)");
  const sort = metricSelect("sort", "newest first");
  const form = h(
    "form",
    { className: "filters", role: "search", "aria-label": "Filter models" },
    field("Name contains", input("q", { type: "search", placeholder: "e.g. ele-25" })),
    field("Preset", input("preset", { placeholder: "3dgan-25, 3dgan-51, tiny" })),
    field("Tag", input("tag", { placeholder: "key:value" })),
    field("Alias", input("alias", { placeholder: "champion" })),
    field("Dataset", input("dataset", { placeholder: "ds-… or toymc:…" })),
    field("Owner", input("owner", { placeholder: "tenant" })),
    field("Metric", metric),
    field("at most", input("max", { placeholder: "0.05 or 5%", inputmode: "decimal" })),
    field("Sort by", sort),
    h(
      "div",
      { className: "field checkbox" },
      h("input", { type: "checkbox", id: "f-archived", name: "archived", value: "1", checked: q.get("archived") === "1" }),
      h("label", { for: "f-archived" }, "include archived"),
    ),
    h("div", { className: "actions" }, h("button", { type: "submit" }, "Search"), link("/models", "Clear")),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const data = new FormData(form);
    const next = new URLSearchParams();
    for (const key of FILTERS) {
      const v = String(data.get(key) ?? "").trim();
      if (v && key !== "page") next.set(key, v);
    }
    location.hash = `#/models?${next.toString()}`;
  });
  const results = h("section", { "aria-label": "Results", "aria-live": "polite" });
  setMain("Models", h("h1", {}, "Models"), form, results);

  let query: string;
  try {
    query = apiQuery(q);
  } catch (e) {
    results.append(errorBox((e as Error).message));
    fillMetricSelects([metric, sort], metricNames, q);
    return;
  }
  let answer: { models?: ModelVersion[]; nextPageToken?: string };
  try {
    answer = await getJson(`/api/v1/models?${query}`);
  } catch (e) {
    results.append(errorBox((e as Error).message));
    fillMetricSelects([metric, sort], metricNames, q);
    return;
  }
  let models = answer.models ?? [];
  // Owner and alias are also applied here, so they hold whichever of them the server filters on.
  const owner = (q.get("owner") ?? "").trim();
  const alias = (q.get("alias") ?? "").trim();
  if (owner) models = models.filter((m) => m.owner === owner);
  if (alias) models = models.filter((m) => (m.aliases ?? []).includes(alias));
  for (const m of models) for (const k of Object.keys(m.metrics ?? {})) if (!k.endsWith("_null")) metricNames.add(k);
  fillMetricSelects([metric, sort], metricNames, q);

  if (models.length === 0) {
    results.append(h("p", { className: "empty" }, "No model version matches these filters."));
    return;
  }
  const columns = KEY_METRICS.filter((k) => models.some((m) => m.metrics && k in m.metrics));
  const compare = h("button", { type: "button", disabled: true }, "Compare selected");
  const picked = new Set<string>();
  compare.addEventListener("click", () => {
    location.hash = `#/compare?refs=${[...picked].map(enc).join(",")}`;
  });
  const rows = models.map((m) => {
    const ref = refOf(m);
    const box = h("input", { type: "checkbox", "aria-label": `select ${ref} to compare`, value: ref });
    box.addEventListener("change", () => {
      if (box.checked) picked.add(ref);
      else picked.delete(ref);
      compare.disabled = picked.size < 2 || picked.size > 3;
      compare.textContent = picked.size > 3 ? "Compare (at most 3)" : "Compare selected";
    });
    return [
      box,
      link(`/models/${enc(m.name)}`, m.name),
      link(`/version/${enc(ref)}`, `v${m.version}`, { "data-ref": ref }),
      m.owner ?? "",
      m.lineage?.modelPreset ?? "",
      m.lineage?.dataset ?? "",
      (m.aliases ?? []).join(", "),
      tagText(m),
      ...columns.map((k) => num(m.metrics?.[k])),
      when(m.createdAt),
    ];
  });
  results.append(
    h("p", {}, `${models.length} version${models.length === 1 ? "" : "s"}`),
    h("div", { className: "scroll" }, table(["", "Model", "Version", "Owner", "Preset", "Dataset", "Aliases", "Tags", ...columns, "Created"], rows)),
    h("div", { className: "actions" }, compare),
  );
  results.querySelector("table")!.classList.add("models");
  if (answer.nextPageToken) {
    const next = new URLSearchParams(q);
    next.set("page", answer.nextPageToken);
    results.append(h("p", {}, link(`/models?${next.toString()}`, "Next page →")));
  }
}

function fillMetricSelects(selects: HTMLSelectElement[], names: Set<string>, q: URLSearchParams): void {
  for (const s of selects) {
    const chosen = q.get(s.name) ?? "";
    for (const name of [...names].sort()) s.append(h("option", { value: name, selected: name === chosen }, name));
    if (s.name === "sort") s.append(h("option", { value: "created_at", selected: chosen === "created_at" }, "created_at"));
  }
}
