// Asserts what gantry's rendered Kubernetes overlays must say beyond schema validity: the server's
// two ports and TLS probes, the worker flags from the downward API, the Secrets and TLS wired in, the
// NetworkPolicies (the worker port admits worker pods only) and, for the
// GPU overlay, accelerator requests, node selectors and tolerations per pool.
// usage: node check_rendered.mjs local|gpu-cloud RENDERED.yaml
// Prints one line per failed expectation and exits 1 if there is any.
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const { parseAllDocuments } = await import(
  pathToFileURL(path.join(here, "schema", "node_modules", "yaml", "dist", "index.js")).href);

const [overlay, file] = process.argv.slice(2);
if (!["local", "gpu-cloud"].includes(overlay) || !file) {
  console.error("usage: node check_rendered.mjs local|gpu-cloud RENDERED.yaml");
  process.exit(2);
}
const objects = parseAllDocuments(readFileSync(file, "utf8")).map((d) => d.toJS()).filter(Boolean);
let failures = 0;
function expect(condition, message) {
  if (!condition) {
    console.log(`${overlay}: ${message}`);
    failures++;
  }
}
const find = (kind, name) => objects.find((o) => o.kind === kind && o.metadata?.name === name);
const flag = (args, name) => (args ?? []).find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);

for (const object of objects) {
  expect(object.kind === "Namespace" || object.metadata?.namespace === "gantry",
         `${object.kind} ${object.metadata?.name} is not in namespace gantry`);
}

// gantry-server: tenants on port 50051 (--listen), the worker protocol on its own port 50052
// (--worker-listen); readiness on the whole server (needs PostgreSQL), liveness on a service that
// stays SERVING through a database outage (server/health_monitor.h: WorkerService, on the worker
// port).
const TENANT_PORT = 50051;
const WORKER_PORT = 50052;
const server = find("Deployment", "gantry-server");
expect(server, "no Deployment gantry-server");
const serverContainer = server?.spec.template.spec.containers[0];
const containerPort = (name) => serverContainer?.ports?.find((p) => p.name === name)?.containerPort;
expect(flag(serverContainer?.args, "listen") === `0.0.0.0:${TENANT_PORT}` && containerPort("grpc") === TENANT_PORT,
       `gantry-server does not serve tenants on --listen=0.0.0.0:${TENANT_PORT} (containerPort grpc)`);
expect(flag(serverContainer?.args, "worker-listen") === `0.0.0.0:${WORKER_PORT}` &&
       containerPort("worker-grpc") === WORKER_PORT,
       `gantry-server does not serve the worker protocol on --worker-listen=0.0.0.0:${WORKER_PORT} (containerPort worker-grpc)`);
// TLS: both listeners with the certificate of Secret gantry-tls; the probes run gantry-health-probe
// over TLS (the kubelet's gRPC probes cannot), trusting that Secret's CA.
const tlsVolume = server?.spec.template.spec.volumes?.find((v) => v.secret?.secretName === "gantry-tls");
const tlsDir = serverContainer?.volumeMounts?.find((m) => m.name === tlsVolume?.name)?.mountPath;
expect(tlsDir && flag(serverContainer.args, "tls-cert") === `${tlsDir}/tls.crt` &&
       flag(serverContainer.args, "tls-key") === `${tlsDir}/tls.key`,
       "gantry-server's --tls-cert/--tls-key are not tls.crt/tls.key of Secret gantry-tls");
expect(flag(serverContainer?.args, "tls-client-ca") === `${tlsDir}/ca.crt` &&
       flag(serverContainer.args, "worker-tls-name") === "gantry-worker",
       "gantry-server does not ask workers for certificates of its CA named gantry-worker " +
       "(--tls-client-ca, --worker-tls-name)");
const probe = (p) => p?.exec?.command ?? [];
const probes = (p, port, service) => {
  const c = probe(p);
  return c[0] === "gantry-health-probe" && c[1] === `127.0.0.1:${port}` &&
    (service ? c[2] === service : c[2] === "--ca-cert") && c[c.indexOf("--ca-cert") + 1] === `${tlsDir}/ca.crt`;
};
expect(probes(serverContainer?.readinessProbe, TENANT_PORT, ""),
       `gantry-server readiness is not gantry-health-probe over TLS on port ${TENANT_PORT}, service ""`);
expect(probes(serverContainer?.livenessProbe, WORKER_PORT, "gantry.v1.WorkerService"),
       `gantry-server liveness is not gantry-health-probe over TLS, gantry.v1.WorkerService on port ${WORKER_PORT}`);
// The tenant Service exposes the tenant port alone; the workers' Service the worker port alone.
const servicePorts = (name) => (find("Service", name)?.spec.ports ?? []).map((p) => [p.port, p.targetPort ?? p.port]);
expect(JSON.stringify(servicePorts("gantry-server")) === JSON.stringify([[TENANT_PORT, "grpc"]]),
       `Service gantry-server does not expose exactly port ${TENANT_PORT} -> grpc`);
