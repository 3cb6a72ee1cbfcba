// Two or three versions on the same plots and in one metrics table.
import { enc, getJson, type Histogram, type ModelVersion, refOf } from "../api";
import { errorBox, field, h, setMain } from "../dom";
import type { Route } from "../main";
import { PALETTE } from "../plots";
import { fieldMetricsTable, histogramsOf, metricsTable } from "../validation";
import { drawValidation } from "./version";

export async function renderCompare(route: Route): Promise<void> {
  const refs = (route.query.get("refs") ?? "")
    .split(",")
    .map((r) => r.trim())
    .filter(Boolean);
  const input = h("input", { name: "refs", value: refs.join(", "), placeholder: "ele-25:3, ele-25:4", required: true });
  const form = h(
    "form",
    { className: "inline" },
    field("Versions to compare (2 or 3, name:version or name@alias)", input),
    h("button", { type: "submit" }, "Compare"),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const list = input.value.split(/[,\s]+/).filter(Boolean);
    location.hash = `#/compare?refs=${list.map(enc).join(",")}`;
  });
  const out = h("div", {});
  setMain("Compare", h("h1", {}, "Compare versions"), form, out);
  if (refs.length < 2) {
    out.append(h("p", { className: "hint" }, "Add one or two more versions, separated by commas."));
    input.focus();
    return;
  }
  if (refs.length > 3) {
    out.append(errorBox(`Give 2 or 3 versions to compare; ${refs.length} given.`));
    return;
  }
  let versions: { m: ModelVersion; hists: Histogram[] }[];
  try {
    versions = await Promise.all(
      refs.map(async (r) => {
        const m = await getJson<ModelVersion>(`/api/v1/models/${enc(r)}`);
        return { m, hists: await histogramsOf(m, refOf(m)) };
      }),
    );
  } catch (e) {
    out.append(errorBox((e as Error).message));
    return;
  }
  const legend = h(
    "ul",
    { className: "legend" },
    h("li", {}, h("span", { className: "swatch mc" }), "Monte Carlo (of ", refOf(versions[0].m), ")"),
    ...versions.map((v, k) => h("li", {}, h("span", { className: "swatch", "data-colour": String(k) }), h("a", { href: `#/version/${enc(refOf(v.m))}` }, refOf(v.m)), ` · ${v.m.lineage?.dataset ?? ""}`)),
  );
  versions.forEach((_, k) => legend.querySelectorAll<HTMLElement>(`[data-colour="${k}"]`).forEach((s) => (s.style.background = PALETTE[k])));
  const plots = h("section", { "aria-labelledby": "cmp-plots" }, h("h2", { id: "cmp-plots" }, "Validation plots"));
  out.append(
    legend,
    h("section", { "aria-labelledby": "cmp-metrics" }, h("h2", { id: "cmp-metrics" }, "Metrics"), metricsTable(versions.map((v) => ({ label: refOf(v.m), metrics: v.m.metrics ?? {} }))), fieldMetricsTable(versions.map((v) => ({ label: refOf(v.m), metrics: v.m.metrics ?? {} })))),
    plots,
  );
  if (versions.every((v) => v.hists.length === 0)) {
    plots.append(h("p", { className: "empty" }, "None of these versions stores validation histograms."));
    return;
  }
  drawValidation(plots, versions.map((v) => ({ label: refOf(v.m), hists: v.hists })));
}
