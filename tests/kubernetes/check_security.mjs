// Asserts that every container of every workload in rendered manifests is hardened: it runs as a
// non-root user, cannot gain privileges, drops every capability, runs under the runtime's default
// seccomp profile, and has a read-only root filesystem with /tmp on a volume (the processes write
// only to mounted volumes). runAsNonRoot and seccompProfile may come from the pod's securityContext.
// usage: node check_security.mjs RENDERED.yaml...
// Prints one line per missing setting and exits 1 if there is any.
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const { parseAllDocuments } = await import(
  pathToFileURL(path.join(here, "schema", "node_modules", "yaml", "dist", "index.js")).href);

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node check_security.mjs RENDERED.yaml...");
  process.exit(2);
}
let failures = 0;
let containers = 0;
for (const file of files) {
  const objects = parseAllDocuments(readFileSync(file, "utf8")).map((d) => d.toJS()).filter(Boolean);
  for (const object of objects) {
    const pod = object.kind === "Pod" ? object.spec : object.spec?.template?.spec;
    if (!pod) continue;
    for (const c of [...(pod.initContainers ?? []), ...(pod.containers ?? [])]) {
      containers++;
      const where = `${path.basename(file)}: ${object.kind} ${object.metadata?.name} container ${c.name}`;
      const expect = (condition, what) => {
        if (!condition) {
          console.log(`${where}: ${what}`);
          failures++;
        }
      };
      const sc = c.securityContext ?? {};
      const podSc = pod.securityContext ?? {};
      expect((sc.runAsNonRoot ?? podSc.runAsNonRoot) === true, "securityContext.runAsNonRoot is not true");
      expect((sc.runAsUser ?? podSc.runAsUser ?? 1) !== 0, "securityContext.runAsUser is 0 (root)");
      expect(sc.allowPrivilegeEscalation === false, "securityContext.allowPrivilegeEscalation is not false");
      expect((sc.capabilities?.drop ?? []).includes("ALL"), "securityContext.capabilities.drop does not hold ALL");
      expect((sc.capabilities?.add ?? []).length === 0, "securityContext.capabilities.add is not empty");
      expect(sc.privileged !== true, "securityContext.privileged is true");
      expect((sc.seccompProfile ?? podSc.seccompProfile)?.type === "RuntimeDefault",
             "securityContext.seccompProfile.type is not RuntimeDefault");
      expect(sc.readOnlyRootFilesystem === true, "securityContext.readOnlyRootFilesystem is not true");
      const tmp = (c.volumeMounts ?? []).find((m) => m.mountPath === "/tmp");
      const tmpVolume = (pod.volumes ?? []).find((v) => v.name === tmp?.name);
      expect(tmp && !tmp.readOnly && tmpVolume?.emptyDir !== undefined, "/tmp is not a writable emptyDir");
    }
  }
}
if (containers === 0) {
  console.log("no containers found");
  failures++;
}
if (failures > 0) process.exit(1);
console.log(`${containers} containers hardened`);
