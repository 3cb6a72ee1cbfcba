// The gantry web catalog: a single page whose routes live in the URL fragment (#/models, ...), so
// the server serves one index.html and every page is a real, bookmarkable link.
import "uplot/dist/uPlot.min.css";
import "./style.css";
import { currentSession, loadSession, logout, setUnauthenticatedHandler } from "./api";
import { errorBox, h, setMain } from "./dom";
import { renderCompare } from "./pages/compare";
import { renderGenerate } from "./pages/generate";
import { renderJob } from "./pages/job";
import { renderJobs } from "./pages/jobs";
import { renderLogin } from "./pages/login";
import { renderModel } from "./pages/model";
import { renderModels } from "./pages/models";
import { renderVersion } from "./pages/version";

/** What a page gets: the path segments after the route name and the fragment's query. */
export interface Route {
  parts: string[];
  query: URLSearchParams;
  /** Registers what to stop when the user leaves the page (event streams, timers). */
  onLeave(f: () => void): void;
}

type Page = (route: Route) => Promise<void>;

const pages: Record<string, Page> = {
  login: renderLogin,
  models: async (r) => (r.parts.length > 0 ? renderModel(r) : renderModels(r)),
  version: renderVersion,
  compare: renderCompare,
  jobs: async (r) => (r.parts.length > 0 ? renderJob(r) : renderJobs(r)),
  generate: renderGenerate,
};

let leaving: (() => void)[] = [];

function parseHash(): { name: string; parts: string[]; query: URLSearchParams } {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, query = ""] = raw.split("?", 2);
  const segments = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { name: segments[0] ?? "models", parts: segments.slice(1), query: new URLSearchParams(query) };
}

/** Sends the browser to the login page, remembering where it was. */
export function toLogin(): void {
  const here = location.hash.replace(/^#/, "");
  if (parseHash().name === "login") return;
  location.hash = `#/login?next=${encodeURIComponent(here || "/models")}`;
}

function showWho(): void {
  const who = document.getElementById("who")!;
  const s = currentSession();
  who.replaceChildren();
  if (!s) return;
  who.append(
    h("span", { "data-tenant": s.tenant }, `tenant ${s.tenant}`),
    " ",
    h(
      "button",
      {
        type: "button",
        className: "link-button",
        onclick: async () => {
          await logout().catch(() => undefined);
          toLogin();
          showWho();
        },
      },
      "Log out",
    ),
  );
}

async function route(): Promise<void> {
  for (const f of leaving) f();
  leaving = [];
  const { name, parts, query } = parseHash();
  const main = document.getElementById("main")!;
  main.removeAttribute("data-page");
  const page = pages[name];
  if (name !== "login" && !currentSession()) {
    await loadSession();
    if (!currentSession()) {
      toLogin();
      return;
    }
  }
  showWho();
  for (const a of document.querySelectorAll<HTMLAnchorElement>("header nav a")) {
    if (a.getAttribute("href") === `#/${name}`) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  if (!page) {
    setMain("Not found", h("h1", {}, "Not found"), errorBox(`There is no page "${name}".`));
    return;
  }
  try {
    await page({ parts, query, onLeave: (f) => leaving.push(f) });
  } catch (e) {
    setMain("Error", h("h1", {}, "Something went wrong"), errorBox((e as Error).message));
  }
  // Tells tests (and screen readers, through focus) that the page has finished loading.
  main.setAttribute("data-page", name);
}

setUnauthenticatedHandler(toLogin);
window.addEventListener("hashchange", () => void route());
window.addEventListener("DOMContentLoaded", () => {
  if (!location.hash) history.replaceState(null, "", "#/models");
  void route();
});
