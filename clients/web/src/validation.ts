// Which stored histograms a version page and the comparison draw, and how they are grouped.
import { getJson, enc, type Histogram, type ModelVersion } from "./api";
import { h, num, table } from "./dom";

/** Drawn once per version: across energy bins. */
export const SUMMARY_PLOTS = ["sampling_fraction_vs_energy"];
/** Drawn for every energy bin: profiles, energy sum, sampling fraction. */
export const PER_BIN_PLOTS = ["profile_z", "profile_x", "profile_y", "feature/total_energy", "sampling_fraction"];

/** A version's histograms: GetModel carries them; the /validation route is asked when it does not. */
export async function histogramsOf(m: ModelVersion, ref: string): Promise<Histogram[]> {
  if (m.histograms && m.histograms.length > 0) return m.histograms;
  const v = await getJson<{ histograms?: Histogram[] }>(`/api/v1/models/${enc(ref)}/validation`);
  return v.histograms ?? [];
}

/** The energy bins in the order the histograms list them. */
export function energyBins(hists: Histogram[]): string[] {
  const bins: string[] = [];
  for (const x of hists) if (x.energyBin && !bins.includes(x.energyBin)) bins.push(x.energyBin);
  return bins;
}

export function find(hists: Histogram[], name: string, bin = ""): Histogram | undefined {
  return hists.find((x) => x.name === name && (x.energyBin ?? "") === bin);
}

/** True for a field-standard metric or one of its companions (`_floor`, `_spread`, event counts). */
export function isFieldMetric(metrics: Record<string, number>, key: string): boolean {
  if (["field_events", "field_cell_events", "nonzero_cells_reference", "nonzero_cells_generated"].includes(key)) return true;
  const base = key.replace(/_floor$/, "").replace(/_spread$/, "");
  return `${base}_floor` in metrics;
}

/**
 * The field-standard metrics (classifier AUCs, Fréchet distance, separation power per high-level
 * feature, ratios): value ± its spread over classifier seeds, per version, and the Monte Carlo
 * floor (the same metric between two Monte Carlo samples) of each. Null when none has them.
 */
export function fieldMetricsTable(versions: { label: string; metrics: Record<string, number> }[]): HTMLTableElement | null {
  const names = new Set<string>();
  for (const v of versions) {
    for (const k of Object.keys(v.metrics)) if (!k.endsWith("_floor") && !k.endsWith("_spread") && `${k}_floor` in v.metrics) names.add(k);
  }
  if (names.size === 0) return null;
  const withSpread = (m: Record<string, number>, k: string) =>
    m[k] === undefined ? "" : m[`${k}_spread`] === undefined ? num(m[k]) : `${num(m[k])} ± ${num(m[`${k}_spread`])}`;
  const rows = [...names].sort().map((name) => {
    const cells: (string | HTMLElement)[] = [h("code", {}, name)];
    for (const v of versions) cells.push(withSpread(v.metrics, name), withSpread(v.metrics, `${name}_floor`));
    return cells;
  });
  const headers: string[] = ["metric"];
  for (const v of versions) headers.push(versions.length > 1 ? v.label : "value", "MC vs MC");
  const events = versions[0].metrics["field_events"];
  const t = table(headers, rows, `Field-standard metrics${events ? ` (${events} events per sample)` : ""}: an AUC of 0.5 and ratios of 1 cannot be told from the Monte Carlo; each row's floor is the same metric between two Monte Carlo samples`);
  t.classList.add("metrics");
  return t;
}

/** Metric rows: value (per version) and the statistical floor (`<name>_null`) of the first. */
export function metricsTable(versions: { label: string; metrics: Record<string, number> }[]): HTMLTableElement {
  const names = new Set<string>();
  for (const v of versions) for (const k of Object.keys(v.metrics)) if (!k.endsWith("_null") && !isFieldMetric(v.metrics, k)) names.add(k);
  const ordered = [...names].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  const rows = ordered.map((name) => {
    const cells: (string | HTMLElement)[] = [h("code", {}, name)];
    for (const v of versions) {
      const value = v.metrics[name];
      const floor = v.metrics[`${name}_null`];
      const atFloor = floor !== undefined && value !== undefined && value <= 2 * floor;
      cells.push(h("span", { className: atFloor ? "at-floor" : "" }, num(value)));
      cells.push(num(floor));
    }
    return cells;
  });
  const headers: string[] = ["metric"];
  for (const v of versions) headers.push(versions.length > 1 ? v.label : "value", versions.length > 1 ? "null" : "null floor");
  const t = table(headers, rows, "Validation metrics (lower is better; values within 2× their statistical floor are marked ✓)");
  t.classList.add("metrics");
  return t;
}

function rank(name: string): number {
  const i = ["fom", "sf_mre", "mre_sampling_fraction", "eprof", "eprof_longitudinal", "eprof_transverse", "pos", "separation_power"].indexOf(name);
  return i < 0 ? 100 : i;
}
