// Per-shower latency of an exported par04-profile ONNX file in ONNX Runtime (onnxruntime-node,
// CPU), as Par04's hook runs it (one packed input per call), at batch 1, 2, 4, ... MAX.
// Usage: node ort_bench.mjs FILE.onnx [THREADS=1] [MAX=64] [SHOWERS=64]
// Prints one row per batch: ms per shower and showers per second. Figures: docs/BENCHMARKS.md.
import ort from 'onnxruntime-node';

const [file, threads = '1', max = '64', showers = '64'] = process.argv.slice(2);
if (!file) {
  console.error('usage: node ort_bench.mjs FILE.onnx [THREADS] [MAX] [SHOWERS]');
  process.exit(2);
}
const session = await ort.InferenceSession.create(file, {
  intraOpNumThreads: Number(threads),
  interOpNumThreads: 1,
  executionMode: 'sequential',
});
const [input] = session.inputMetadata;
if (session.inputNames.length !== 1 || input.name !== 'input') {
  console.error('ort_bench: a par04-profile file (one packed input) is expected');
  process.exit(2);
}
const inputWidth = input.shape[1];
const {version} = JSON.parse((await import('node:fs')).readFileSync(
    new URL('./node_modules/onnxruntime-node/package.json', import.meta.url), 'utf8'));
const latent = inputWidth - 4;
console.log(`# ${file}: onnxruntime-node ${version}, ${threads} thread(s), ` +
            `latent ${latent}, ${showers} showers per point`);
console.log('batch  ms/shower  showers/s');
for (let batch = 1; batch <= Number(max); batch *= 2) {
  const data = new Float32Array(batch * inputWidth);
  for (let i = 0; i < batch; ++i) {
    for (let j = 0; j < latent; ++j) data[i * inputWidth + j] = Math.random() * 2 - 1;
    data[i * inputWidth + latent] = (10 + 190 * Math.random()) * 1000 / 1024000;
    data[i * inputWidth + latent + 1] = 1;
    data[i * inputWidth + latent + 3] = 1;
  }
  const feeds = {input: new ort.Tensor('float32', data, [batch, inputWidth])};
  await session.run(feeds);  // warm-up
  const calls = Math.max(1, Math.floor(Number(showers) / batch));
  const start = process.hrtime.bigint();
  for (let c = 0; c < calls; ++c) await session.run(feeds);
  const ms = Number(process.hrtime.bigint() - start) / 1e6 / (calls * batch);
  console.log(`${String(batch).padStart(5)} ${ms.toFixed(2).padStart(10)} ${(1000 / ms).toFixed(1).padStart(10)}`);
}
