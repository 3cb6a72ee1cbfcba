// The schema. Append new migrations at the end; never edit one that has shipped.
#include "storage/migrations.h"

#include "base/status_macros.h"
#include "gantry/v1/catalog.pb.h"
#include "gantry/v1/worker.pb.h"
#include "storage/sql_util.h"

namespace gantry::storage {

namespace {

// Version 1: the initial schema: tenants, tokens, datasets, jobs and their events, models, workers.
constexpr const char* kV1 = R"sql(
-- Microseconds since the epoch <-> timestamptz, exact (EXTRACT returns numeric).
CREATE FUNCTION gantry_us(t timestamptz) RETURNS bigint
  LANGUAGE sql IMMUTABLE AS $$ SELECT (EXTRACT(EPOCH FROM t) * 1000000)::bigint $$;
CREATE FUNCTION gantry_ts(us bigint) RETURNS timestamptz
  LANGUAGE sql IMMUTABLE AS $$ SELECT timestamptz 'epoch' + us * interval '1 microsecond' $$;

CREATE TABLE tenants (
  name text PRIMARY KEY,
  admin boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Tokens are stored only as lower-case hex SHA-256 of the secret.
CREATE TABLE api_tokens (
  id text PRIMARY KEY,
  sha256 text NOT NULL UNIQUE,
  tenant text NOT NULL REFERENCES tenants (name) ON DELETE CASCADE,
  description text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz
);
CREATE INDEX api_tokens_tenant ON api_tokens (tenant);

CREATE TABLE join_tokens (
  id text PRIMARY KEY,
  sha256 text NOT NULL UNIQUE,
  description text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz
);

CREATE TABLE jobs (
  seq bigserial NOT NULL UNIQUE,           -- insertion order: keyset pagination, newest first
  id text PRIMARY KEY,                     -- job-<uuid>
  owner text NOT NULL REFERENCES tenants (name),
  state text NOT NULL,                     -- gantry.v1.JobState name
  reason text NOT NULL DEFAULT '',
  message text NOT NULL DEFAULT '',
  spec bytea NOT NULL,                     -- gantry.v1.JobSpec
  labels jsonb NOT NULL DEFAULT '{}',      -- spec.labels, for label selectors
  priority integer NOT NULL DEFAULT 0,
  dataset text NOT NULL DEFAULT '',        -- spec.dataset
  request_id text,                         -- idempotency key, unique per owner
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  started_at timestamptz,
  finished_at timestamptz,
  progress bytea,                          -- gantry.v1.Progress
  restarts integer NOT NULL DEFAULT 0,
  model_ref text NOT NULL DEFAULT '',
  last_sequence bigint NOT NULL DEFAULT 0, -- of job_events
  UNIQUE (owner, request_id)
);
CREATE INDEX jobs_owner_seq ON jobs (owner, seq DESC);
CREATE INDEX jobs_state_seq ON jobs (state, seq);
CREATE INDEX jobs_labels ON jobs USING gin (labels jsonb_path_ops);
CREATE INDEX jobs_owner_dataset ON jobs (owner, dataset);

CREATE TABLE job_events (
  job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  sequence bigint NOT NULL,
  time timestamptz NOT NULL DEFAULT now(),
  event bytea NOT NULL,                    -- gantry.v1.JobEvent
  PRIMARY KEY (job_id, sequence)
);

CREATE TABLE datasets (
  seq bigserial NOT NULL UNIQUE,
  id text PRIMARY KEY,                     -- ds-<uuid>
  owner text NOT NULL REFERENCES tenants (name),
  name text NOT NULL,
  sha256 text NOT NULL,
  size_bytes bigint NOT NULL DEFAULT 0,
  record bytea NOT NULL,                   -- gantry.v1.Dataset
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (owner, name)
);
CREATE INDEX datasets_owner_seq ON datasets (owner, seq DESC);
CREATE INDEX datasets_sha256 ON datasets (sha256);

-- Model names are per owner: (owner, name, version) is unique.
CREATE TABLE models (
  id bigserial PRIMARY KEY,
  owner text NOT NULL REFERENCES tenants (name),
  name text NOT NULL,
  version integer NOT NULL,
  visibility text NOT NULL,                -- gantry.v1.Visibility name
  status text NOT NULL,                    -- gantry.v1.ModelStatus name
  record bytea NOT NULL,                   -- gantry.v1.ModelVersion without tags/aliases/metrics/histograms
  histograms bytea,                        -- gantry.v1.ModelVersion carrying only histograms
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (owner, name, version)
);
CREATE INDEX models_name ON models (name, version);
CREATE INDEX models_public ON models (visibility, id) WHERE visibility = 'VISIBILITY_PUBLIC';

CREATE TABLE model_aliases (
  owner text NOT NULL,
  name text NOT NULL,
  alias text NOT NULL,
  version integer NOT NULL,
  PRIMARY KEY (owner, name, alias),
  FOREIGN KEY (owner, name, version) REFERENCES models (owner, name, version) ON DELETE CASCADE
);

CREATE TABLE model_tags (
  model_id bigint NOT NULL REFERENCES models (id) ON DELETE CASCADE,
  key text NOT NULL,
  value text NOT NULL,
  PRIMARY KEY (model_id, key)
);
CREATE INDEX model_tags_key_value ON model_tags (key, value);

CREATE TABLE model_metrics (
  model_id bigint NOT NULL REFERENCES models (id) ON DELETE CASCADE,
  name text NOT NULL,
  value double precision NOT NULL,
  PRIMARY KEY (model_id, name)
);
CREATE INDEX model_metrics_name_value ON model_metrics (name, value, model_id);

CREATE TABLE workers (
  id text PRIMARY KEY,                     -- wrk-<uuid>, stable per name
  name text NOT NULL UNIQUE,
  registration bytea NOT NULL,             -- gantry.v1.RegisterRequest
  slots integer NOT NULL,
  free_slots integer NOT NULL,
  connected boolean NOT NULL DEFAULT true,
  cached_datasets jsonb NOT NULL DEFAULT '[]',
  registered_at timestamptz NOT NULL DEFAULT now(),
  last_heartbeat timestamptz NOT NULL DEFAULT now()
);
)sql";

// Version 2: restarts from checkpoints. A job's attempt (every restart) and newest uploaded
// checkpoint; every checkpoint uploaded for a job (retention); drained workers.
constexpr const char* kV2 = R"sql(
ALTER TABLE jobs ADD COLUMN attempt integer NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN latest_checkpoint bytea;   -- gantry.v1.CheckpointSaved

CREATE TABLE job_checkpoints (
  job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  sha256 text NOT NULL,
  epoch integer NOT NULL,
  step bigint NOT NULL,
  attempt integer NOT NULL,
  size_bytes bigint NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  deleted_at timestamptz,                  -- set when retention removed the blob
  fom double precision,                    -- validation figure of merit (keep_best), lower is better
  PRIMARY KEY (job_id, sha256)
);
CREATE INDEX job_checkpoints_sha256 ON job_checkpoints (sha256);

ALTER TABLE workers ADD COLUMN draining boolean NOT NULL DEFAULT false;
-- Checkpoint blobs a model version uses are never removed by retention.
ALTER TABLE models ADD COLUMN checkpoint_sha256 text NOT NULL DEFAULT '';
CREATE INDEX models_checkpoint_sha256 ON models (checkpoint_sha256);
)sql";

// Version 3 (quotas and blob lifetime): a reference count per blob, kept by triggers in the same
// transaction as the rows that use the blob (datasets, live job checkpoints, model versions), so
// the garbage collector can delete a blob only when nothing uses it; per-tenant limit overrides.
constexpr const char* kV3 = R"sql(
-- refs: how many rows use the blob. touched_at: when refs last changed or an upload pinned it;
-- the collector deletes a blob only when refs = 0 and touched_at is older than its grace period.
CREATE TABLE blobs (
  sha256 text PRIMARY KEY,
  refs bigint NOT NULL DEFAULT 0,
  touched_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX blobs_unreferenced ON blobs (touched_at) WHERE refs = 0;

CREATE FUNCTION gantry_blob_ref(sha text, delta integer) RETURNS void
  LANGUAGE sql AS $$
    INSERT INTO blobs (sha256, refs) VALUES (sha, GREATEST(delta, 0))
    ON CONFLICT (sha256) DO UPDATE SET refs = GREATEST(blobs.refs + delta, 0), touched_at = now()
  $$;

CREATE FUNCTION gantry_datasets_blob_ref() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.sha256 <> '' THEN
    PERFORM gantry_blob_ref(NEW.sha256, 1);
  END IF;
  IF TG_OP IN ('DELETE', 'UPDATE') AND OLD.sha256 <> '' THEN
    PERFORM gantry_blob_ref(OLD.sha256, -1);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER datasets_blob_ref AFTER INSERT OR DELETE OR UPDATE OF sha256 ON datasets
  FOR EACH ROW EXECUTE FUNCTION gantry_datasets_blob_ref();

-- A job checkpoint uses its blob while deleted_at IS NULL (retention sets deleted_at).
CREATE FUNCTION gantry_job_checkpoints_blob_ref() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.deleted_at IS NULL THEN
    PERFORM gantry_blob_ref(NEW.sha256, 1);
  END IF;
  IF TG_OP IN ('DELETE', 'UPDATE') AND OLD.deleted_at IS NULL THEN
    PERFORM gantry_blob_ref(OLD.sha256, -1);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER job_checkpoints_blob_ref AFTER INSERT OR DELETE OR UPDATE OF sha256, deleted_at
  ON job_checkpoints FOR EACH ROW EXECUTE FUNCTION gantry_job_checkpoints_blob_ref();

CREATE FUNCTION gantry_models_blob_ref() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.checkpoint_sha256 <> '' THEN
    PERFORM gantry_blob_ref(NEW.checkpoint_sha256, 1);
  END IF;
  IF TG_OP IN ('DELETE', 'UPDATE') AND OLD.checkpoint_sha256 <> '' THEN
    PERFORM gantry_blob_ref(OLD.checkpoint_sha256, -1);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER models_blob_ref AFTER INSERT OR DELETE OR UPDATE OF checkpoint_sha256 ON models
  FOR EACH ROW EXECUTE FUNCTION gantry_models_blob_ref();

INSERT INTO blobs (sha256, refs)
SELECT sha256, count(*) FROM (
  SELECT sha256 FROM datasets WHERE sha256 <> ''
  UNION ALL SELECT sha256 FROM job_checkpoints WHERE deleted_at IS NULL
  UNION ALL SELECT checkpoint_sha256 FROM models WHERE checkpoint_sha256 <> ''
) used GROUP BY sha256;

-- Per-tenant overrides of the server's default limits; NULL = the server's default, 0 = unlimited.
CREATE TABLE tenant_limits (
  tenant text PRIMARY KEY REFERENCES tenants (name) ON DELETE CASCADE,
  max_dataset_bytes bigint,
  max_concurrent_jobs integer,
  max_generation_streams integer,
  max_showers_per_minute bigint,
  updated_at timestamptz NOT NULL DEFAULT now()
);
)sql";

// Version 4: worker identity. Each worker's credential (hashed) and the join token that issued it;
// which workers each job attempt's ranks were placed on; server-side keys (rank credentials).
constexpr const char* kV4 = R"sql(
ALTER TABLE workers ADD COLUMN credential_sha256 text;   -- NULL: none or revoked
ALTER TABLE workers ADD COLUMN join_token_id text;
CREATE INDEX workers_join_token ON workers (join_token_id);

CREATE TABLE job_placements (
  job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  attempt integer NOT NULL,
  rank integer NOT NULL,
  worker_id text NOT NULL,
  PRIMARY KEY (job_id, attempt, rank)
);
CREATE INDEX job_placements_worker ON job_placements (worker_id, job_id);

CREATE TABLE server_keys (
  name text PRIMARY KEY,
  secret text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
)sql";

// Version 5: validation curves. One row per validated checkpoint of a job (by step), kept whatever
// checkpoint retention does and deleted with the job.
constexpr const char* kV5 = R"sql(
CREATE TABLE job_validation_points (
  job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  step bigint NOT NULL,
  epoch integer NOT NULL,
  attempt integer NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  metrics jsonb NOT NULL,                  -- {"fom": 0.12, ...}, for queries
  point bytea NOT NULL,                    -- gantry.v1.ValidationPoint without time and histograms
  histograms bytea,                        -- gantry.v1.ValidationPoint with only its histograms
  PRIMARY KEY (job_id, step)
);
)sql";

