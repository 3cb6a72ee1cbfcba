// Builds the web app into OUT_DIR (default ../../build/web): type-checks with tsc, bundles
// src/main.ts and its CSS with esbuild (uPlot included: nothing is fetched from elsewhere at run
// time) and copies index.html. Skips everything when OUT_DIR is newer than every source file.
//   node build.mjs [OUT_DIR] [--force]
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readdirSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const force = args.includes("--force");
const out = resolve(args.find((a) => !a.startsWith("--")) ?? join(here, "../../build/web"));
if (!existsSync(join(here, "node_modules/esbuild"))) {
  console.error("web: clients/web/node_modules is missing: run deploy/local/deps.sh (npm ci in clients/web)");
  process.exit(1);
}

function newest(path) {
  const s = statSync(path);
  if (!s.isDirectory()) return s.mtimeMs;
  return Math.max(s.mtimeMs, ...readdirSync(path).map((f) => newest(join(path, f))));
}
const inputs = ["src", "build.mjs", "package-lock.json", "tsconfig.json"].map((p) => join(here, p));
const stamp = join(out, "app.js");
if (!force && existsSync(stamp) && statSync(stamp).mtimeMs >= Math.max(...inputs.map(newest))) {
  process.exit(0);
}

try {
  execFileSync(process.execPath, [join(here, "node_modules/typescript/bin/tsc"), "-p", here], { stdio: "inherit" });
} catch {
  console.error("web: the type check failed (errors above)");
  process.exit(1);
}
mkdirSync(out, { recursive: true });
const esbuild = await import("esbuild");
await esbuild.build({
  entryPoints: { app: join(here, "src/main.ts") },
  bundle: true,
  minify: true,
  sourcemap: false,
  format: "iife",
  target: ["es2020"],
  outdir: out,
  logLevel: "warning",
});
copyFileSync(join(here, "src/index.html"), join(out, "index.html"));
console.log(`web: built ${out}`);
