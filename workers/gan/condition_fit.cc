#include "workers/gan/condition_fit.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "workers/baseline/baseline_sampler.h"
#include "workers/gan/preprocessing.h"

namespace gantry::gan {
namespace {

// Per output j (a cell, a slice), the least-squares line y_j = a_j + b_j x over the events added,
// x = ln e, from running sums.
class LogEnergyLines {
 public:
  // One event: y_j = values[j] * scale, j < n; zero values add nothing and are skipped.
  template <typename T>
  void Add(double x, const T* values, int64_t n, double scale) {
    if (sum_y_.empty()) {
      sum_y_.assign(n, 0.0);
      sum_xy_.assign(n, 0.0);
    }
    for (int64_t j = 0; j < n; ++j) {
      if (values[j] == 0) continue;
      const double y = static_cast<double>(values[j]) * scale;
      sum_y_[j] += y;
      sum_xy_[j] += x * y;
    }
    ++events_;
    sum_x_ += x;
    sum_xx_ += x * x;
  }

  // a for every output, then b (b = 0 when x does not vary: one beam energy); empty without events.
  std::vector<double> Finish() const {
    std::vector<double> out;
    if (events_ == 0) return out;
    const double n = static_cast<double>(events_);
    const double mean_x = sum_x_ / n;
    const double var_x = sum_xx_ / n - mean_x * mean_x;
    const bool slope = var_x > 1e-9;  // a spread of energies, not one beam energy
    const size_t outputs = sum_y_.size();
    out.assign(2 * outputs, 0.0);
    for (size_t j = 0; j < outputs; ++j) {
      const double mean_y = sum_y_[j] / n;
      const double b = slope ? (sum_xy_[j] / n - mean_x * mean_y) / var_x : 0.0;
      out[j] = mean_y - b * mean_x;
      out[outputs + j] = b;
    }
    return out;
  }

 private:
  std::vector<double> sum_y_, sum_xy_;
  double sum_x_ = 0, sum_xx_ = 0;
  int64_t events_ = 0;
};

// The shower template's fit (generator_template): per cell, the least-squares line
// cell / e = a + b ln(e) (LogEnergyLines), then the leading principal components of the events'
// deviations from it (template_modes). The modes keep the sampled events' rows, at most
// kModeFitBytes of them.
class TemplateFit {
 public:
  // `expected_events`: how many events Add will see at most, so that the rows kept for the modes
  // are spread over all of them.
  TemplateFit(const ModelConfig& config, int64_t expected_events) : config_(config) {
    const int64_t cells = config.grid[0] * config.grid[1] * config.grid[2];
    const int64_t max_rows = std::max<int64_t>(1, kModeFitBytes / (cells * 4));
    row_stride_ = std::max<int64_t>(1, (expected_events + max_rows - 1) / max_rows);
    if (config.template_modes > 0) {
      rows_.reserve(static_cast<size_t>((expected_events + row_stride_ - 1) / row_stride_ * cells));
    }
  }

  // One sampled event, its cells preprocessed (PreprocessEvents); events without a positive energy
  // are skipped.
  void Add(const float* preprocessed, int64_t n, double energy_gev) {
    if (!config_.generator_template || !(energy_gev > 0)) return;
    const double e = energy_gev / config_.energy_scale;
    const double x = std::log(e);
    if (config_.template_modes > 0 && events_ % row_stride_ == 0) {
      rows_.resize(rows_.size() + static_cast<size_t>(n), 0.0f);
      row_log_e_.push_back(x);
      float* row = rows_.data() + rows_.size() - n;
      for (int64_t c = 0; c < n; ++c) row[c] = static_cast<float>(preprocessed[c] / e);
    }
    lines_.Add(x, preprocessed, n, 1.0 / e);
    ++events_;
  }

  // a, b, then the template_modes modes per cell; empty without events.
  std::vector<double> Finish() const {
    std::vector<double> out = lines_.Finish();
    if (out.empty()) return out;
    out.resize((2 + static_cast<size_t>(config_.template_modes)) * (out.size() / 2), 0.0);
    if (config_.template_modes > 0) AddModes(&out);
    return out;
  }

 private:
  // Caps the rows kept for the modes: 2,000 events of 25^3 cells, about 1,000 of 51x51x25.
  static constexpr int64_t kModeFitBytes = int64_t{256} << 20;