// Version 6: the BF16 physics guard's outcome per model version (gantry.v1.Bf16Check). Versions
// registered before it read as STATE_UNSPECIFIED (served, shown as "not checked").
constexpr const char* kV6 = R"sql(
ALTER TABLE models ADD COLUMN bf16_state text NOT NULL DEFAULT 'STATE_UNSPECIFIED';
ALTER TABLE models ADD COLUMN bf16_reason text NOT NULL DEFAULT '';
)sql";

// Version 7: what ListModels filters by, copied out of each version's lineage record into columns:
// the dataset reference, the preset and the particle (its gantry.v1.Particle number, which enum
// renames leave alone). Existing versions are filled from their records (BackfillModelLineage).
constexpr const char* kV7 = R"sql(
ALTER TABLE models ADD COLUMN dataset text NOT NULL DEFAULT '';
ALTER TABLE models ADD COLUMN model_preset text NOT NULL DEFAULT '';
ALTER TABLE models ADD COLUMN particle integer NOT NULL DEFAULT 0;
CREATE INDEX models_dataset ON models (dataset, id);
CREATE INDEX models_model_preset ON models (model_preset, id);
)sql";

absl::Status BackfillModelLineage(Transaction& tx) {
  for (const pqxx::row& row : tx.work().exec("SELECT id, record FROM models")) {
    gantry::v1::ModelVersion m;
    RETURN_IF_ERROR(sql::ParseBytes(row[1], &m));
    tx.Exec("migration7_backfill",
            "UPDATE models SET dataset = $2, model_preset = $3, particle = $4 WHERE id = $1",
            row[0].as<int64_t>(), m.lineage().dataset(), m.lineage().model_preset(),
            static_cast<int>(m.particle()));
  }
  return absl::OkStatus();
}

