#include "workers/baseline/baseline_checkpoint.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/atomic_file.h"
#include "base/sha256.h"
#include "workers/gan/checkpoint_envelope.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the values are stored as little-endian");

namespace gantry::baseline {
namespace {

constexpr size_t kMaxTextBytes = 4096;  // the text lines before the values

std::string Number(double x) { return absl::StrFormat("%.17g", x); }

// The payload's text lines, in order: key, then its values.
class LineReader {
 public:
  LineReader(absl::string_view text, absl::string_view name) : rest_(text), name_(name) {}

  // The values of the next line, which must start with `key`; DATA_LOSS otherwise.
  absl::StatusOr<std::vector<absl::string_view>> Next(absl::string_view key) {
    const size_t end = rest_.find('\n');
    if (end == absl::string_view::npos) return Damaged(key);
    std::vector<absl::string_view> words = absl::StrSplit(rest_.substr(0, end), ' ');
    rest_.remove_prefix(end + 1);
    if (words.empty() || words[0] != key) return Damaged(key);
    words.erase(words.begin());
    return words;
  }

  absl::Status Damaged(absl::string_view key) const {
    return absl::DataLossError(absl::StrCat("baseline checkpoint ", name_, ": the line \"", key,
                                            "\" is missing or damaged"));
  }

