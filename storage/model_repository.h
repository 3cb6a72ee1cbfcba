// ModelRepository: the model registry (versions, aliases, tags, metrics, histograms, archive).
#ifndef GANTRY_STORAGE_MODEL_REPOSITORY_H_
#define GANTRY_STORAGE_MODEL_REPOSITORY_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gantry/v1/catalog.pb.h"
#include "storage/database.h"
#include "storage/page.h"

namespace gantry::storage {

// What ListModels filters and sorts by.
struct ModelFilter {
  std::string name;                                      // exact name; empty = all names
  std::map<std::string, std::string> tags;               // every pair must match
  std::vector<gantry::v1::MetricFilter> metric_filters;  // every filter must hold (min <= v <= max)
  // "" or "created_at": newest first. "metric:<name>": ascending by that metric (lower is better);
  // versions without that metric are left out. Anything else is INVALID_ARGUMENT.
  std::string order_by;
  bool include_archived = false;
  // Lineage filters (empty / PARTICLE_UNSPECIFIED = any). `dataset` matches Lineage.dataset exactly
  // (a "ds-" id, "toymc:..." or "file://..."), or names a dataset: the viewer's own dataset of that
  // name (any owner's for the admin view) matches the versions trained on its id.
  std::string dataset;
  std::string model_preset;  // Lineage.model_preset
  gantry::v1::Particle particle = gantry::v1::PARTICLE_UNSPECIFIED;
  std::string name_contains;  // a substring of the name, any case; empty = any
  std::string owner;          // the owning tenant (within what the viewer sees); empty = any
  std::string alias;          // versions that carry this alias; empty = any
  // "[owner/]name:version" of a version the viewer sees: the versions whose Lineage.parent_model
  // names it ("name:version" owned by the parent's owner, or by anyone when the parent is public
  // and they own no version of that name and number; or "owner/name:version"). Empty = any.
  std::string fine_tuned_from;
};

// What Update changes; members left unset are kept.
struct ModelUpdate {
  std::optional<std::string> description;
  std::optional<gantry::v1::Visibility> visibility;        // PRIVATE or PUBLIC
  std::optional<std::map<std::string, std::string>> tags;  // replaces every tag
};

// Thread-safe (stateless over a Database, which must outlive it).
//
// Namespaces: model names are per owner (tenant); (owner, name, version) is unique and versions
// count 1, 2, ... per (owner, name). A reference is "name:version" or "name@alias", optionally
// qualified as "owner/name:version" / "owner/name@alias". An unqualified reference resolves in the
// viewer's own namespace first, then among PUBLIC versions of other owners; when several other
// owners have a matching public version it is FAILED_PRECONDITION ("ambiguous ...; qualify it as
// owner/name..."). A version is visible to a viewer when viewer == owner or it is PUBLIC; invisible
// = NOT_FOUND. viewer "" means an admin view (everything visible). Changes: only the owner may
// change a version; a non-owner gets NOT_FOUND for a private version and PERMISSION_DENIED for a
// public one.
class ModelRepository {
 public:
  explicit ModelRepository(Database& db) : db_(db) {}

  // Registers a new version of model.owner()/model.name() (both required: INVALID_ARGUMENT) with
  // version = max(version of that name) + 1, race-safe under concurrent calls. Status READY,
  // created_at = now; tags, metrics and histograms are stored; version and aliases of `model` are
  // ignored. Returns the stored record (with histograms).
  absl::StatusOr<gantry::v1::ModelVersion> Register(const gantry::v1::ModelVersion& model);

  // Resolves a reference (see above). Archived versions resolve too (status MODEL_ARCHIVED);
  // callers that generate must refuse them. Histograms included. INVALID_ARGUMENT for a malformed
  // reference.
  absl::StatusOr<gantry::v1::ModelVersion> Resolve(const std::string& viewer,
                                                   const std::string& ref);

  // Visible versions matching `filter` (no histograms). Archived ones only with include_archived.
  absl::StatusOr<Page<gantry::v1::ModelVersion>> List(const std::string& viewer,
                                                      const ModelFilter& filter, int page_size,
                                                      const std::string& page_token);

  // Points `alias` of owner/name at `version`, moving it atomically if it pointed elsewhere (one
  // version per alias per name). NOT_FOUND when the version does not exist; FAILED_PRECONDITION
  // when it is archived. Returns the version now carrying the alias.
  absl::StatusOr<gantry::v1::ModelVersion> SetAlias(const std::string& owner,
                                                    const std::string& name,
                                                    const std::string& alias, int version);
  // NOT_FOUND when the alias does not exist.
  absl::Status DeleteAlias(const std::string& owner, const std::string& name,
                           const std::string& alias);

  // Sets (adds or overwrites) and removes tags of the referenced version; returns it.
  absl::StatusOr<gantry::v1::ModelVersion> SetTags(const std::string& owner, const std::string& ref,
                                                   const std::map<std::string, std::string>& set,
                                                   const std::vector<std::string>& remove);

  // Applies `update` to the referenced version (owner only, as SetTags) in one transaction and
  // returns it. An archived version keeps its visibility and tags: changing either is
  // FAILED_PRECONDITION; its description may change. An update that changes nothing succeeds.
  absl::StatusOr<gantry::v1::ModelVersion> Update(const std::string& owner, const std::string& ref,
                                                  const ModelUpdate& update);

  // The versions (every owner's, archived ones too) stored with each of `checkpoint_sha256s`, as
  // "owner/name:version", sorted; a checkpoint with none is absent. At most 1000 checkpoints
  // (INVALID_ARGUMENT beyond).
  absl::StatusOr<std::map<std::string, std::vector<std::string>>> VersionsByCheckpoint(
      const std::vector<std::string>& checkpoint_sha256s);

  // Marks the referenced version MODEL_ARCHIVED (idempotent) and drops its aliases; returns it.
  absl::StatusOr<gantry::v1::ModelVersion> Archive(const std::string& owner,
                                                   const std::string& ref);

 private:
  Database& db_;
};

}  // namespace gantry::storage

#endif  // GANTRY_STORAGE_MODEL_REPOSITORY_H_
