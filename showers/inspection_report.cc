#include "showers/inspection_report.h"

#include <cmath>
#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace gantry::showers {
namespace {

constexpr size_t kMaxMessage = 4096;

std::string CleanParticle(const std::string& p) {
  std::string out;
  for (char c : p) {
    if (out.size() == 32) break;
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') out.push_back(c);
  }
  return out;
}

absl::Status Malformed(absl::string_view what) {
  return absl::InternalError(absl::StrCat("malformed inspection report: ", what));
}

bool Doubles(const std::vector<absl::string_view>& f, size_t n, std::vector<double>* out) {
  if (f.size() != n + 1) return false;
  out->resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (!absl::SimpleAtod(f[i + 1], &(*out)[i]) || !std::isfinite((*out)[i])) return false;
  }
  return true;
}

}  // namespace

std::string FormatInspectionReport(const absl::StatusOr<DatasetInfo>& result) {
  if (!result.ok()) {
    std::string message(result.status().message().substr(0, kMaxMessage));
    return absl::StrCat("error ", static_cast<int>(result.status().code()), "\n", message);
  }
  const DatasetInfo& i = *result;
  return absl::StrFormat(
      "ok\nlayout %d\nshape %d %d %d\nevents %d\nenergy %.17g %.17g\ntheta %d %.17g %.17g\n"
      "total %.17g\nparticle %s\n",
      static_cast<int>(i.layout), i.shape[0], i.shape[1], i.shape[2], i.events, i.energy_min_gev,
      i.energy_max_gev, i.has_theta ? 1 : 0, i.theta_min_rad, i.theta_max_rad, i.total_deposit_gev,
      CleanParticle(i.particle));
}

absl::StatusOr<DatasetInfo> ParseInspectionReport(absl::string_view text) {
  if (text.size() > 2 * kMaxMessage + 64) return Malformed("too long");
  if (absl::StartsWith(text, "error ")) {
    const size_t eol = text.find('\n');
    int code = 0;
    if (eol == absl::string_view::npos || !absl::SimpleAtoi(text.substr(6, eol - 6), &code) ||
        code <= 0 || code > 16) {
      return Malformed("bad error line");
    }
    return absl::Status(static_cast<absl::StatusCode>(code), text.substr(eol + 1));
  }
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (lines.empty() || lines[0] != "ok") return Malformed("no result line");
  DatasetInfo info;
  std::set<std::string> seen;
  for (size_t n = 1; n < lines.size(); ++n) {
    if (lines[n].empty()) continue;
    std::vector<absl::string_view> f = absl::StrSplit(lines[n], ' ');
    const std::string key(f[0]);
    if (!seen.insert(key).second) return Malformed(absl::StrCat("repeated '", key, "'"));
    std::vector<double> d;
    if (key == "layout") {
      int layout = -1;
      if (f.size() != 2 || !absl::SimpleAtoi(f[1], &layout) || layout < 0 || layout > 2) {
        return Malformed("layout");
      }
      info.layout = static_cast<Layout>(layout);
    } else if (key == "shape") {
      if (f.size() != 4) return Malformed("shape");
      for (int k = 0; k < 3; ++k) {
        if (!absl::SimpleAtoi(f[k + 1], &info.shape[k]) || info.shape[k] < 1 ||
            info.shape[k] > 1024) {
          return Malformed("shape");
        }
      }
    } else if (key == "events") {
      if (f.size() != 2 || !absl::SimpleAtoi(f[1], &info.events) || info.events < 0) {
        return Malformed("events");
      }
    } else if (key == "energy") {
      if (!Doubles(f, 2, &d)) return Malformed("energy");
      info.energy_min_gev = d[0];
      info.energy_max_gev = d[1];
    } else if (key == "theta") {
      if (!Doubles(f, 3, &d)) return Malformed("theta");
      info.has_theta = d[0] != 0;
      info.theta_min_rad = d[1];
      info.theta_max_rad = d[2];
    } else if (key == "total") {
      if (!Doubles(f, 1, &d)) return Malformed("total");
      info.total_deposit_gev = d[0];
    } else if (key == "particle") {
      if (f.size() != 2 || f[1].size() > 32) return Malformed("particle");
      info.particle = CleanParticle(std::string(f[1]));
    } else {
      return Malformed(absl::StrCat("unknown key '", key.substr(0, 32), "'"));
    }
  }
  for (const char* key : {"layout", "shape", "events", "energy", "theta", "total", "particle"}) {
    if (seen.count(key) == 0) return Malformed(absl::StrCat("no '", key, "'"));
  }
  return info;
}

}  // namespace gantry::showers
