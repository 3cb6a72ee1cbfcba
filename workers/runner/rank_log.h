// RankLog: where a rank's stages send their log lines ("INFO", "WARNING" or "ERROR", and the text).
// RankRunner forwards them to the daemon as LogLine messages; tests collect them.
#ifndef GANTRY_WORKERS_RUNNER_RANK_LOG_H_
#define GANTRY_WORKERS_RUNNER_RANK_LOG_H_

#include <functional>
#include <string>

namespace gantry::runner {

using RankLog = std::function<void(const std::string& level, const std::string& text)>;

}  // namespace gantry::runner

#endif  // GANTRY_WORKERS_RUNNER_RANK_LOG_H_
