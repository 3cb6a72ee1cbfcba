// CheckpointModelExporter: the daemon's ModelExporter: fetches a served model's checkpoint as the
// model loader does (CheckpointModelLoaderOptions: <models_dir>/<sha256>.pt, verified, read once
// in a sandboxed child first), then exports its generator with workers/export in this process.
#ifndef GANTRY_WORKERS_SERVING_CHECKPOINT_MODEL_EXPORTER_H_
#define GANTRY_WORKERS_SERVING_CHECKPOINT_MODEL_EXPORTER_H_

#include "workers/agent/agent_options.h"
#include "workers/serving/checkpoint_model_loader.h"
#include "workers/serving/model_exporter.h"

namespace gantry::serving {

// Errors: FetchModelCheckpoint's, the sandboxed verification's (INVALID_ARGUMENT "checkpoint
// <sha256> could not be loaded safely"), ExportCheckpoint's, with this worker's file paths
// replaced ("model <sha256>", "<model cache>"; the full message goes to stderr). Logs one line per
// export. Thread-safe (each call reads the checkpoint itself).
ModelExporter MakeCheckpointModelExporter(CheckpointModelLoaderOptions options);

// For DaemonMain: the exporter over <cache-dir>/models (the model loader's folder).
ModelExporter MakeDaemonModelExporter(const agent::AgentOptions& options);

}  // namespace gantry::serving

#endif  // GANTRY_WORKERS_SERVING_CHECKPOINT_MODEL_EXPORTER_H_
