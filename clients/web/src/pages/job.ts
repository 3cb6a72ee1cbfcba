// One job: live loss curves, samples/s, data stall, events and logs, streamed (Server-Sent Events
// from WatchJob) while it runs.
import { ApiError, enc, getJson, type Job, type JobEvent, type LogLine, type Progress } from "../api";
import { errorBox, facts, h, link, num, setMain, when } from "../dom";
import type { Route } from "../main";
import { LinePlot } from "../plots";
import { progressText, stateName } from "./jobs";

const TERMINAL = new Set(["JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"]);
const MAX_LOG_LINES = 2000;

/** "2 h 05 min", "4 min 10 s", "—". */
function duration(seconds: number | undefined): string {
  if (!seconds || !Number.isFinite(seconds) || seconds <= 0) return "—";
  const s = Math.round(seconds);
  if (s >= 3600) return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")} min`;
  if (s >= 60) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${s} s`;
}

/** A progress point out of whatever the metrics route stores: a Progress, or an object holding one. */
function progressOf(x: unknown): Progress | null {
  if (!x || typeof x !== "object") return null;
  const o = x as Record<string, unknown>;
  const p = (o.progress && typeof o.progress === "object" ? o.progress : o) as Progress;
  return p.step !== undefined ? p : null;
}

export async function renderJob(route: Route): Promise<void> {
  const id = route.parts.join("/");
  let job: Job;
  try {
    job = await getJson<Job>(`/api/v1/jobs/${enc(id)}`);
  } catch (e) {
    const msg = e instanceof ApiError && e.httpStatus === 404 ? `Job ${id} does not exist or is not visible to you.` : (e as Error).message;
    setMain("Job", h("h1", {}, id), errorBox(msg), h("p", {}, link("/jobs", "Back to the jobs")));
    return;
  }
  const state = h("span", { className: `state ${stateName(job.state)}`, id: "job-state" }, stateName(job.state));
  const live = h("dl", { className: "facts live", "aria-live": "off" });
  const model = h("span", {}, job.modelRef ? link(`/version/${enc(job.modelRef)}`, job.modelRef) : "—");
  const losses = new LinePlot("loss_curve", "Losses by step", "step", "loss");
  const throughput = new LinePlot("throughput", "Samples per second and data stall", "step", "value");
  const events = h("ol", { className: "events", "aria-label": "Events" });
  const logs = h("pre", { className: "logs", tabindex: "0", "aria-label": "Logs" });
  setMain(
    id,
    h("p", { className: "crumbs" }, link("/jobs", "Jobs"), " / ", id),
    h("h1", {}, job.spec?.displayName || id, " ", state),
    h(
      "div",
      { className: "grid" },
      facts([
        ["Job", h("code", {}, job.id)],
        ["Preset", job.spec?.modelPreset ?? "—"],
        ["Dataset", h("code", {}, job.spec?.dataset ?? "—")],
        ["Ranks", String(job.spec?.worldSize ?? 1)],
        ["Created", when(job.createdAt)],
        ["Model", model],
      ]),
      live,
    ),
    h("div", { className: "plots" }, losses.element, throughput.element),
    h("section", { "aria-labelledby": "ev-h" }, h("h2", { id: "ev-h" }, "Events"), events),
    h("section", { "aria-labelledby": "log-h" }, h("h2", { id: "log-h" }, "Logs"), logs),
  );

  const showProgress = (p: Progress) => {
    const step = Number(p.step ?? NaN);
    losses.append(step, p.losses ?? {});
    throughput.append(step, { "samples/s": p.samplesPerSecond, "data stall %": p.dataStallFraction === undefined ? undefined : 100 * p.dataStallFraction });
    live.replaceChildren(
      ...[
        ["Progress", progressText({ ...job, progress: p })],
        ["Samples/s", num(p.samplesPerSecond)],
        ["Data stall", p.dataStallFraction === undefined ? "—" : `${num(100 * p.dataStallFraction)}%`],
        ["ETA", duration(p.etaSeconds)],
      ].flatMap(([k, v]) => [h("dt", {}, k), h("dd", { "data-live": k }, v)]),
    );
  };
  const addLog = (l: LogLine) => {
    logs.append(`[rank ${l.rank ?? 0}] ${l.level ?? "INFO"} ${l.text ?? ""}\n`);
    while (logs.childNodes.length > MAX_LOG_LINES) logs.firstChild?.remove();
  };
  const addEvent = (text: string, time?: string) => events.append(h("li", {}, h("time", {}, when(time)), " ", text));

  // What the server stored so far, then the live stream.
  try {
    const points = await getJson<unknown>(`/api/v1/jobs/${enc(id)}/metrics`);
    const list = Array.isArray(points) ? points : ((points as { points?: unknown[] })?.points ?? []);
    for (const x of list) {
      const p = progressOf(x);
      if (p) showProgress(p);
    }
  } catch {
    // the stream below fills the curves as well
  }
  if (job.progress) showProgress(job.progress);
  // The stream replays the job's events from the start (logs included); when the server refuses
  // it, the stored log tail is shown instead.
  const logTail = async () => {
    try {
      const tail = await getJson<{ lines?: LogLine[] }>(`/api/v1/jobs/${enc(id)}/logs?tail=200`);
      for (const l of tail.lines ?? []) addLog(l);
    } catch {
      // nothing more to show
    }
  };

  let lastSequence = 0;
  let ended = TERMINAL.has(job.state ?? "");
  let source: EventSource | null = null;
  const onEvent = (ev: JobEvent) => {
    const seq = Number(ev.sequence ?? 0);
    if (seq && seq <= lastSequence) return;
    lastSequence = seq || lastSequence;
    if (ev.progress) showProgress(ev.progress);
    if (ev.log) addLog(ev.log);
    if (ev.stateChange) {
      const to = ev.stateChange.to ?? "";
      state.textContent = stateName(to);
      state.className = `state ${stateName(to)}`;
      addEvent(`${stateName(ev.stateChange.from)} → ${stateName(to)}: ${ev.stateChange.reason ?? ""} ${ev.stateChange.message ?? ""}`, ev.time);
      if (TERMINAL.has(to)) {
        ended = true;
        source?.close();
      }
    }
    if (ev.checkpointSaved) addEvent(`checkpoint at epoch ${ev.checkpointSaved.epoch ?? 0}, step ${ev.checkpointSaved.step ?? 0}`, ev.time);
    if (ev.restart) addEvent(`restart (attempt ${ev.restart.attempt ?? 0}): ${ev.restart.reason ?? ""} ${ev.restart.message ?? ""}`, ev.time);
    if (ev.validationPoint) addEvent(`validated step ${ev.validationPoint.step ?? 0}: fom ${num(ev.validationPoint.metrics?.fom)}`, ev.time);
    if (ev.modelRegistered?.modelRef) {
      const ref = ev.modelRegistered.modelRef;
      model.replaceChildren(link(`/version/${enc(ref)}`, ref));
      addEvent(`registered ${ref}`, ev.time);
    }
  };
  const connect = () => {
    const query = lastSequence ? `?afterSequence=${lastSequence}` : "";
    source = new EventSource(`/api/v1/jobs/${enc(id)}/events${query}`);
    source.onmessage = (m) => {
      try {
        onEvent(JSON.parse(m.data) as JobEvent);
      } catch {
        // a malformed line is skipped, the stream goes on
      }
    };
    // The server's last message: "end" when the job ended, "error" with a status body when the
    // watch failed (e.g. the session ended).
    source.addEventListener("end", () => {
      ended = true;
      source?.close();
    });
    source.addEventListener("error", (m) => {
      source?.close();
      const data = (m as MessageEvent).data;
      if (typeof data === "string" && data) {
        ended = true;
        try {
          addEvent(`the live stream stopped: ${(JSON.parse(data) as { message?: string }).message ?? data}`);
        } catch {
          addEvent("the live stream stopped");
        }
        if (lastSequence === 0) void logTail();
        return;
      }
      // A dropped connection: reconnect while the job may still run.
      if (!ended) retry = window.setTimeout(connect, 2000);
    });
  };
  let retry = 0;
  connect();
  route.onLeave(() => {
    ended = true;
    window.clearTimeout(retry);
    source?.close();
  });
}