// Version 8: model versions pinned on serving workers by AdminService.LoadModel, with their
// workers and batching settings; re-applied when a worker (re)connects, gone with the version.
constexpr const char* kV8 = R"sql(
CREATE TABLE model_pins (
  owner text NOT NULL,
  name text NOT NULL,
  version integer NOT NULL,
  request bytea NOT NULL,                  -- gantry.v1.LoadModelRequest (model: "owner/name:version")
  served bytea NOT NULL,                   -- gantry.v1.ServedModel
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (owner, name, version),
  FOREIGN KEY (owner, name, version) REFERENCES models (owner, name, version) ON DELETE CASCADE
);
)sql";

// Version 9: enum values carry their enum's name as prefix (JOB_STATE_RUNNING, MODEL_STATUS_READY,
// STATE_AVAILABLE); the stored names follow. Wire numbers are unchanged, so stored protobuf bytes
// need nothing.
constexpr const char* kV9 = R"sql(
UPDATE jobs SET state = 'JOB_STATE_' || state
  WHERE state IN ('QUEUED', 'PLACING', 'RUNNING', 'RESTARTING', 'SUCCEEDED', 'FAILED', 'CANCELLING',
                  'CANCELLED');
UPDATE models SET status = 'MODEL_STATUS_' || substr(status, 7)
  WHERE status IN ('MODEL_READY', 'MODEL_ARCHIVED');
