// Training jobs with their state and progress.
import { enc, getJson, type Job } from "../api";
import { errorBox, field, h, link, num, setMain, table, when } from "../dom";
import type { Route } from "../main";

export const STATES = ["QUEUED", "PLACING", "RUNNING", "RESTARTING", "SUCCEEDED", "FAILED", "CANCELLING", "CANCELLED"];

export function stateName(s: string | undefined): string {
  return (s ?? "JOB_STATE_UNSPECIFIED").replace("JOB_STATE_", "").toLowerCase();
}

export function progressText(j: Job): string {
  const p = j.progress;
  if (!p || !p.epochs) return "—";
  return `epoch ${p.epoch ?? 0}/${p.epochs}, step ${p.step ?? 0}`;
}

export async function renderJobs(route: Route): Promise<void> {
  const state = route.query.get("state") ?? "";
  const select = h("select", { name: "state" }, h("option", { value: "" }, "any"), ...STATES.map((s) => h("option", { value: s, selected: s === state }, s.toLowerCase())));
  const form = h("form", { className: "inline" }, field("State", select), h("button", { type: "submit" }, "Filter"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    location.hash = select.value ? `#/jobs?state=${select.value}` : "#/jobs";
  });
  const out = h("div", { "aria-live": "polite" });
  setMain("Jobs", h("h1", {}, "Jobs"), form, out);
  const params = new URLSearchParams({ pageSize: "100" });
  if (state) params.set("state", `JOB_STATE_${state}`);
  const page = route.query.get("page");
  if (page) params.set("pageToken", page);
  let answer: { jobs?: Job[]; nextPageToken?: string };
  try {
    answer = await getJson(`/api/v1/jobs?${params}`);
  } catch (e) {
    out.append(errorBox((e as Error).message));
    return;
  }
  const jobs = answer.jobs ?? [];
  if (jobs.length === 0) {
    out.append(h("p", { className: "empty" }, "No jobs."));
    return;
  }
  out.append(
    h(
      "div",
      { className: "scroll" },
      table(
        ["Job", "Name", "State", "Progress", "Samples/s", "Model", "Created"],
        jobs.map((j) => [
          link(`/jobs/${enc(j.id)}`, j.id, { "data-job": j.id }),
          j.spec?.displayName ?? "",
          h("span", { className: `state ${stateName(j.state)}` }, stateName(j.state)),
          progressText(j),
          num(j.progress?.samplesPerSecond),
          j.modelRef ? link(`/version/${enc(j.modelRef)}`, j.modelRef) : "—",
          when(j.createdAt),
        ]),
      ),
    ),
  );
  if (answer.nextPageToken) {
    const next = new URLSearchParams(route.query);
    next.set("page", answer.nextPageToken);
    out.append(h("p", {}, link(`/jobs?${next}`, "Next page →")));
  }
}