expect(JSON.stringify(servicePorts("gantry-server-workers")) === JSON.stringify([[WORKER_PORT, "worker-grpc"]]),
       `Service gantry-server-workers does not expose exactly port ${WORKER_PORT} -> worker-grpc`);
const dbVolume = server?.spec.template.spec.volumes?.find((v) => v.secret?.secretName === "gantry-db");
const dbMount = serverContainer?.volumeMounts?.find((m) => m.name === dbVolume?.name);
expect(dbVolume?.secret.items?.some((i) => i.key === "dsn" && `${dbMount?.mountPath}/${i.path}` === flag(serverContainer.args, "db-file")),
       "gantry-server's --db-file is not the dsn key of Secret gantry-db");
expect(!serverContainer?.env?.some((e) => e.name === "GANTRY_DB"), "the DSN is in gantry-server's environment");
expect(server?.spec.template.spec.volumes?.some((v) => v.persistentVolumeClaim?.claimName === "gantry-blobs") &&
       serverContainer?.volumeMounts?.some((m) => m.name === "blobs" &&
                                          m.mountPath === flag(serverContainer.args, "data-dir")),
       "the blob store (--data-dir) is not on volume claim gantry-blobs");
expect(find("PersistentVolumeClaim", "gantry-blobs"), "no PersistentVolumeClaim gantry-blobs");
expect(find("Service", "gantry-server-workers")?.spec.publishNotReadyAddresses === true,
       "Service gantry-server-workers does not publish not-ready addresses");
for (const name of ["gantry-tokens", "gantry-db", "gantry-tls", "gantry-worker-tls"]) {
  expect(find("Secret", name), `no Secret ${name}`);
}
expect(Object.keys(find("Secret", "gantry-tokens")?.data ?? {}).sort().join() === "admin-token,join-token",
       "Secret gantry-tokens does not hold exactly admin-token and join-token");
expect(Object.keys(find("Secret", "gantry-tls")?.data ?? {}).sort().join() === "ca.crt,tls.crt,tls.key",
       "Secret gantry-tls does not hold exactly ca.crt, tls.crt and tls.key");
expect(Object.keys(find("Secret", "gantry-worker-tls")?.data ?? {}).sort().join() === "tls.crt,tls.key",
       "Secret gantry-worker-tls does not hold exactly tls.crt and tls.key");

// PostgreSQL: a StatefulSet with a volume claim, reachable from gantry-server only.
const postgres = find("StatefulSet", "gantry-postgres");
expect(postgres?.spec.volumeClaimTemplates?.length === 1, "PostgreSQL is not a StatefulSet with a volume claim");
const pgPolicy = find("NetworkPolicy", "gantry-postgres-ingress");
expect(pgPolicy?.spec.ingress?.length === 1 && pgPolicy.spec.ingress[0].from?.length === 1 &&
       pgPolicy.spec.ingress[0].from[0].podSelector?.matchLabels?.["app.kubernetes.io/name"] === "gantry-server",
       "PostgreSQL's NetworkPolicy does not admit gantry-server alone");
expect(find("NetworkPolicy", "gantry-default-deny-ingress")?.spec.ingress === undefined,
       "no default-deny ingress NetworkPolicy");
