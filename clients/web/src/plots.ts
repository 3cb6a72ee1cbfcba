// Validation and training plots drawn with uPlot (canvas). Every plot's container carries
// data-plot (its name) and data-points (finite points drawn), which the browser tests read along
// with the canvas pixels.
import uPlot from "uplot";
import type { Histogram } from "./api";
import { h } from "./dom";

/** Colours of the compared versions (the first is the single-version colour); MC is grey. */
export const PALETTE = ["#c2410c", "#1d4ed8", "#15803d"];
const MC = "#6b7280";

/** A generated series of one version drawn against the shared Monte Carlo. */
export interface Overlay {
  label: string;
  histogram: Histogram;
}

const LOG_SCALE = /^profile_|cell_energy/;

function plotWidth(container: HTMLElement): number {
  return Math.max(300, Math.min(640, (container.clientWidth || 640) - 8));
}

function finite(v: number | null | undefined): v is number {
  return v !== null && v !== undefined && Number.isFinite(v);
}

/** x positions of a histogram's bins: bin centres for edges, x for point series, else indices. */
function xsOf(hist: Histogram, n: number): number[] {
  const e = hist.edges ?? [];
  if (e.length === n + 1) return Array.from({ length: n }, (_, i) => (e[i] + e[i + 1]) / 2);
  const x = hist.x ?? [];
  if (x.length === n) return x.slice();
  return Array.from({ length: n }, (_, i) => i);
}

/** A human title for a stored histogram name. */
export function titleOf(hist: Histogram): string {
  const names: Record<string, string> = {
    profile_z: "Longitudinal profile (depth)",
    profile_x: "Transverse profile (x)",
    profile_y: "Transverse profile (y)",
    sampling_fraction: "Sampling fraction",
    sampling_fraction_vs_energy: "Sampling fraction vs energy",
    sampling_fraction_per_bin: "Sampling fraction per energy bin",
    "feature/total_energy": "Energy sum",
    "feature/hits": "Hit count",
    sparsity: "Sparsity",
    cell_energy: "Cell-energy spectrum (log10 GeV)",
  };
  const base = names[hist.name] ?? hist.name;
  return hist.energyBin ? `${base}, ${hist.energyBin}` : base;
}

export interface PlotHandle {
  element: HTMLElement;
  plot: uPlot;
}

/**
 * The Monte Carlo reference (grey, stepped, with a ±1σ band when the errors are stored) and each
 * overlay's generated values (points joined by lines).
 */
export function histogramPlot(name: string, overlays: Overlay[]): HTMLElement {
  const first = overlays[0].histogram;
  const ref = first.reference ?? [];
  const n = Math.max(ref.length, ...overlays.map((o) => (o.histogram.generated ?? []).length));
  const xs = xsOf(first, n);
  const log = LOG_SCALE.test(first.name);
  const clean = (v: number | undefined): number | null => (finite(v) && (!log || v > 0) ? v : null);
  const refErr = first.referenceError ?? [];
  const data: (number | null)[][] = [xs, xs.map((_, i) => clean(ref[i]))];
  const series: uPlot.Series[] = [
    { label: first.xLabel || "x" },
    { label: "Monte Carlo", stroke: MC, fill: "rgba(107,114,128,0.18)", width: 1.5 },
  ];
  const bands: uPlot.Band[] = [];
  if (refErr.length === ref.length && ref.length > 0) {
    data.push(xs.map((_, i) => clean(ref[i] + refErr[i])), xs.map((_, i) => clean(ref[i] - refErr[i])));
    series.push(
      { label: "MC +1σ", stroke: "rgba(107,114,128,0.5)", width: 0.5, dash: [3, 3] },
      { label: "MC −1σ", stroke: "rgba(107,114,128,0.5)", width: 0.5, dash: [3, 3] },
    );
    bands.push({ series: [2, 3], fill: "rgba(107,114,128,0.2)" });
  }
  overlays.forEach((o, k) => {
    const gen = o.histogram.generated ?? [];
    data.push(xs.map((_, i) => clean(gen[i])));
    series.push({
      label: o.label,
      stroke: PALETTE[k % PALETTE.length],
      width: 1.5,
      points: { show: true, size: 5, fill: PALETTE[k % PALETTE.length] },
    });
  });
  const points = data.slice(1).reduce((s, col) => s + col.filter(finite).length, 0);
  const box = h("figure", { className: "plot", "data-plot": name, "data-points": points });
  box.appendChild(h("figcaption", {}, titleOf(first)));
  const opts: uPlot.Options = {
    width: 480,
    height: 260,
    series,
    bands,
    scales: { x: { time: false }, y: log ? { distr: 3 } : {} },
    axes: [{ label: first.xLabel || "" }, { label: first.name.startsWith("profile_") ? "mean deposit [GeV]" : "" , size: 60 }],
    legend: { live: false },
    cursor: { drag: { x: true, y: false } },
  };
  mount(box, opts, data);
  return box;
}

