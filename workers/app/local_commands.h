// LocalCommands: the gantry-worker subcommands that run without the service (local-train,
// local-generate, export, toymc, checkpoint-diff): the developer's and the benchmarks' entry point.
#ifndef GANTRY_WORKERS_APP_LOCAL_COMMANDS_H_
#define GANTRY_WORKERS_APP_LOCAL_COMMANDS_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace gantry::app {

struct LocalTrainOptions {
  std::string preset = "tiny";
  std::string data;    // "toymc:..." spec or an HDF5 file
  std::string out;     // checkpoint written after every epoch
  std::string resume;  // optional checkpoint to continue from
  int64_t epochs = 1;
  int64_t batch = 0;            // 0: the preset's default
  double learning_rate = 0;     // 0: the preset's
  double lr_decay_to = 1.0;     // cosine decay to this fraction over the run; 1: constant
  double label_flip = -1;       // < 0: the preset's
  int64_t steps_per_epoch = 0;  // 0: the whole data set per epoch
  std::string model_set;        // "key=value;..." model config overrides (OverrideModelConfig)
  uint64_t seed = 1;
  int threads = 2;
};

struct LocalGenerateOptions {
  std::string checkpoint;
  std::string out;              // HDF5 file
  std::vector<float> energies;  // GeV; or the range below
  double energy_min = 0, energy_max = 0;
  int64_t count = 0;                              // with the range: showers drawn U(min, max)
  double theta_min_deg = 90, theta_max_deg = 90;  // variable-angle models only
  uint64_t seed = 1;
  int64_t batch = 128;
  int threads = 2;
};

struct ExportOptions {
  std::string checkpoint;
  std::string format;  // "onnx", "pytorch" or "torchscript"
  std::string profile = "gantry";  // "gantry", "par04" or "ddml" (jobspec/export_profile.h)
  std::string out;     // written as out.tmp, then renamed
  bool force = false;  // replace an existing out
};

struct ToyMcOptions {
  std::string spec = "toymc:";  // ParseToyMcSpec syntax
  std::string out;
};

// Each prints progress to `log` and returns the first error.
absl::Status RunLocalTrain(const LocalTrainOptions& options, std::ostream& log);
absl::Status RunLocalGenerate(const LocalGenerateOptions& options, std::ostream& log);
absl::Status RunToyMc(const ToyMcOptions& options, std::ostream& log);
// `export`: the checkpoint's generator as ONNX or a PyTorch state dict (workers/export) into
// options.out (FILE.tmp, then renamed). ALREADY_EXISTS when out exists and force is off.
absl::Status RunExport(const ExportOptions& options, std::ostream& log);

// `checkpoint-diff A B`: loads both checkpoints (with their optimisers) and prints one line per
// tensor of both networks ("<name> max_abs_diff <d>", then "<n> of <m> tensors differ"), and the
// optimiser tensors that differ. Returns the exit code: 0 when every parameter and buffer is
// identical bit for bit, 1 when some differ, 2 when a file cannot be read (the error on `err`).
int RunCheckpointDiff(const std::string& a, const std::string& b, std::ostream& out,
                      std::ostream& err);

// `gantry-worker verify-checkpoint --fd=N` (hidden; run sandboxed by CheckpointVerifier): reads
// the checkpoint open as descriptor `fd` completely and prints FormatVerifyReport. Returns 0 when
// a report was printed, also for a refused checkpoint.
int RunVerifyCheckpoint(int fd, std::ostream& out);

}  // namespace gantry::app

#endif  // GANTRY_WORKERS_APP_LOCAL_COMMANDS_H_