UPDATE models SET bf16_state = 'STATE_' || bf16_state
  WHERE bf16_state IN ('AVAILABLE', 'UNAVAILABLE', 'NOT_CHECKED');
)sql";

// Version 10: pools of workers (AdminService.CreatePool): name and the operator's
// gantry.v1.PoolSpec.
constexpr const char* kV10 = R"sql(
CREATE TABLE pools (
  name text PRIMARY KEY,
  spec bytea NOT NULL,                     -- gantry.v1.PoolSpec
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
)sql";

// Version 11: hyper-parameter studies, their trials and the training jobs of each trial's folds.
// A fold job's state, model and cost are read from its jobs row; only the objective is copied.
constexpr const char* kV11 = R"sql(
CREATE TABLE studies (
  seq bigserial NOT NULL UNIQUE,           -- insertion order: keyset pagination, newest first
  id text PRIMARY KEY,                     -- study-<uuid>
  owner text NOT NULL REFERENCES tenants (name),
  state text NOT NULL,                     -- gantry.v1.StudyState name
  reason text NOT NULL DEFAULT '',
  message text NOT NULL DEFAULT '',
  spec bytea NOT NULL,                     -- gantry.v1.StudySpec (seed resolved)
  request_id text,                         -- idempotency key, unique per owner
  best_trial integer NOT NULL DEFAULT 0,
  best_model_ref text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz,
  UNIQUE (owner, request_id)
);
CREATE INDEX studies_owner_seq ON studies (owner, seq DESC);
CREATE INDEX studies_state ON studies (state);