  // The modes: with R the kept rows' deviations from a + b ln e (events x cells), the
  // eigenvectors u_k of R R^T with the K largest eigenvalues give M_k = R^T u_k / sqrt(events),
  // the k-th principal direction times the standard deviation along it. Signs are fixed (the
  // largest entry positive), so every process computes the same modes.
  void AddModes(std::vector<double>* out) const {
    const int64_t cells = static_cast<int64_t>(out->size()) / (2 + config_.template_modes);
    const int64_t kept = static_cast<int64_t>(row_log_e_.size());
    const int64_t modes = config_.template_modes;
    if (kept < 2) return;
    const at::Tensor line = at::from_blob(out->data(), {2, cells}, at::kDouble).to(at::kFloat);
    const at::Tensor log_e =
        at::from_blob(const_cast<double*>(row_log_e_.data()), {kept, 1}, at::kDouble)
            .to(at::kFloat);
    const at::Tensor rows =
        at::from_blob(const_cast<float*>(rows_.data()), {kept, cells}, at::kFloat);
    const at::Tensor deviations = rows - line[0] - log_e * line[1];
    const at::Tensor gram = at::matmul(deviations, deviations.t()).to(at::kDouble);
    const auto [values, vectors] = at::linalg_eigh(gram);  // ascending eigenvalues
    const double scale = values.max().item<double>();
    for (int64_t k = 0; k < std::min(modes, kept); ++k) {
      const int64_t j = kept - 1 - k;
      if (!(values[j].item<double>() > 1e-9 * scale)) break;
      at::Tensor mode = at::matmul(deviations.t(), vectors.select(1, j).to(at::kFloat))
                            .to(at::kDouble)
                            .div_(std::sqrt(static_cast<double>(kept)));
      if (mode[mode.abs().argmax()].item<double>() < 0) mode.neg_();
      std::copy_n(mode.contiguous().data_ptr<double>(), cells,
                  out->data() + (2 + k) * static_cast<size_t>(cells));
    }
  }

