// Runs DIR/model.onnx in ONNX Runtime (onnxruntime-node, CPU) on the inputs export_fixture wrote and
// compares the showers with gantry's own (DIR/expected.f32): max |diff| / max |cell| per shower and
// the shower sums within 1e-4. Usage: node ort_check.mjs DIR. Exits 1 with a message on failure.
import fs from 'node:fs';
import path from 'node:path';
import ort from 'onnxruntime-node';

const TOLERANCE = 1e-4;
const dir = process.argv[2];
if (!dir) {
  console.error('usage: node ort_check.mjs DIR');
  process.exit(2);
}
const meta = JSON.parse(fs.readFileSync(path.join(dir, 'meta.json'), 'utf8'));
const f32 = (name) => {
  const b = fs.readFileSync(path.join(dir, name));
  return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
};
const n = meta.count;
const cells = meta.grid[0] * meta.grid[1] * meta.grid[2];
const feeds = {
  latent: new ort.Tensor('float32', f32('latent.f32'), [n, meta.noise_dim]),
  energy: new ort.Tensor('float32', f32('energy.f32'), [n, 1]),
};
if (meta.variable_angle) feeds.theta = new ort.Tensor('float32', f32('theta.f32'), [n, 1]);
const session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'));
const out = (await session.run(feeds)).shower;
const want = [n, ...meta.grid];
if (JSON.stringify(out.dims) !== JSON.stringify(want)) {
  console.error(`onnxruntime: output shape ${out.dims}, want ${want}`);
  process.exit(1);
}
const got = out.data;
const expected = f32('expected.f32');
let worst = 0;
let worstSum = 0;
for (let i = 0; i < n; ++i) {
  let scale = 0, diff = 0, sumGot = 0, sumWant = 0;
  for (let j = i * cells; j < (i + 1) * cells; ++j) {
    if (!Number.isFinite(got[j])) {
      console.error(`onnxruntime: non-finite cell ${j}`);
      process.exit(1);
    }
    scale = Math.max(scale, Math.abs(expected[j]));
    diff = Math.max(diff, Math.abs(got[j] - expected[j]));
    sumGot += got[j];
    sumWant += expected[j];
  }
  if (scale === 0) {
    console.error('gantry generated an empty shower; the comparison would be vacuous');
    process.exit(1);
  }
  worst = Math.max(worst, diff / scale);
  worstSum = Math.max(worstSum, Math.abs(sumGot / sumWant - 1));
}
const version = JSON.parse(fs.readFileSync(
    new URL('./node_modules/onnxruntime-node/package.json', import.meta.url), 'utf8')).version;
console.log(`onnxruntime-node ${version}: ${n} showers ${want}, max |diff| / max |cell| = ` +
            `${worst.toExponential(3)}, max shower-sum relative error = ${worstSum.toExponential(3)}`);
if (!(worst <= TOLERANCE && worstSum <= TOLERANCE)) {
  console.error(`onnxruntime: differs from gantry's generation by more than ${TOLERANCE} relative`);
  process.exit(1);
}
