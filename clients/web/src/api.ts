// The JSON API of gantry-server's HTTP listener (docs/API.md "HTTP API"): protobuf JSON mapping of
// the gRPC messages, a session cookie, and the CSRF token in X-CSRF-Token on every write.

export interface Histogram {
  name: string;
  xLabel?: string;
  edges?: number[];
  reference?: number[];
  generated?: number[];
  energyBin?: string;
  referenceError?: number[];
  generatedError?: number[];
  x?: number[];
}

export interface Lineage {
  jobId?: string;
  dataset?: string;
  datasetSha256?: string;
  hyperParameters?: Record<string, string>;
  worldSize?: number;
  codeVersion?: string;
  parentModel?: string;
  modelPreset?: string;
  checkpointStep?: string | number;
  checkpointEpoch?: number;
}

export interface ValidationPoint {
  epoch?: number;
  step?: string | number;
  metrics?: Record<string, number>;
}

export interface ModelVersion {
  name: string;
  version: number;
  owner?: string;
  visibility?: string;
  status?: string;
  description?: string;
  tags?: Record<string, string>;
  aliases?: string[];
  lineage?: Lineage;
  metrics?: Record<string, number>;
  histograms?: Histogram[];
  checkpointSha256?: string;
  checkpointSizeBytes?: string;
  createdAt?: string;
  particle?: string;
  energyRangeGev?: { min?: number; max?: number };
  thetaRangeRad?: { min?: number; max?: number };
  validationCurve?: ValidationPoint[];
  /** The registry's model card (JSON text, docs/API.md "Model card"); absent for baselines. */
  modelCardJson?: string;
}

export interface Progress {
  epoch?: number;
  epochs?: number;
  step?: string | number;
  stepsPerEpoch?: string | number;
  losses?: Record<string, number>;
  samplesPerSecond?: number;
  etaSeconds?: number;
  dataStallFraction?: number;
}

export interface Job {
  id: string;
  owner?: string;
  spec?: { displayName?: string; modelPreset?: string; dataset?: string; worldSize?: number; modelName?: string };
  state?: string;
  reason?: string;
  message?: string;
  createdAt?: string;
  startedAt?: string;
  finishedAt?: string;
  progress?: Progress;
  modelRef?: string;
  attempt?: number;
  restarts?: number;
  assignedWorkers?: string[];
  validationCurve?: ValidationPoint[];
}

export interface LogLine {
  rank?: number;
  level?: string;
  text?: string;
}

export interface JobEvent {
  sequence?: string | number;
  time?: string;
  stateChange?: { from?: string; to?: string; reason?: string; message?: string };
  progress?: Progress;
  log?: LogLine;
  checkpointSaved?: { epoch?: number; step?: string | number; sha256?: string; sizeBytes?: string };
  modelRegistered?: { modelRef?: string; metrics?: Record<string, number> };
  restart?: { reason?: string; message?: string; attempt?: number };
  validationPoint?: ValidationPoint;
}

export interface Session {
  tenant: string;
  csrfToken: string;
}

/** An error answer of the API: {code, status, message} with its HTTP status. */
export class ApiError extends Error {
  constructor(
    readonly httpStatus: number,
    readonly status: string,
    message: string,
  ) {
    super(message);
  }
}

let session: Session | null = null;

export function currentSession(): Session | null {
  return session;
}

/** Called with the route to come back to when a request finds no valid session. */
let onUnauthenticated: () => void = () => {};
export function setUnauthenticatedHandler(f: () => void): void {
  onUnauthenticated = f;
}

async function errorOf(r: Response): Promise<ApiError> {
  let status = r.statusText || "ERROR";
  let message = `HTTP ${r.status}`;
  try {
    const body = await r.json();
    if (body && typeof body.message === "string") message = body.message;
    if (body && typeof body.status === "string") status = body.status;
  } catch {
    // not JSON: keep the HTTP status line
  }
  return new ApiError(r.status, status, message);
}

/** Sends a request; writes carry the CSRF token. A 401 ends the session and goes to the login page. */
export async function request(method: string, path: string, body?: unknown): Promise<Response> {
  const headers: Record<string, string> = { Accept: "application/json" };
  const write = method !== "GET";
  // Writes always carry a JSON body (the server takes no other type), "{}" when there is nothing to say.
  if (write) headers["Content-Type"] = "application/json";
  if (write && session) headers["X-CSRF-Token"] = session.csrfToken;
  const r = await fetch(path, {
    method,
    headers,
    body: write ? JSON.stringify(body ?? {}) : undefined,
    credentials: "same-origin",
  });
  if (r.status === 401 && path !== "/api/v1/session") {
    session = null;
    onUnauthenticated();
  }
  if (!r.ok) throw await errorOf(r);
  return r;
}

export async function getJson<T>(path: string): Promise<T> {
  return (await request("GET", path)).json() as Promise<T>;
}

export async function sendJson<T>(method: string, path: string, body?: unknown): Promise<T> {
  const r = await request(method, path, body);
  const text = await r.text();
  return (text ? JSON.parse(text) : {}) as T;
}

/** The current session, or null when there is none (no redirect). */
export async function loadSession(): Promise<Session | null> {
  const r = await fetch("/api/v1/session", { credentials: "same-origin", headers: { Accept: "application/json" } });
  session = r.ok ? ((await r.json()) as Session) : null;
  return session;
}

export async function login(token: string): Promise<Session> {
  session = await sendJson<Session>("POST", "/api/v1/session", { token });
  return session;
}

export async function logout(): Promise<void> {
  try {
    await request("DELETE", "/api/v1/session");
  } finally {
    session = null;
  }
}

export function enc(s: string): string {
  return encodeURIComponent(s);
}

/** "name:version" of a model version. */
export function refOf(m: { name: string; version: number }): string {
  return `${m.name}:${m.version}`;
}