  const ModelConfig& config_;
  int64_t row_stride_ = 1;
  LogEnergyLines lines_;
  int64_t events_ = 0;
  std::vector<float> rows_;        // kept events' cell / e, row after row
  std::vector<double> row_log_e_;  // their ln e
};

// Evenly spread picks of at most `limit` of `n` positions.
std::vector<int64_t> SpreadPicks(int64_t n, int64_t limit) {
  std::vector<int64_t> picks;
  const int64_t k = std::min(n, limit);
  picks.reserve(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) picks.push_back(i * n / k);
  return picks;
}

// Solves the (d+1)x(d+1) system in place by Gaussian elimination with partial pivoting; false
// when a pivot is negligible against the matrix scale.
bool Solve(std::vector<std::vector<double>> a, std::vector<double> b, std::vector<double>* x) {
  const size_t n = b.size();
  double scale = 0;
  for (const auto& row : a) {
    for (double v : row) scale = std::max(scale, std::fabs(v));
  }
  for (size_t col = 0; col < n; ++col) {
    size_t pivot = col;
    for (size_t r = col + 1; r < n; ++r) {
      if (std::fabs(a[r][col]) > std::fabs(a[pivot][col])) pivot = r;
    }
    if (!(std::fabs(a[pivot][col]) > 1e-12 * scale)) return false;
    std::swap(a[col], a[pivot]);
    std::swap(b[col], b[pivot]);
    for (size_t r = col + 1; r < n; ++r) {
      const double f = a[r][col] / a[col][col];
      for (size_t c = col; c < n; ++c) a[r][c] -= f * a[col][c];
      b[r] -= f * b[col];
    }
  }
  x->assign(n, 0.0);
  for (size_t i = n; i-- > 0;) {
    double s = b[i];
    for (size_t c = i + 1; c < n; ++c) s -= a[i][c] * (*x)[c];
    (*x)[i] = s / a[i][i];
  }
  return true;
}

// Appends the x, y and z slice sums of one preprocessed event (x * y * z cells, row-major).
void AddSliceSums(const ModelConfig& config, const float* cells, std::vector<double>* out) {
  const int64_t nx = config.grid[0], ny = config.grid[1], nz = config.grid[2];
  const size_t base = out->size();
  out->resize(base + static_cast<size_t>(nx + ny + nz), 0.0);
  double* x = out->data() + base;
  double* y = x + nx;
  double* z = y + ny;
  for (int64_t i = 0; i < nx; ++i) {
    for (int64_t j = 0; j < ny; ++j) {
      const float* row = cells + (i * ny + j) * nz;
      for (int64_t k = 0; k < nz; ++k) {
        x[i] += row[k];
        y[j] += row[k];
        z[k] += row[k];
      }
    }
  }
}

// Per slice, the least-squares line (slice sum / e) = a + b ln e over the events with e > 0:
// a for every slice, then b (b = 0 when ln e does not vary); zeros without such events.
std::vector<double> FitProfiles(const ModelConfig& config, const ConditionSample& sample) {
  const int64_t slices = config.profile_slices();
  LogEnergyLines lines;
  for (size_t i = 0; i < sample.sample_energy_gev.size(); ++i) {
    const double e = sample.sample_energy_gev[i] / config.energy_scale;
    if (!(e > 0) || !std::isfinite(e)) continue;
    lines.Add(std::log(e), sample.sample_profiles.data() + i * static_cast<size_t>(slices), slices,
              1.0 / e);
  }
  std::vector<double> fit = lines.Finish();
  if (fit.empty()) fit.assign(2 * static_cast<size_t>(slices), 0.0);
  return fit;
}

// Adds the events `rows` of `showers` that pass the event selection to the sample (energy, ecal
// sum, slice sums) and to the template fit, preprocessed as for training, a block at a time.
void AddSampledEvents(const ModelConfig& config, const showers::ShowerSet& showers,
                      const std::vector<int64_t>& rows, ConditionSample* s, TemplateFit* fit) {
  constexpr size_t kBlock = 256;
  const int64_t n = showers.cells_per_event();
  std::vector<int64_t> selected;
  for (size_t first = 0; first < rows.size(); first += kBlock) {
    selected.clear();
    for (size_t i = first; i < std::min(rows.size(), first + kBlock); ++i) {
      if (PassesEventSelection(config, showers.event(rows[i]), n)) selected.push_back(rows[i]);
    }
    const TrainingTensors t = PreprocessEvents(config, showers, selected);
    const float* images = t.images.data_ptr<float>();
    const float* ecal = t.ecal.data_ptr<float>();
    for (size_t k = 0; k < selected.size(); ++k) {
      const double energy = showers.energy_gev[selected[k]];
      s->sample_energy_gev.push_back(energy);
      s->sample_ecal.push_back(ecal[k]);
      AddSliceSums(config, images + static_cast<int64_t>(k) * n, &s->sample_profiles);
      s->sample_nonzero_cells.push_back(static_cast<double>(
          std::count_if(images + static_cast<int64_t>(k) * n,
                        images + static_cast<int64_t>(k + 1) * n, [](float v) { return v > 0; })));
      fit->Add(images + static_cast<int64_t>(k) * n, n, energy);
    }
  }
}

// generator_spots: the spot energy (GeV) for which the template's showers at the sampled
// energies have the sampled events' mean number of non-zero cells.
absl::StatusOr<double> FitSpotEnergyGev(const ModelConfig& config, const ConditionSample& sample) {
  constexpr int64_t kShowers = 256;
  constexpr uint64_t kSeed = 0x5907;
  const int64_t modes = config.template_modes;
  const size_t rows = 2 + static_cast<size_t>(modes);
  if (sample.shower_template.empty() || sample.shower_template.size() % rows != 0) {
    return absl::InvalidArgumentError("generator_spots needs the fitted shower template");
  }
  const int64_t cells = static_cast<int64_t>(sample.shower_template.size() / rows);
  const std::vector<double>& t = sample.shower_template;
  double hits = 0;
  int64_t events = 0;
  std::vector<float> mu;
  std::mt19937_64 engine(kSeed);
  std::normal_distribution<double> normal;
  const size_t n = sample.sample_energy_gev.size();
  for (int64_t i = 0; i < std::min<int64_t>(kShowers, static_cast<int64_t>(n)); ++i) {
    const size_t row = static_cast<size_t>(i) * n / static_cast<size_t>(std::min<int64_t>(
                                                         kShowers, static_cast<int64_t>(n)));
    const double e = sample.sample_energy_gev[row] / config.energy_scale;
    if (!(e > 0) || !std::isfinite(e)) continue;
    std::vector<double> z(static_cast<size_t>(modes));
    for (double& v : z) v = normal(engine);
    for (int64_t c = 0; c < cells; ++c) {
      double v = t[c] + std::log(e) * t[cells + c];
      for (int64_t k = 0; k < modes; ++k) v += z[k] * t[(2 + k) * cells + c];
      mu.push_back(static_cast<float>(std::max(0.0, e * v)));
    }
    hits += sample.sample_nonzero_cells[row];
    ++events;
  }
  if (events == 0 || !(hits > 0)) {
    return absl::InvalidArgumentError(
        "generator_spots: no sampled training event has a non-zero cell to fit the spot energy to");
  }
  const double spot = baseline::FitSpotEnergy(mu, events, hits / static_cast<double>(events));
  return spot / config.cell_scale;
}

}  // namespace

absl::StatusOr<ConditionSample> SampleConditions(const ModelConfig& config,
                                                 const showers::ShowerSet& showers,
                                                 const std::vector<int64_t>& rows) {
  if (absl::Status fits = CheckShowersFitModel(config, showers); !fits.ok()) return fits;
  ConditionSample s;
  TemplateFit fit(config,
                  std::min<int64_t>(static_cast<int64_t>(rows.size()), kConditionFitEvents));
  for (int64_t row : rows) {
    if (row < 0 || row >= showers.events()) {
      return absl::InvalidArgumentError(
          absl::StrCat("event ", row, " is outside the set's ", showers.events(), " events"));
    }
    s.energy_gev.push_back(showers.energy_gev[row]);
    if (config.variable_angle() && !showers.theta_rad.empty()) {
      s.theta_rad.push_back(showers.theta_rad[row]);
    }
  }
  std::vector<int64_t> picked;
  for (int64_t pick : SpreadPicks(static_cast<int64_t>(rows.size()), kConditionFitEvents)) {
    picked.push_back(rows[pick]);
  }
  AddSampledEvents(config, showers, picked, &s, &fit);
  s.shower_template = fit.Finish();
  return s;
}

absl::StatusOr<ConditionSample> SampleConditions(const ModelConfig& config,
                                                 const showers::ShowerFileReader& reader,
                                                 const std::vector<int64_t>& candidates) {
  ConditionSample s;
  TemplateFit fit(config,
                  std::min<int64_t>(static_cast<int64_t>(candidates.size()), kConditionFitEvents));
  for (int64_t index : candidates) {
    if (index < 0 || index >= reader.events()) {
      return absl::InvalidArgumentError(
          absl::StrCat("event ", index, " is outside the file's ", reader.events(), " events"));
    }
    s.energy_gev.push_back(reader.energy_gev()[index]);
    if (config.variable_angle() && !reader.theta_rad().empty()) {
      s.theta_rad.push_back(reader.theta_rad()[index]);
    }
  }
  std::vector<int64_t> picked;
  for (int64_t pick : SpreadPicks(static_cast<int64_t>(candidates.size()), kConditionFitEvents)) {
    picked.push_back(candidates[pick]);
  }
  // Read in blocks: bounded memory whatever the event size.
  constexpr size_t kBlock = 256;
  for (size_t first = 0; first < picked.size(); first += kBlock) {
    const std::vector<int64_t> block(picked.begin() + first,
                                     picked.begin() + std::min(picked.size(), first + kBlock));
    absl::StatusOr<showers::ShowerSet> events = reader.ReadEvents(block);
    if (!events.ok()) return events.status();
    if (absl::Status fits = CheckShowersFitModel(config, *events); !fits.ok()) return fits;
    std::vector<int64_t> all(static_cast<size_t>(events->events()));
    std::iota(all.begin(), all.end(), 0);
    AddSampledEvents(config, *events, all, &s, &fit);
  }
  s.shower_template = fit.Finish();
  return s;
}

std::vector<double> FitPolynomial(const std::vector<double>& x, const std::vector<double>& y,
                                  int degree) {
  for (int d = std::max(0, degree); d >= 0; --d) {
    const size_t m = static_cast<size_t>(d) + 1;
    // Normal equations in powers of x (highest first at the end).
    std::vector<std::vector<double>> a(m, std::vector<double>(m, 0.0));
    std::vector<double> b(m, 0.0);
    for (size_t i = 0; i < x.size(); ++i) {
      std::vector<double> p(2 * m - 1, 1.0);
      for (size_t k = 1; k < p.size(); ++k) p[k] = p[k - 1] * x[i];
      for (size_t r = 0; r < m; ++r) {
        for (size_t c = 0; c < m; ++c) a[r][c] += p[r + c];
        b[r] += p[r] * y[i];
      }
    }
    std::vector<double> coefficients;
    if (!Solve(a, b, &coefficients)) continue;
    bool finite = true;
    for (double c : coefficients) finite = finite && std::isfinite(c);
    if (!finite) continue;
    std::reverse(coefficients.begin(), coefficients.end());  // polyval order
    return coefficients;
  }
  return {0.0};
}

absl::StatusOr<std::string> FitConditionsToData(const ConditionSample& sample,
                                                ModelConfig* config) {
  if (!config->fit_conditions_to_data) return std::string("conditions as configured");
  double e_lo = 0, e_hi = 0;
  bool any = false;
  for (double e : sample.energy_gev) {
    if (!(e > 0) || !std::isfinite(e)) continue;
    e_lo = any ? std::min(e_lo, e) : e;
    e_hi = any ? std::max(e_hi, e) : e;
    any = true;
  }
  if (!any) {
    return absl::InvalidArgumentError(
        "no training event has a positive primary energy; cannot fit the fake conditions");
  }
  std::vector<double> x, y;
  std::set<double> distinct;
  for (size_t i = 0; i < sample.sample_energy_gev.size(); ++i) {
    const double e = sample.sample_energy_gev[i];
    if (!(e > 0) || !std::isfinite(e) || !std::isfinite(sample.sample_ecal[i])) continue;
    const double x100 = e / config->energy_scale;
    x.push_back(x100);
    y.push_back(sample.sample_ecal[i] / (x100 * config->ecal_fit_scale));
    distinct.insert(x100);
  }
  if (x.empty()) {
    return absl::InvalidArgumentError(
        "no sampled training event passes the event selection with a positive energy; cannot fit "
        "the ecal-sum target");
  }
  const int degree = static_cast<int>(std::min<size_t>(4, distinct.size() - 1));
  config->fake_energy_min_gev = e_lo;
  config->fake_energy_max_gev = e_hi;
  config->ecal_fit = FitPolynomial(x, y, degree);
  std::string profiles;
  if (config->profile_loss_weight > 0) {
    if (sample.sample_profiles.size() !=
        sample.sample_energy_gev.size() * static_cast<size_t>(config->profile_slices())) {
      return absl::InternalError("the condition sample's slice sums do not match its events");
    }
    config->profile_fit = FitProfiles(*config, sample);
    profiles = absl::StrFormat("; mean profiles of %d slices", config->profile_slices());
  }
  std::string spots;
  if (config->generator_spots) {
    if (sample.sample_nonzero_cells.size() != sample.sample_energy_gev.size()) {
      return absl::InternalError("the condition sample's non-zero counts do not match its events");
    }
    absl::StatusOr<double> spot_gev = FitSpotEnergyGev(*config, sample);
    if (!spot_gev.ok()) return spot_gev.status();
    if (!(*spot_gev > 0 && *spot_gev <= 1)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "generator_spots: the fitted spot energy %.4g GeV is outside (0, 1] GeV", *spot_gev));
    }
    config->generator_spot_gev = *spot_gev;
    spots = absl::StrFormat("; spots of %.4g GeV", *spot_gev);
  }
  std::string theta;
  if (config->variable_angle() && !sample.theta_rad.empty()) {
    const auto [t_lo, t_hi] = std::minmax_element(sample.theta_rad.begin(), sample.theta_rad.end());
    if (std::isfinite(*t_lo) && std::isfinite(*t_hi) && *t_lo <= *t_hi) {
      config->fake_theta_min_rad = *t_lo;
      config->fake_theta_max_rad = *t_hi;
      theta = absl::StrFormat(", angles %.3f-%.3f rad", *t_lo, *t_hi);
    }
  }
  config->fit_conditions_to_data = false;
  return absl::StrFormat(
      "conditions fitted to the data: fake energies %.4g-%.4g GeV%s; ecal target polynomial "
      "(degree %d, %d events) %s%s%s",
      e_lo, e_hi, theta, config->ecal_fit.size() - 1, x.size(),
      absl::StrJoin(
          config->ecal_fit, ", ",
          [](std::string* out, double c) { absl::StrAppend(out, absl::StrFormat("%.5g", c)); }),
      profiles, spots);
}

}  // namespace gantry::gan