 private:
  absl::string_view rest_;
  absl::string_view name_;
};

absl::StatusOr<double> ParseDouble(absl::string_view word, const LineReader& lines,
                                   absl::string_view key) {
  double x = 0;
  if (!absl::SimpleAtod(word, &x)) return lines.Damaged(key);
  return x;
}

absl::StatusOr<int64_t> ParseInt(absl::string_view word, const LineReader& lines,
                                 absl::string_view key, int64_t lo, int64_t hi) {
  int64_t x = 0;
  if (!absl::SimpleAtoi(word, &x) || x < lo || x > hi) return lines.Damaged(key);
  return x;
}

using Words = std::vector<absl::string_view>;

// The offset of the newline that ends the payload's text lines.
absl::StatusOr<size_t> FindTextEnd(absl::string_view payload, absl::string_view name) {
  // The text ends at the "values" line, within kMaxTextBytes.
  const size_t values_at = payload.substr(0, kMaxTextBytes).find("values float32le ");
  if (values_at == absl::string_view::npos) {
    return absl::DataLossError(absl::StrCat("baseline checkpoint ", name,
                                            ": no \"values\" line in its first ", kMaxTextBytes,
                                            " bytes"));
  }
  const size_t text_end = payload.find('\n', values_at);
  if (text_end == absl::string_view::npos || text_end >= kMaxTextBytes) {
    return absl::DataLossError(absl::StrCat("baseline checkpoint ", name, ": damaged text"));
  }
  return text_end;
}

// Reads the "kind" and "grid" lines into p, bounding the grid's cells.
absl::Status ParseKindAndGrid(LineReader& lines, absl::string_view name, BaselineParameters* p) {
  absl::StatusOr<Words> kind = lines.Next("kind");
  if (!kind.ok()) return kind.status();
  std::optional<BaselineKind> parsed_kind =
      kind->size() == 1 ? BaselineKindOfPreset((*kind)[0]) : std::nullopt;
  if (!parsed_kind.has_value()) return lines.Damaged("kind");
  p->kind = *parsed_kind;
  absl::StatusOr<Words> grid = lines.Next("grid");
  if (!grid.ok()) return grid.status();
  if (grid->size() != 3) return lines.Damaged("grid");
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<int64_t> n = ParseInt((*grid)[i], lines, "grid", 1, kMaxBaselineCells);
    if (!n.ok()) return n.status();
    p->grid[i] = *n;
  }
  if (p->grid[0] * p->grid[1] > kMaxBaselineCells || p->cells() > kMaxBaselineCells) {
    return absl::DataLossError(absl::StrCat("baseline checkpoint ", name, ": a grid of ",
                                            p->grid[0], "x", p->grid[1], "x", p->grid[2],
                                            " is over ", kMaxBaselineCells, " cells"));
  }
  return absl::OkStatus();
}

// Reads the "modes" and "sigma" lines (sigma into p); returns the bounded mode count.
absl::StatusOr<int64_t> ParseModesAndSigma(LineReader& lines, BaselineParameters* p) {
  absl::StatusOr<Words> modes = lines.Next("modes");
  if (!modes.ok()) return modes.status();
  if (modes->size() != 1) return lines.Damaged("modes");
  absl::StatusOr<int64_t> mode_count = ParseInt((*modes)[0], lines, "modes", 0, kMaxBaselineModes);
  if (!mode_count.ok()) return mode_count.status();
  absl::StatusOr<Words> sigma = lines.Next("sigma");
  if (!sigma.ok()) return sigma.status();
  if (static_cast<int64_t>(sigma->size()) != *mode_count) return lines.Damaged("sigma");
  for (absl::string_view word : *sigma) {
    absl::StatusOr<double> s = ParseDouble(word, lines, "sigma");
    if (!s.ok()) return s.status();
    p->sigma.push_back(*s);
  }
  return *mode_count;
}

// The one value of the next line, which must start with `key`.
absl::StatusOr<absl::string_view> NextSingleValue(LineReader& lines, absl::string_view key) {
  absl::StatusOr<Words> words = lines.Next(key);
  if (!words.ok()) return words.status();
  if (words->size() != 1) return lines.Damaged(key);
  return (*words)[0];
}

// Reads the "spot_gev", "energy_range_gev", "fit_events" and "data_nonzero_cells" lines into p.
absl::Status ParseFitSettings(LineReader& lines, BaselineParameters* p) {
  absl::StatusOr<absl::string_view> spot = NextSingleValue(lines, "spot_gev");
  if (!spot.ok()) return spot.status();
  absl::StatusOr<double> spot_gev = ParseDouble(*spot, lines, "spot_gev");
  if (!spot_gev.ok()) return spot_gev.status();
  p->spot_gev = *spot_gev;
  absl::StatusOr<Words> range = lines.Next("energy_range_gev");
  if (!range.ok()) return range.status();
  if (range->size() != 2) return lines.Damaged("energy_range_gev");
  absl::StatusOr<double> lo = ParseDouble((*range)[0], lines, "energy_range_gev");
  absl::StatusOr<double> hi = ParseDouble((*range)[1], lines, "energy_range_gev");
  if (!lo.ok() || !hi.ok()) return lines.Damaged("energy_range_gev");
  p->energy_min_gev = *lo;
  p->energy_max_gev = *hi;
  absl::StatusOr<absl::string_view> events = NextSingleValue(lines, "fit_events");
  if (!events.ok()) return events.status();
  absl::StatusOr<int64_t> fit_events = ParseInt(*events, lines, "fit_events", 1, int64_t{1} << 40);
  if (!fit_events.ok()) return fit_events.status();
  p->fit_events = *fit_events;
  absl::StatusOr<absl::string_view> nonzero = NextSingleValue(lines, "data_nonzero_cells");
  if (!nonzero.ok()) return nonzero.status();
  absl::StatusOr<double> nonzero_cells = ParseDouble(*nonzero, lines, "data_nonzero_cells");
  if (!nonzero_cells.ok()) return nonzero_cells.status();
  p->data_nonzero_cells = *nonzero_cells;
  return absl::OkStatus();
}

// Checks the "values" line against the grid and modes, then copies the value bytes (exactly that
// many, checked first) into p's a, b and modes.
absl::Status ParseValues(LineReader& lines, absl::string_view bytes, absl::string_view name,
                         int64_t mode_count, BaselineParameters* p) {
  absl::StatusOr<Words> values = lines.Next("values");
  if (!values.ok()) return values.status();
  const int64_t cells = p->cells();
  const int64_t expected = (2 + mode_count) * cells;
  if (values->size() != 2 || (*values)[0] != "float32le") return lines.Damaged("values");
  absl::StatusOr<int64_t> count =
      ParseInt((*values)[1], lines, "values", expected, expected);  // bounded by the grid
  if (!count.ok()) return count.status();
  // The value bytes must be exactly there before anything is allocated for them.
  if (bytes.size() != static_cast<size_t>(expected) * 4) {
    return absl::DataLossError(absl::StrCat("baseline checkpoint ", name, " has ", bytes.size(),
                                            " bytes of values; its grid and ", mode_count,
                                            " modes need ", expected * 4));
  }
  const char* cursor = bytes.data();
  auto take = [&](std::vector<float>* v) {
    v->resize(static_cast<size_t>(cells));
    std::memcpy(v->data(), cursor, static_cast<size_t>(cells) * 4);
    cursor += cells * 4;
  };
  take(&p->a);
  take(&p->b);
  p->modes.resize(static_cast<size_t>(mode_count));
  for (std::vector<float>& mode : p->modes) take(&mode);
  return absl::OkStatus();
}

}  // namespace

