// torchscript_consumer DIR: loads the TorchScript files export_fixture wrote into DIR the way a
// fast-simulation hook does (LibTorch only, torch::jit::load, float32 tensors built from plain
// vectors) and checks the showers against gantry's own generation for the same latent and
// conditions (DIR/expected.f32):
//   model.ts        gantry profile: forward(latent [N, L], energy [N, 1] GeV[, theta]) in one
//                   batch and one shower per call;
//   model.par04.ts  Par04's packing, one shower per call as Par04InferenceSetup calls it:
//                   input [1, L + 4] = [latent, E / 1,024,000 MeV, theta / (pi/2), 0, 1], each cell
//                   a fraction, times the primary's energy in MeV; then the whole batch at once;
//   model.ddml.ts   DDML's RegularGridGANModel + TorchInference: latent [1, L, 1, 1, 1] uniform in
//                   (-1, 1) (here erf(z / sqrt 2) of gantry's normal latent z, so the showers are
//                   comparable), energy [1, 1, 1, 1, 1] GeV, the output read flat as layer, x, y
//                   (RegularGridGANModel::convertOutput) in MeV.
// Each must match to 1e-4 of the shower's largest cell (float32 rounding of the same arithmetic
// is about 1e-7); a wrong input width must be an error that names the shape wanted. Exits 1 with
// a message on any failure; prints the largest relative difference of each check.
#include <ATen/Parallel.h>
#include <torch/script.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr double kTolerance = 1e-4;
constexpr double kPar04MaxEnergyMev = 1024000.0;
constexpr double kHalfPi = 1.5707963267948966;

[[noreturn]] void Fail(const std::string& what) {
  std::cerr << "FAIL: " << what << "\n";
  std::exit(1);
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<float> ReadFloats(const std::string& path, size_t count) {
  const std::string bytes = ReadText(path);
  if (bytes.size() != count * sizeof(float)) Fail(path + " has the wrong size");
  std::vector<float> v(count);
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

int64_t JsonInt(const std::string& json, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"" + key + "\":(\\d+)"))) Fail("meta: no " + key);
  return std::stoll(m[1]);
}

struct Fixture {
  int64_t n = 0, noise = 0, gx = 0, gy = 0, gz = 0;
  bool variable_angle = false;
  std::vector<float> latent, energy, theta, expected;  // expected [n, x, y, z] GeV
  int64_t cells() const { return gx * gy * gz; }
};

Fixture Load(const std::string& dir) {
  const std::string meta = ReadText(dir + "/meta.json");
  Fixture f;
  f.n = JsonInt(meta, "count");
  f.noise = JsonInt(meta, "noise_dim");
  std::smatch m;
  if (!std::regex_search(meta, m, std::regex("\"grid\":\\[(\\d+),(\\d+),(\\d+)\\]"))) {
    Fail("meta: no grid");
  }
  f.gx = std::stoll(m[1]), f.gy = std::stoll(m[2]), f.gz = std::stoll(m[3]);
  f.variable_angle = meta.find("\"variable_angle\":true") != std::string::npos;
  f.latent = ReadFloats(dir + "/latent.f32", f.n * f.noise);
  f.energy = ReadFloats(dir + "/energy.f32", f.n);
  if (f.variable_angle) f.theta = ReadFloats(dir + "/theta.f32", f.n);
  f.expected = ReadFloats(dir + "/expected.f32", f.n * f.cells());
  return f;
}

at::Tensor Tensor(const std::vector<float>& values, std::vector<int64_t> shape) {
  return torch::tensor(values, torch::dtype(torch::kFloat32)).view(shape);
}

