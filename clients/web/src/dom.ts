// Small DOM helpers. Text from the server (names, tags, logs) only ever goes through textContent or
// attribute setters, never innerHTML: model names and log lines come from tenants and workers.

type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | null | undefined | EventListener>;

/** Creates an element; attributes named on* are listeners, false/null/undefined ones are left out. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value as EventListener);
    } else if (key === "className") {
      el.className = String(value);
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
  append(el, ...children);
  return el;
}

export function append(parent: Node, ...children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    parent.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
  }
}

/** Replaces the main area's content and moves focus there, so keyboard users land on the new page. */
export function setMain(title: string, ...children: Child[]): HTMLElement {
  const main = document.getElementById("main")!;
  main.replaceChildren();
  append(main, ...children);
  document.title = `${title} · gantry`;
  main.focus({ preventScroll: true });
  return main;
}

/** A link inside the app (hash route). */
export function link(route: string, text: Child, attrs: Attrs = {}): HTMLAnchorElement {
  return h("a", { href: `#${route}`, ...attrs }, text);
}

/** A labelled form control: <label for=id>text</label> + control. */
export function field(label: string, control: HTMLElement, hint?: string): HTMLElement {
  const id = control.id || `f-${Math.random().toString(36).slice(2, 9)}`;
  control.id = id;
  return h(
    "div",
    { className: "field" },
    h("label", { for: id }, label),
    control,
    hint ? h("small", { className: "hint" }, hint) : null,
  );
}

export function table(headers: Child[], rows: Child[][], caption?: string): HTMLTableElement {
  return h(
    "table",
    {},
    caption ? h("caption", {}, caption) : null,
    h("thead", {}, h("tr", {}, ...headers.map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, ...rows.map((r) => h("tr", {}, ...r.map((x) => h("td", {}, x))))),
  );
}

/** A definition list from label/value pairs. */
export function facts(pairs: [string, Child][]): HTMLDListElement {
  const dl = h("dl", { className: "facts" });
  for (const [k, v] of pairs) append(dl, h("dt", {}, k), h("dd", {}, v));
  return dl;
}

export function errorBox(message: string): HTMLElement {
  return h("p", { className: "error", role: "alert" }, message);
}

/** A number with 3 significant digits (metrics), or "—" when missing. */
export function num(x: number | undefined | null, digits = 3): string {
  if (x === undefined || x === null || !Number.isFinite(x)) return "—";
  if (x !== 0 && (Math.abs(x) < 1e-3 || Math.abs(x) >= 1e6)) return x.toExponential(digits - 1);
  return Number(x.toPrecision(digits)).toString();
}

export function bytes(n: number | string | undefined): string {
  const v = Number(n ?? 0);
  if (!Number.isFinite(v) || v <= 0) return "—";
  const units = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  let x = v;
  while (x >= 1024 && i < units.length - 1) {
    x /= 1024;
    i++;
  }
  return `${i === 0 ? x : x.toFixed(1)} ${units[i]}`;
}

export function when(ts: string | undefined): string {
  if (!ts) return "—";
  const d = new Date(ts);
  return Number.isNaN(d.getTime()) ? ts : d.toISOString().replace("T", " ").slice(0, 19) + " UTC";
}
