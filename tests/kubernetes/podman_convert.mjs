// Converts a rendered gantry overlay (kubectl kustomize output) into what podman 4.3's `kube play`
// can run, one file per pod, and says what it changed. podman 4.3 plays Pods, Deployments,
// ConfigMaps and PersistentVolumeClaims; the rest is converted or left out:
//   StatefulSet (1 replica)  -> a Pod NAME-0; each volumeClaimTemplate -> a PersistentVolumeClaim
//                               CLAIM-NAME-0, as Kubernetes names them
//   DaemonSet                -> one Pod per simulated node (--nodes), NAME-node-I
//   Deployment (1 replica)   -> played as a Deployment
//   Secret                   -> a ConfigMap with the decoded data for secretKeyRef (->
//                               configMapKeyRef); a secret volume -> a hostPath folder of files
//                               written as the kubelet writes them: owner root, group the pod's
//                               fsGroup, mode the item's or defaultMode (podman 4.3 mounts
//                               ConfigMaps 0644, and the programs refuse a secret others may read)
//   Service                  -> not played: its name resolves through hostAliases in every pod to
//                               the static IP of the one pod its selector matches on the podman network
//   downward API             -> status.podIP, spec.nodeName, metadata.name become literal values,
//                               and $(VAR) in command and args is expanded as the kubelet would
//   grpc probes              -> a liveness grpc probe becomes an exec probe running
//                               `gantry-health-probe 127.0.0.1:PORT SERVICE` (a podman health check);
//                               readiness probes are dropped (podman 4.3 has none; the test checks
//                               readiness through grpc.health.v1 itself)
//   containerPorts           -> dropped: podman 4.3 publishes each on the host; pods reach each
//                               other at their IPs on the podman network
//   Namespace, NetworkPolicy -> not played (podman has no namespaces or network policies)
// Every played name (pods, volume claims = podman volumes, ConfigMaps) gets the prefix --prefix.
// Anything else (another kind, another downward-API field, more replicas) is refused with an error,
// so a change to the overlay that this conversion does not cover fails loudly.
//
// usage: node podman_convert.mjs RENDERED.yaml --prefix P --subnet A.B.C --nodes N --out DIR
// Writes DIR/NN-NAME.yaml per pod, DIR/plan.json ([{file, kind, name, pod, ip, containers}] in
// play order) and the secret volumes' files under DIR/secrets, and prints one line per conversion.
// Run as root (the secret files are chowned, as the kubelet does).
import { readFileSync, writeFileSync, mkdirSync, chmodSync, chownSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const { parseAllDocuments, stringify } = await import(
  pathToFileURL(path.join(here, "schema", "node_modules", "yaml", "dist", "index.js")).href);

function die(message) {
  console.error(`podman_convert: ${message}`);
  process.exit(1);
}
const args = process.argv.slice(2);
const option = (name) => {
  const i = args.indexOf(`--${name}`);
  if (i < 0 || i + 1 >= args.length) die(`--${name} is required`);
  return args[i + 1];
};
const input = args[0];
const prefix = option("prefix");
const subnet = option("subnet");
const nodes = Number(option("nodes"));
const outDir = option("out");
if (!/^gantry-kube-[a-z0-9-]+$/.test(prefix)) die(`--prefix ${prefix} must start with gantry-kube-`);
if (!/^\d+\.\d+\.\d+$/.test(subnet)) die(`--subnet ${subnet} must be three octets, e.g. 10.144.44`);
if (!(nodes >= 1 && nodes <= 50)) die("--nodes must be 1..50");
mkdirSync(outDir, { recursive: true });

const objects = parseAllDocuments(readFileSync(input, "utf8")).map((d) => d.toJS()).filter(Boolean);
const report = (line) => console.log(line);
const played = (name) => `${prefix}-${name}`;
const byKind = (kind) => objects.filter((o) => o.kind === kind);

// Secrets -> ConfigMaps (podman 4.3 plays neither Secret objects nor secret volumes).
const configMaps = new Map();  // original name -> ConfigMap played
for (const secret of byKind("Secret")) {
  const data = {};
  for (const [key, value] of Object.entries(secret.data ?? {})) {
    data[key] = Buffer.from(String(value).replace(/\s/g, ""), "base64").toString("utf8");
  }
  Object.assign(data, secret.stringData ?? {});
  configMaps.set(secret.metadata.name, {
    apiVersion: "v1", kind: "ConfigMap", metadata: { name: played(secret.metadata.name) }, data });
  report(`Secret ${secret.metadata.name} -> ConfigMap ${played(secret.metadata.name)} (keys ${Object.keys(data).join(", ")})`);
}
for (const configMap of byKind("ConfigMap")) {
  configMaps.set(configMap.metadata.name, { ...configMap, metadata: { name: played(configMap.metadata.name) } });
  report(`ConfigMap ${configMap.metadata.name} -> ConfigMap ${played(configMap.metadata.name)}`);
}
const claims = new Map();  // original claim name -> PersistentVolumeClaim played
for (const claim of byKind("PersistentVolumeClaim")) {
  claims.set(claim.metadata.name, { apiVersion: "v1", kind: "PersistentVolumeClaim",
                                    metadata: { name: played(claim.metadata.name) }, spec: claim.spec });
  report(`PersistentVolumeClaim ${claim.metadata.name} -> podman volume ${played(claim.metadata.name)}`);
}
for (const kind of ["Namespace", "NetworkPolicy"]) {
  for (const object of byKind(kind)) report(`${kind} ${object.metadata.name} -> not played`);
}
const known = new Set(["Secret", "ConfigMap", "PersistentVolumeClaim", "Namespace", "NetworkPolicy",
                       "Service", "Deployment", "StatefulSet", "DaemonSet"]);
for (const object of objects) {
  if (!known.has(object.kind)) die(`${object.kind} ${object.metadata?.name}: no conversion for this kind`);
}

// The pods to play, in order: StatefulSets (PostgreSQL), Deployments (the server), DaemonSets.
const units = [];
let nextHost = 10;
for (const kind of ["StatefulSet", "Deployment", "DaemonSet"]) {
  for (const workload of byKind(kind)) {
    const name = workload.metadata.name;
    if (kind !== "DaemonSet" && (workload.spec.replicas ?? 1) !== 1) {
      die(`${kind} ${name}: ${workload.spec.replicas} replicas; this conversion plays one`);
    }
    const copies = kind === "DaemonSet" ? nodes : 1;
    for (let i = 1; i <= copies; i++) {
      const podName = kind === "StatefulSet" ? `${name}-0` : kind === "DaemonSet" ? `${name}-node-${i}` : name;
      units.push({ kind, workload, podName, node: `${prefix}-node-${kind === "DaemonSet" ? i : 1}`,
                   ip: `${subnet}.${nextHost++}`,
                   labels: workload.spec.template.metadata?.labels ?? {} });
    }
  }
}

// Services -> hostAliases: each name maps to the IP of the one pod its selector matches.
const aliases = new Map();  // ip -> [names]
for (const service of byKind("Service")) {
  const selector = service.spec.selector ?? {};
  const matches = units.filter((u) => Object.entries(selector).every(([k, v]) => u.labels[k] === v));
  if (matches.length !== 1) {
    die(`Service ${service.metadata.name}: its selector matches ${matches.length} pods; a hostAliases entry needs exactly one`);
  }
  const unit = matches[0];
  for (const port of service.spec.ports ?? []) {
    const target = port.targetPort ?? port.port;
    const containerPorts = unit.workload.spec.template.spec.containers.flatMap((c) => c.ports ?? []);
    const resolved = typeof target === "number" ? target : containerPorts.find((p) => p.name === target)?.containerPort;
    if (resolved !== port.port) {
      die(`Service ${service.metadata.name}: port ${port.port} -> ${target} (${resolved}); without a Service the port must be the container's`);
    }
  }
  const names = aliases.get(unit.ip) ?? [];
  names.push(service.metadata.name);
  aliases.set(unit.ip, names);
  report(`Service ${service.metadata.name} -> hostAliases ${service.metadata.name}=${unit.ip} (${played(unit.podName)})`);
}
const hostAliases = [...aliases.entries()].map(([ip, hostnames]) => ({ ip, hostnames }));

// Writes a secret volume's files into `dir` as the kubelet does: every key (or only `items`, at
// their paths), owner root, group `fsGroup`, mode the item's, else defaultMode, else 0644.
function writeSecretVolume(source, dir, fsGroup, owner) {
  const secret = configMaps.get(source.secretName);
  if (!secret) die(`${owner}: refers to Secret ${source.secretName}, which the overlay does not hold`);
  const items = source.items ?? Object.keys(secret.data).map((key) => ({ key, path: key }));
  mkdirSync(dir, { recursive: true });
  chmodSync(dir, 0o755);
  for (const item of items) {
    if (!(item.key in secret.data)) die(`${owner}: Secret ${source.secretName} has no key ${item.key}`);
    if (item.path.includes("/") || item.path.startsWith(".")) die(`${owner}: item path ${item.path} is not a plain name`);
    const file = path.join(dir, item.path);
    writeFileSync(file, secret.data[item.key]);
    try {
      chownSync(file, 0, fsGroup);
    } catch (error) {
      die(`cannot give ${file} to root:${fsGroup} as the kubelet would (${error.code}): run as root`);
    }
    chmodSync(file, item.mode ?? source.defaultMode ?? 0o644);
  }
}

const plan = [];
for (const [index, unit] of units.entries()) {
  const { kind, workload } = unit;
  const pod = played(unit.podName);
  const template = structuredClone(workload.spec.template);
  const spec = template.spec;
  const extra = [];  // ConfigMaps and claims this pod uses, played in the same file
  spec.hostAliases = [...(spec.hostAliases ?? []), ...hostAliases];
  spec.hostname = unit.podName;

  // Volumes: secrets -> ConfigMaps, claims and claim templates -> prefixed podman volumes.
  const templates = kind === "StatefulSet" ? workload.spec.volumeClaimTemplates ?? [] : [];
  for (const claimTemplate of templates) {
    const claimName = played(`${claimTemplate.metadata.name}-${workload.metadata.name}-0`);
    extra.push({ apiVersion: "v1", kind: "PersistentVolumeClaim", metadata: { name: claimName }, spec: claimTemplate.spec });
    spec.volumes = [...(spec.volumes ?? []),
                    { name: claimTemplate.metadata.name, persistentVolumeClaim: { claimName } }];
    report(`${kind} ${workload.metadata.name}: volumeClaimTemplate ${claimTemplate.metadata.name} -> podman volume ${claimName}`);
  }
  const useConfigMap = (name) => {
    const configMap = configMaps.get(name);
    if (!configMap) die(`${kind} ${workload.metadata.name}: refers to Secret/ConfigMap ${name}, which the overlay does not hold`);
    if (!extra.includes(configMap)) extra.push(configMap);
    return configMap.metadata.name;
  };
  for (const volume of spec.volumes ?? []) {
    if (volume.secret) {
      const dir = path.resolve(outDir, "secrets", pod, volume.name);
      const fsGroup = spec.securityContext?.fsGroup ?? 0;
      const mode = (volume.secret.defaultMode ?? 0o644).toString(8).padStart(4, "0");
      writeSecretVolume(volume.secret, dir, fsGroup, `${kind} ${workload.metadata.name}`);
      report(`${pod}: secret volume ${volume.name} -> hostPath secrets/${pod}/${volume.name} (files root:${fsGroup} mode ${mode}, as the kubelet writes them)`);
      volume.hostPath = { path: dir, type: "Directory" };
      delete volume.secret;
    } else if (volume.configMap) {
      volume.configMap.name = useConfigMap(volume.configMap.name);
    } else if (volume.persistentVolumeClaim && !volume.persistentVolumeClaim.claimName.startsWith(prefix)) {
      const claim = claims.get(volume.persistentVolumeClaim.claimName);
      if (!claim) die(`${kind} ${workload.metadata.name}: claim ${volume.persistentVolumeClaim.claimName} is not in the overlay`);
      extra.push(claim);
      volume.persistentVolumeClaim.claimName = claim.metadata.name;
    } else if (!volume.emptyDir && !volume.persistentVolumeClaim) {
      die(`${kind} ${workload.metadata.name}: volume ${volume.name} is of a type this conversion does not play`);
    }
  }

  const containers = [];
  for (const container of spec.containers) {
    const values = {};
    for (const env of container.env ?? []) {
      const field = env.valueFrom?.fieldRef?.fieldPath;
      if (field) {
        const value = { "status.podIP": unit.ip, "spec.nodeName": unit.node, "metadata.name": pod }[field];
        if (value === undefined) die(`${kind} ${workload.metadata.name}: downward API field ${field} has no conversion`);
        env.value = value;
        delete env.valueFrom;
        report(`${pod}: env ${env.name} from ${field} -> ${value}`);
      } else if (env.valueFrom?.secretKeyRef) {
        const { name, key } = env.valueFrom.secretKeyRef;
        env.valueFrom = { configMapKeyRef: { name: useConfigMap(name), key } };
        // kube play resolves it from the ConfigMap; the literal is known here too, for $(VAR).
        values[env.name] = configMaps.get(name).data[key];
        continue;
      } else if (env.valueFrom?.configMapKeyRef) {
        env.valueFrom.configMapKeyRef.name = useConfigMap(env.valueFrom.configMapKeyRef.name);
        continue;
      }
      if (env.value !== undefined) values[env.name] = env.value;
    }
    // $(VAR) in command and args, expanded from the container's env as the kubelet does.
    const expand = (s) => s.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (all, v) => (v in values ? values[v] : all));
    if (container.command) container.command = container.command.map(expand);
    if (container.args) container.args = container.args.map(expand);
    const grpc = container.livenessProbe?.grpc;
    if (grpc) {
      const service = grpc.service ?? "";
      container.livenessProbe = {
        ...container.livenessProbe,
        exec: { command: ["gantry-health-probe", `127.0.0.1:${grpc.port}`, ...(service ? [service] : [])] } };
      delete container.livenessProbe.grpc;
      report(`${pod}: liveness grpc ${grpc.port} service "${service}" -> exec gantry-health-probe`);
    }
    if (container.livenessProbe?.exec) report(`${pod}: liveness exec ${container.livenessProbe.exec.command[0]} kept`);
    if (container.readinessProbe) {
      report(`${pod}: readinessProbe dropped (the test checks grpc.health.v1 "" itself)`);
      delete container.readinessProbe;
    }
    // podman 4.3 publishes every containerPort on the host (hostPort defaulting to it); in
    // Kubernetes they are informational, and the pods reach each other at their IPs anyway.
    if (container.ports) {
      report(`${pod}: containerPorts ${container.ports.map((p) => p.containerPort).join(", ")} dropped (podman 4.3 would publish them on the host)`);
      delete container.ports;
    }
    containers.push(container.name);
  }

  let object;
  if (kind === "Deployment") {
    object = { apiVersion: "apps/v1", kind: "Deployment",
               metadata: { name: pod, labels: workload.metadata.labels },
               spec: { replicas: 1, selector: workload.spec.selector, template } };
    report(`Deployment ${workload.metadata.name} -> Deployment ${pod} at ${unit.ip}`);
  } else {
    object = { apiVersion: "v1", kind: "Pod",
               metadata: { name: pod, labels: template.metadata?.labels ?? {} }, spec };
    report(`${kind} ${workload.metadata.name} -> Pod ${pod} at ${unit.ip}${kind === "DaemonSet" ? ` (node ${unit.node})` : ""}`);
  }
  const file = path.join(outDir, `${String(index + 1).padStart(2, "0")}-${unit.podName}.yaml`);
  writeFileSync(file, [...extra, object].map((o) => stringify(o)).join("---\n"));
  plan.push({ file, kind, name: workload.metadata.name, pod, ip: unit.ip, containers,
              deployment: kind === "Deployment" });
}
writeFileSync(path.join(outDir, "plan.json"), JSON.stringify(plan, null, 2));