// max over cells |got - want| / max |want| for shower i; `got(c)` is the consumer's value of cell
// c = (x * gy + y) * gz + z of gantry's layout, in the units of `scale` x GeV.
template <typename Got>
double Compare(const Fixture& f, int64_t i, double scale, Got got, const std::string& what) {
  double worst = 0, largest = 0;
  for (int64_t c = 0; c < f.cells(); ++c) {
    largest = std::max(largest, std::abs(scale * f.expected[i * f.cells() + c]));
  }
  if (largest == 0) Fail(what + ": gantry's shower is empty; the comparison would be vacuous");
  for (int64_t c = 0; c < f.cells(); ++c) {
    const double g = got(c);
    if (!std::isfinite(g)) Fail(what + ": a non-finite cell");
    worst = std::max(worst, std::abs(g - scale * f.expected[i * f.cells() + c]) / largest);
  }
  if (worst > kTolerance) {
    std::ostringstream s;
    s << what << ", shower " << i << ": differs from gantry's by " << worst
      << " of its largest cell";
    Fail(s.str());
  }
  return worst;
}

std::vector<float> Row(const std::vector<float>& v, int64_t i, int64_t width) {
  return std::vector<float>(v.begin() + i * width, v.begin() + (i + 1) * width);
}

void ExpectRefused(torch::jit::Module& m, std::vector<c10::IValue> inputs,
                   const std::string& what) {
  try {
    m.forward(inputs);
  } catch (const std::exception& e) {
    if (std::string(e.what()).find("must be [N, ") == std::string::npos) {
      Fail(what + ": refused, but the message does not name the shape: " + e.what());
    }
    return;
  }
  Fail(what + ": a wrong input width was accepted");
}

void Gantry(const Fixture& f, const std::string& path) {
  torch::jit::Module m = torch::jit::load(path);
  m.eval();
  torch::NoGradGuard no_grad;
  auto inputs = [&](int64_t first, int64_t count) {
    std::vector<c10::IValue> in = {
        Tensor(std::vector<float>(f.latent.begin() + first * f.noise,
                                  f.latent.begin() + (first + count) * f.noise),
               {count, f.noise}),
        Tensor(std::vector<float>(f.energy.begin() + first, f.energy.begin() + first + count),
               {count, 1})};
    if (f.variable_angle) {
      in.push_back(
          Tensor(std::vector<float>(f.theta.begin() + first, f.theta.begin() + first + count),
                 {count, 1}));
    }
    return in;
  };
  double worst = 0;
  const at::Tensor batch = m.forward(inputs(0, f.n)).toTensor().contiguous();
  if (batch.sizes().vec() != std::vector<int64_t>{f.n, f.gx, f.gy, f.gz}) Fail("gantry: shape");
  for (int64_t i = 0; i < f.n; ++i) {
    const float* out = batch.data_ptr<float>() + i * f.cells();
    worst = std::max(worst, Compare(
                                f, i, 1.0, [&](int64_t c) { return out[c]; }, "gantry batch"));
    const at::Tensor one = m.forward(inputs(i, 1)).toTensor().contiguous();
    const float* o = one.data_ptr<float>();
    worst = std::max(worst, Compare(
                                f, i, 1.0, [&](int64_t c) { return o[c]; }, "gantry one"));
  }
  std::vector<c10::IValue> wrong = {torch::zeros({1, f.noise + 1}), torch::ones({1, 1})};
  if (f.variable_angle) wrong.push_back(torch::ones({1, 1}));
  ExpectRefused(m, wrong, "gantry");
  std::cout << "gantry profile (" << path << "): batch of " << f.n
            << " and one per call, max |diff| / max |cell| = " << worst << "\n";
}