std::string SerializeBaselinePayload(const BaselineParameters& p) {
  const int64_t cells = p.cells();
  const int64_t values = (2 + static_cast<int64_t>(p.modes.size())) * cells;
  std::string out = absl::StrCat(
      gan::kBaselinePayloadMagic, "kind ", BaselinePresetName(p.kind), "\n", "grid ", p.grid[0],
      " ", p.grid[1], " ", p.grid[2], "\n", "modes ", p.modes.size(), "\n", "sigma",
      p.sigma.empty() ? "" : " ",
      absl::StrJoin(p.sigma, " ", [](std::string* s, double x) { s->append(Number(x)); }), "\n",
      "spot_gev ", Number(p.spot_gev), "\n", "energy_range_gev ", Number(p.energy_min_gev), " ",
      Number(p.energy_max_gev), "\n", "fit_events ", p.fit_events, "\n", "data_nonzero_cells ",
      Number(p.data_nonzero_cells), "\n", "values float32le ", values, "\n");
  const size_t text = out.size();
  out.resize(text + static_cast<size_t>(values) * 4);
  char* cursor = out.data() + text;
  auto put = [&](const std::vector<float>& v) {
    std::memcpy(cursor, v.data(), v.size() * 4);
    cursor += v.size() * 4;
  };
  put(p.a);
  put(p.b);
  for (const std::vector<float>& mode : p.modes) put(mode);
  return out;
}

absl::StatusOr<BaselineParameters> ParseBaselinePayload(absl::string_view payload,
                                                        absl::string_view name) {
  if (gan::CheckpointKindOfPayload(payload) != gan::CheckpointKind::kBaseline) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint ", name, " does not hold a baseline (it holds networks)"));
  }
  payload.remove_prefix(std::strlen(gan::kBaselinePayloadMagic));
  absl::StatusOr<size_t> text_end = FindTextEnd(payload, name);
  if (!text_end.ok()) return text_end.status();
  LineReader lines(payload.substr(0, *text_end + 1), name);
  BaselineParameters p;
  if (absl::Status st = ParseKindAndGrid(lines, name, &p); !st.ok()) return st;
  absl::StatusOr<int64_t> mode_count = ParseModesAndSigma(lines, &p);
  if (!mode_count.ok()) return mode_count.status();
  if (absl::Status st = ParseFitSettings(lines, &p); !st.ok()) return st;
  const absl::string_view bytes = payload.substr(*text_end + 1);
  if (absl::Status st = ParseValues(lines, bytes, name, *mode_count, &p); !st.ok()) return st;
  if (absl::Status valid = ValidateBaselineParameters(p); !valid.ok()) {
    return absl::DataLossError(absl::StrCat("baseline checkpoint ", name, ": ", valid.message()));
  }
  return p;
}

absl::Status WriteBaselineCheckpoint(const std::string& path, const BaselineParameters& p) {
  if (absl::Status valid = ValidateBaselineParameters(p); !valid.ok()) return valid;
  const std::string payload = SerializeBaselinePayload(p);
  const std::string header = absl::StrCat(gan::kCheckpointMagic, "\n", "sha256 ",
                                          Sha256Hex(payload), "\n", "bytes ", payload.size(), "\n");
  return WriteFileAtomically(path, {header, payload});
}

absl::StatusOr<BaselineParameters> ReadBaselineCheckpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("checkpoint ", path, " cannot be opened"));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size < 0) return absl::DataLossError(absl::StrCat("checkpoint ", path, " cannot be read"));
  if (size > kMaxBaselineCheckpointBytes) {
    return absl::InvalidArgumentError(absl::StrCat("baseline checkpoint ", path, " has ", size,
                                                   " bytes; at most ", kMaxBaselineCheckpointBytes,
                                                   " are accepted"));
  }
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  absl::StatusOr<absl::string_view> payload = gan::ParseCheckpointEnvelope(file, path);
  if (!payload.ok()) return payload.status();
  return ParseBaselinePayload(*payload, path);
}

}  // namespace gantry::baseline