CREATE TABLE study_trials (
  study_id text NOT NULL REFERENCES studies (id) ON DELETE CASCADE,
  number integer NOT NULL,                 -- 1, 2, ...
  state text NOT NULL,                     -- gantry.v1.TrialState name
  message text NOT NULL DEFAULT '',
  parameters bytea NOT NULL,               -- gantry.v1.Trial with only its parameters
  objective double precision,              -- mean over folds
  objective_stddev double precision NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz,
  PRIMARY KEY (study_id, number)
);

CREATE TABLE study_trial_jobs (
  study_id text NOT NULL,
  number integer NOT NULL,
  fold integer NOT NULL,
  job_id text NOT NULL UNIQUE REFERENCES jobs (id),
  objective double precision,              -- the objective metric of the job's model
  PRIMARY KEY (study_id, number, fold),
  FOREIGN KEY (study_id, number) REFERENCES study_trials (study_id, number) ON DELETE CASCADE
);
)sql";

// Version 12: browser sessions of the HTTP API (WebSessionRepository). Only the SHA-256 of the
// session secret is stored; a session ends with its API token (ON DELETE CASCADE, and the join on
// revoked_at when it is checked).
constexpr const char* kV12 = R"sql(
CREATE TABLE web_sessions (
  sha256 text PRIMARY KEY,
  token_id text NOT NULL REFERENCES api_tokens (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  closed_at timestamptz
);
CREATE INDEX web_sessions_token ON web_sessions (token_id);
CREATE INDEX web_sessions_expires ON web_sessions (expires_at);
)sql";

// Version 13: what each job attempt used: its pool, devices and price per device-hour as placed,
// from its placement to its end (server clock). A running attempt has no ended_at and counts up to
// now. Owner and model name are copied so cost reports need no join. Per-tenant monthly budgets.
constexpr const char* kV13 = R"sql(
CREATE TABLE job_usage (
  job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  attempt integer NOT NULL,
  owner text NOT NULL,
  model_name text NOT NULL DEFAULT '',
  preset text NOT NULL DEFAULT '',
  pool text NOT NULL DEFAULT '',           -- '' = no pool (workers matched by selector)
  device text NOT NULL,                    -- gantry.v1.DeviceKind name
  devices integer NOT NULL,                -- ranks x devices per rank (a CPU rank counts as one)
  price_per_device_hour double precision NOT NULL DEFAULT 0,
  started_at timestamptz NOT NULL DEFAULT now(),
  ended_at timestamptz,
  PRIMARY KEY (job_id, attempt)
);
CREATE INDEX job_usage_owner_started ON job_usage (owner, started_at);
CREATE INDEX job_usage_started ON job_usage (started_at);
CREATE INDEX job_usage_preset_device ON job_usage (preset, device);

ALTER TABLE tenant_limits ADD COLUMN monthly_budget_usd double precision;
)sql";