void Par04(const Fixture& f, const std::string& path) {
  torch::jit::Module m = torch::jit::load(path);
  m.eval();
  torch::NoGradGuard no_grad;
  const int64_t width = f.noise + 4;
  std::vector<float> packed;
  for (int64_t i = 0; i < f.n; ++i) {
    std::vector<float> row = Row(f.latent, i, f.noise);  // as Par04: latent, then conditions
    const double energy_mev = 1000.0 * f.energy[i];
    row.push_back(static_cast<float>(energy_mev / kPar04MaxEnergyMev));
    row.push_back(static_cast<float>((f.variable_angle ? f.theta[i] : kHalfPi) / kHalfPi));
    row.push_back(0.0f);  // Par04's geometry one-hot
    row.push_back(1.0f);
    packed.insert(packed.end(), row.begin(), row.end());
  }
  double worst = 0;
  for (int64_t i = 0; i < f.n; ++i) {
    const at::Tensor out =
        m.forward({Tensor(Row(packed, i, width), {1, width})}).toTensor().contiguous();
    if (out.sizes().vec() != std::vector<int64_t>{1, f.cells()}) Fail("par04: output shape");
    const float* o = out.data_ptr<float>();
    const double energy_mev = 1000.0 * f.energy[i];
    worst = std::max(worst, Compare(
                                f, i, 1000.0, [&](int64_t c) { return o[c] * energy_mev; },
                                "par04 one per call"));
  }
  const at::Tensor batch = m.forward({Tensor(packed, {f.n, width})}).toTensor().contiguous();
  for (int64_t i = 0; i < f.n; ++i) {
    const float* o = batch.data_ptr<float>() + i * f.cells();
    const double energy_mev = 1000.0 * f.energy[i];
    worst = std::max(
        worst, Compare(
                   f, i, 1000.0, [&](int64_t c) { return o[c] * energy_mev; }, "par04 batch"));
  }
  ExpectRefused(m, {torch::zeros({1, width - 2})}, "par04");
  std::cout << "par04 profile (" << path << "): one per call and a batch of " << f.n
            << ", max |diff| / max |cell| = " << worst << "\n";
}

void Ddml(const Fixture& f, const std::string& path) {
  torch::jit::Module m = torch::jit::load(path);
  m.eval();
  torch::NoGradGuard no_grad;
  double worst = 0;
  for (int64_t i = 0; i < f.n; ++i) {
    std::vector<float> uniform;
    for (float z : Row(f.latent, i, f.noise)) {
      uniform.push_back(static_cast<float>(std::erf(z / std::sqrt(2.0))));
    }
    const at::Tensor out =
        m.forward({Tensor(uniform, {1, f.noise, 1, 1, 1}), Tensor({f.energy[i]}, {1, 1, 1, 1, 1})})
            .toTensor()
            .contiguous();
    if (out.numel() != f.cells()) Fail("ddml: output size");
    const float* o = out.data_ptr<float>();
    // convertOutput's loop: layer, then x, then y; gantry's cell c = (x * gy + y) * gz + z.
    worst = std::max(worst, Compare(
                                f, i, 1000.0,
                                [&](int64_t c) {
                                  const int64_t z = c % f.gz, y = (c / f.gz) % f.gy,
                                                x = c / (f.gz * f.gy);
                                  return o[(z * f.gx + x) * f.gy + y];
                                },
                                "ddml one per call"));
  }
  ExpectRefused(m, {torch::zeros({1, f.noise + 3, 1, 1, 1}), torch::ones({1, 1, 1, 1, 1})}, "ddml");
  std::cout << "ddml profile (" << path << "): one per call, max |diff| / max |cell| = " << worst
            << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) Fail("usage: torchscript_consumer DIR");
  const std::string dir = argv[1];
  at::set_num_threads(1);
  const Fixture f = Load(dir);
  Gantry(f, dir + "/model.ts");
  Par04(f, dir + "/model.par04.ts");
  if (f.variable_angle) {
    if (std::ifstream(dir + "/model.ddml.ts")) Fail("a ddml export of a variable-angle model");
    std::cout << "ddml profile: none (the model is variable-angle; DDML's GAN has no angle)\n";
  } else {
    Ddml(f, dir + "/model.ddml.ts");
  }
  std::cout << "torchscript consumer: ok\n";
  return 0;
}
