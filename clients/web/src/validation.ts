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

/** Metric rows: value (per version) and the statistical floor (`<name>_null`) of the first. */
export function metricsTable(versions: { label: string; metrics: Record<string, number> }[]): HTMLTableElement {
  const names = new Set<string>();
  for (const v of versions) for (const k of Object.keys(v.metrics)) if (!k.endsWith("_null")) names.add(k);
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