// Every ingress rule of every NetworkPolicy that selects the server's pods: the tenant port is
// admitted from anywhere; a rule that opens the worker port (by number, by name, in a range, or by
// naming no port) admits only peers that select gantry-worker pods (no namespaceSelector, no
// ipBlock), and there is one.
const serverLabels = server?.spec.template.metadata?.labels ?? {};
const selectsPods = (selector, labels) => !selector?.matchExpressions?.length &&
  Object.entries(selector?.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
const serverRules = objects.filter((o) => o.kind === "NetworkPolicy" && selectsPods(o.spec.podSelector, serverLabels))
  .flatMap((p) => (p.spec.ingress ?? []).map((rule) => ({ policy: p.metadata.name, rule })));
const opens = (rule, number, name) => !rule.ports?.length || rule.ports.some((p) =>
  (p.protocol ?? "TCP") === "TCP" && (p.port === undefined || p.port === number || p.port === name ||
                                      (typeof p.port === "number" && p.endPort >= number && p.port <= number)));
const onlyWorkers = (peer) => !peer.namespaceSelector && !peer.ipBlock &&
  peer.podSelector?.matchLabels?.["app.kubernetes.io/name"] === "gantry-worker" &&
  !peer.podSelector.matchExpressions?.length;
expect(serverRules.some(({ rule }) => opens(rule, TENANT_PORT, "grpc") && !rule.from?.length),
       `gantry-server's tenant port ${TENANT_PORT} is not admitted from anywhere`);
const workerPortRules = serverRules.filter(({ rule }) => opens(rule, WORKER_PORT, "worker-grpc"));
expect(workerPortRules.length > 0, `no NetworkPolicy admits worker pods to gantry-server's worker port ${WORKER_PORT}`);
for (const { policy, rule } of workerPortRules) {
  expect(rule.from?.length > 0 && rule.from.every(onlyWorkers),
         `NetworkPolicy ${policy} admits peers other than gantry-worker pods to gantry-server's worker port ${WORKER_PORT}`);
}
const workerPolicy = find("NetworkPolicy", "gantry-worker-ingress");
expect(workerPolicy?.spec.ingress?.every((rule) => rule.from?.length > 0 && rule.from.every(
           (peer) => ["gantry-worker", "gantry-server"].includes(peer.podSelector?.matchLabels?.["app.kubernetes.io/name"]) &&
                     !peer.namespaceSelector && !peer.ipBlock)),
       "workers admit peers other than gantry workers and gantry-server");

// Workers: DaemonSets, pod IP advertised, node name as worker name, rendezvous ports, join token.
const pools = objects.filter((o) => o.kind === "DaemonSet");
expect(pools.length === (overlay === "local" ? 1 : 2), `expected ${overlay === "local" ? 1 : 2} worker DaemonSet(s), found ${pools.length}`);
for (const pool of pools) {
  const spec = pool.spec.template.spec;
  const container = spec.containers[0];
  const env = Object.fromEntries((container.env ?? []).map((e) => [e.name, e.valueFrom?.fieldRef?.fieldPath]));
  const name = pool.metadata.name;
  expect(container.args?.[0] === "daemon", `${name}: not gantry-worker daemon`);
  expect(flag(container.args, "advertise-host") === "$(POD_IP)" && env.POD_IP === "status.podIP",
         `${name}: --advertise-host is not the pod IP from the downward API`);
  expect(flag(container.args, "name") === "$(NODE_NAME)" && env.NODE_NAME === "spec.nodeName",
         `${name}: --name is not the node name from the downward API`);
  expect(/^\d+-\d+$/.test(flag(container.args, "rendezvous-ports") ?? ""), `${name}: no --rendezvous-ports MIN-MAX`);
  expect(flag(container.args, "server") === `gantry-server-workers:${WORKER_PORT}`,
         `${name}: --server is not gantry-server-workers:${WORKER_PORT} (the worker port)`);
  expect(spec.volumes?.find((v) => v.name === "tokens")?.secret?.secretName === "gantry-tokens",
         `${name}: the join token is not from Secret gantry-tokens`);
  const caVolume = spec.volumes?.find((v) => v.secret?.secretName === "gantry-tls");
  const caDir = container.volumeMounts?.find((m) => m.name === caVolume?.name)?.mountPath;
  expect(caVolume && JSON.stringify(caVolume.secret.items?.map((i) => i.key)) === '["ca.crt"]' &&
         flag(container.args, "ca-cert") === `${caDir}/ca.crt`,
         `${name}: --ca-cert is not the CA of Secret gantry-tls (and only it: no server key on workers)`);
  const certVolume = spec.volumes?.find((v) => v.secret?.secretName === "gantry-worker-tls");
  const certDir = container.volumeMounts?.find((m) => m.name === certVolume?.name)?.mountPath;
  expect(certDir && flag(container.args, "tls-cert") === `${certDir}/tls.crt` &&
         flag(container.args, "tls-key") === `${certDir}/tls.key` &&
         !container.args.includes("--serve-plaintext"),
         `${name}: not serving and connecting with the certificate of Secret gantry-worker-tls (TLS)`);
  const labels = pool.spec.template.metadata.labels ?? {};
  expect(labels["app.kubernetes.io/name"] === "gantry-worker", `${name}: pods lack app.kubernetes.io/name=gantry-worker`);
  if (overlay === "gpu-cloud") {
    const poolName = labels["gantry.io/pool"];
    const gpus = container.resources?.limits?.["nvidia.com/gpu"];
    const devices = (flag(container.args, "device") ?? "").replace(/^gpu:/, "").split(",");
    expect(poolName && spec.nodeSelector?.["gantry.io/pool"] === poolName, `${name}: no nodeSelector for its pool`);
    expect(spec.tolerations?.some((t) => t.key === "gantry.io/pool" && t.value === poolName) &&
           spec.tolerations.some((t) => t.key === "nvidia.com/gpu"), `${name}: lacks the pool's or the GPU tolerations`);
    expect(gpus > 0 && container.resources.requests?.["nvidia.com/gpu"] === gpus,
           `${name}: no nvidia.com/gpu request equal to its limit`);
    expect(devices.length === gpus && Number(flag(container.args, "slots")) === gpus,
           `${name}: --device and --slots do not cover its ${gpus} GPU(s)`);
    expect(flag(container.args, "labels")?.includes(`pool=${poolName}`), `${name}: --labels lacks pool=${poolName}`);
  }
}
if (failures > 0) process.exit(1);
console.log(`${overlay}: ${objects.length} objects, every expectation met`);
