// Runs the ONNX files export_fixture wrote into DIR in ONNX Runtime (onnxruntime-node, CPU) on its
// inputs and compares the showers with gantry's own (DIR/expected.f32, GeV): max |diff| / max |cell|
// per shower and the shower sums within 1e-4.
//   model.onnx        gantry profile: latent [N, L], energy [N, 1] GeV (theta [N, 1] rad), one batch;
//   model.par04.onnx  Par04's packing, fed as Par04InferenceSetup does: one shower per run,
//                     input [1, L + 4] = [latent, E / 1,024,000 MeV, theta / (pi/2), 0, 1], each
//                     output cell a fraction of the primary's energy (times E in MeV); then the
//                     whole batch in one run.
// Usage: node ort_check.mjs DIR. Exits 1 with a message on failure.
import fs from 'node:fs';
import path from 'node:path';
import ort from 'onnxruntime-node';

const TOLERANCE = 1e-4;
const PAR04_MAX_ENERGY_MEV = 1024000;
const dir = process.argv[2];
if (!dir) {
  console.error('usage: node ort_check.mjs DIR');
  process.exit(2);
}
const fail = (message) => {
  console.error(`onnxruntime: ${message}`);
  process.exit(1);
};
const meta = JSON.parse(fs.readFileSync(path.join(dir, 'meta.json'), 'utf8'));
const f32 = (name) => {
  const b = fs.readFileSync(path.join(dir, name));
  return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
};
const n = meta.count;
const L = meta.noise_dim;
const cells = meta.grid[0] * meta.grid[1] * meta.grid[2];
const latent = f32('latent.f32');
const energy = f32('energy.f32');
const theta = meta.variable_angle ? f32('theta.f32') : null;
const expected = f32('expected.f32');

// Shower i of `got` (cells values, GeV times `scale`) against gantry's: [relative diff, sum error].
function compare(got, i, scale, what) {
  let largest = 0, diff = 0, sumGot = 0, sumWant = 0;
  for (let c = 0; c < cells; ++c) {
    const want = scale * expected[i * cells + c];
    if (!Number.isFinite(got[c])) fail(`${what}: non-finite cell ${c} of shower ${i}`);
    largest = Math.max(largest, Math.abs(want));
    diff = Math.max(diff, Math.abs(got[c] - want));
    sumGot += got[c];
    sumWant += want;
  }
  if (largest === 0) fail('gantry generated an empty shower; the comparison would be vacuous');
  return [diff / largest, Math.abs(sumGot / sumWant - 1)];
}

function report(what, results) {
  const worst = Math.max(...results.map((r) => r[0]));
  const worstSum = Math.max(...results.map((r) => r[1]));
  console.log(`${what}: max |diff| / max |cell| = ${worst.toExponential(3)}, ` +
              `max shower-sum relative error = ${worstSum.toExponential(3)}`);
  if (!(worst <= TOLERANCE && worstSum <= TOLERANCE)) {
    fail(`${what} differs from gantry's generation by more than ${TOLERANCE} relative`);
  }
}

const version = JSON.parse(fs.readFileSync(
    new URL('./node_modules/onnxruntime-node/package.json', import.meta.url), 'utf8')).version;

// The gantry profile: one batch.
{
  const feeds = {
    latent: new ort.Tensor('float32', latent, [n, L]),
    energy: new ort.Tensor('float32', energy, [n, 1]),
  };
  if (theta) feeds.theta = new ort.Tensor('float32', theta, [n, 1]);
  const session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'));
  const out = (await session.run(feeds)).shower;
  const want = [n, ...meta.grid];
  if (JSON.stringify(out.dims) !== JSON.stringify(want)) fail(`output shape ${out.dims}, want ${want}`);
  const results = [];
  for (let i = 0; i < n; ++i) results.push(compare(out.data.subarray(i * cells), i, 1, 'gantry'));
  report(`onnxruntime-node ${version}, gantry profile: ${n} showers ${want}`, results);
}

// The par04 profile: Par04's packing, one shower per run, then the batch.
const par04File = path.join(dir, 'model.par04.onnx');
if (!fs.existsSync(par04File)) fail(`${par04File} is missing`);
{
  const width = L + 4;
  const packed = new Float32Array(n * width);
  for (let i = 0; i < n; ++i) {
    packed.set(latent.subarray(i * L, (i + 1) * L), i * width);
    packed[i * width + L] = (1000 * energy[i]) / PAR04_MAX_ENERGY_MEV;
    packed[i * width + L + 1] = theta ? theta[i] / (Math.PI / 2) : 1;
    packed[i * width + L + 2] = 0;  // Par04's geometry one-hot
    packed[i * width + L + 3] = 1;
  }
  const session = await ort.InferenceSession.create(par04File);
  const toMev = (fractions, i) => fractions.map((v) => v * 1000 * energy[i]);
  const single = [];
  for (let i = 0; i < n; ++i) {
    const input = new ort.Tensor('float32', packed.slice(i * width, (i + 1) * width), [1, width]);
    const out = (await session.run({input})).shower;
    if (JSON.stringify(out.dims) !== JSON.stringify([1, cells])) fail(`par04 output ${out.dims}`);
    single.push(compare(toMev(out.data, i), i, 1000, 'par04'));
  }
  report(`onnxruntime-node ${version}, par04 profile: ${n} showers one per run, [1, ${width}]`, single);
  const out = (await session.run({input: new ort.Tensor('float32', packed, [n, width])})).shower;
  const batch = [];
  for (let i = 0; i < n; ++i) {
    batch.push(compare(toMev(out.data.slice(i * cells, (i + 1) * cells), i), i, 1000, 'par04'));
  }
  report(`onnxruntime-node ${version}, par04 profile: ${n} showers in one run`, batch);
}