/** A line chart over x (training step) with one series per named column, growing with append(). */
export class LinePlot {
  readonly element: HTMLElement;
  private readonly xs: number[] = [];
  private readonly columns = new Map<string, (number | null)[]>();
  private plot: uPlot | null = null;
  private readonly wrapper: HTMLElement;

  constructor(
    name: string,
    title: string,
    private readonly xLabel: string,
    private readonly yLabel: string,
  ) {
    this.wrapper = h("div", { className: "plot-canvas" });
    this.element = h("figure", { className: "plot", "data-plot": name, "data-points": 0 }, h("figcaption", {}, title), this.wrapper);
  }

  /** Adds one x with its values (a missing name is a gap); redraws. Ignores x not above the last. */
  append(x: number, values: Record<string, number | undefined>): void {
    if (!Number.isFinite(x) || (this.xs.length > 0 && x <= this.xs[this.xs.length - 1])) return;
    let newColumn = false;
    for (const key of Object.keys(values)) {
      if (!this.columns.has(key) && finite(values[key])) {
        this.columns.set(key, this.xs.map(() => null));
        newColumn = true;
      }
    }
    this.xs.push(x);
    for (const [key, col] of this.columns) col.push(finite(values[key]) ? values[key]! : null);
    this.redraw(newColumn);
  }

  get size(): number {
    return this.xs.length;
  }

  private redraw(rebuild: boolean): void {
    const data: (number | null)[][] = [this.xs.slice(), ...[...this.columns.values()].map((c) => c.slice())];
    const points = data.slice(1).reduce((s, col) => s + col.filter(finite).length, 0);
    this.element.setAttribute("data-points", String(points));
    if (this.columns.size === 0) return;
    if (this.plot && !rebuild) {
      this.plot.setData(data as uPlot.AlignedData);
      return;
    }
    this.plot?.destroy();
    const series: uPlot.Series[] = [{ label: this.xLabel }];
    [...this.columns.keys()].forEach((key, k) =>
      series.push({ label: key, stroke: lineColour(k), width: 1.5, points: { show: this.xs.length < 60, size: 4 } }),
    );
    this.plot = new uPlot(
      {
        width: plotWidth(this.element.parentElement ?? this.element),
        height: 240,
        series,
        scales: { x: { time: false } },
        axes: [{ label: this.xLabel }, { label: this.yLabel, size: 60 }],
        legend: { live: false },
      },
      data as uPlot.AlignedData,
      this.wrapper,
    );
  }
}

function lineColour(k: number): string {
  return ["#c2410c", "#1d4ed8", "#15803d", "#7c3aed", "#be185d", "#0e7490", "#a16207"][k % 7];
}

/** Mounts the plot once the figure is in the document, at the width its column gives it. */
function mount(box: HTMLElement, opts: uPlot.Options, data: (number | null)[][]): void {
  const wrapper = h("div", { className: "plot-canvas" });
  box.appendChild(wrapper);
  requestAnimationFrame(() => {
    new uPlot({ ...opts, width: plotWidth(box.parentElement ?? box) }, data as uPlot.AlignedData, wrapper);
  });
}