// Version 14: the scheduler's per-tenant policy: a fair-share weight (NULL = the server's default)
// and per-pool slot quotas.
constexpr const char* kV14 = R"sql(
ALTER TABLE tenant_limits ADD COLUMN fair_share_weight double precision
  CHECK (fair_share_weight > 0 AND fair_share_weight <= 1e6);
CREATE TABLE tenant_pool_quotas (
  tenant text NOT NULL REFERENCES tenants (name) ON DELETE CASCADE,
  pool text NOT NULL,
  max_slots integer NOT NULL CHECK (max_slots >= 0),
  PRIMARY KEY (tenant, pool)
);
)sql";

// Version 15: no worker secret at rest. Registrations stored before kept the credential a
// re-registration shows and the daemon's generation secret (StripWorkerSecrets removes both); the
// worker credentials issued until then are revoked, so a copy of the old rows opens nothing. Live
// workers register again with their join token (after the lease of their old session).
constexpr const char* kV15 = R"sql(
UPDATE workers SET credential_sha256 = NULL;
)sql";

// Version 16: per-tenant overrides of the limits that were server-wide (long-lived calls, showers
// per Generate call) and of the training jobs one study may run (trials x folds).
constexpr const char* kV16 = R"sql(
ALTER TABLE tenant_limits ADD COLUMN max_streams integer CHECK (max_streams >= 0);
ALTER TABLE tenant_limits ADD COLUMN max_showers_per_request bigint
  CHECK (max_showers_per_request >= 0);
ALTER TABLE tenant_limits ADD COLUMN max_study_jobs integer CHECK (max_study_jobs >= 0);
)sql";

// Version 17: the rank-credential key leaves the database. The server now keeps it in a file
// (gantry-server --rank-key-file, default <data-dir>/rank-credentials.key), so a copy of the
// database no longer lets anyone forge rank credentials. The stored key is deleted: a server
// makes a new key in its file, so every rank credential issued before this version stops working
// (ranks running across the upgrade fail their next call with UNAUTHENTICATED and their jobs
// restart with new credentials). The table stays, empty, for servers of older versions.
constexpr const char* kV17 = R"sql(
DELETE FROM server_keys;
)sql";

absl::Status StripWorkerSecrets(Transaction& tx) {
  for (const pqxx::row& row : tx.work().exec("SELECT id, registration FROM workers")) {
    gantry::v1::RegisterRequest r;
    RETURN_IF_ERROR(sql::ParseBytes(row[1], &r));
    if (r.previous_credential().empty() && r.generation_secret().empty()) continue;
    r.clear_previous_credential();
    r.clear_generation_secret();
    tx.Exec("migration15_strip", "UPDATE workers SET registration = $2 WHERE id = $1",
            row[0].as<std::string>(), sql::Bytes(r));
  }
  return absl::OkStatus();
}

}  // namespace

const std::vector<Migration>& EmbeddedMigrations() {
  static const std::vector<Migration>* const kMigrations = new std::vector<Migration>{
      {1, "tenants, tokens, jobs, job events, datasets, models, workers", kV1},
      {2, "job attempts, checkpoints and drained workers", kV2},
      {3, "blob reference counts and per-tenant limits", kV3},
      {4, "worker credentials, job placements, server keys", kV4},
      {5, "job validation points", kV5},
      {6, "the BF16 physics guard's outcome per model version", kV6},
      {7, "dataset, preset and particle of model versions as columns", kV7, &BackfillModelLineage},
      {8, "model versions pinned on serving workers", kV8},
      {9, "enum value names with their enum's prefix", kV9},
      {10, "pools of workers", kV10},
      {11, "hyper-parameter studies, trials and trial jobs", kV11},
      {12, "browser sessions of the HTTP API", kV12},
      {13, "device-hours and cost per job attempt, monthly budgets", kV13},
      {14, "tenants' fair-share weights and per-pool slot quotas", kV14},
      {15, "no worker secret at rest", kV15, &StripWorkerSecrets},
      {16, "per-tenant streams, showers per request and jobs per study", kV16},
      {17, "the rank-credential key out of the database", kV17},
  };
  return *kMigrations;
}

}  // namespace gantry::storage
