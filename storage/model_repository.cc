#include "storage/model_repository.h"

#include <cmath>
#include <unordered_map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/json_string.h"
#include "base/status_macros.h"
#include "storage/sql_util.h"
#include "storage/transaction.h"

namespace gantry::storage {

namespace {

using gantry::v1::ModelVersion;

#define MODEL_COLUMNS                                                                             \
  "m.id, m.owner, m.name, m.version, m.visibility, m.status, m.record, gantry_us(m.created_at), " \
  "m.bf16_state, m.bf16_reason"

// The visibility and listing filters shared by both orderings of List.
#define MODEL_LIST_WHERE                                                                    \
  "($1 = '' OR m.owner = $1 OR m.visibility = 'VISIBILITY_PUBLIC') "                        \
  "AND ($2 = '' OR m.name = $2) AND ($3 OR m.status <> 'MODEL_STATUS_ARCHIVED') "           \
  "AND NOT EXISTS (SELECT 1 FROM jsonb_each_text($4::jsonb) f WHERE NOT EXISTS ("           \
  "  SELECT 1 FROM model_tags t WHERE t.model_id = m.id AND t.key = f.key "                 \
  "  AND t.value = f.value)) "                                                              \
  "AND NOT EXISTS (SELECT 1 FROM jsonb_to_recordset($5::jsonb) AS f(name text, lo float8, " \
  "  hi float8) WHERE NOT EXISTS (SELECT 1 FROM model_metrics x WHERE x.model_id = m.id "   \
  "  AND x.name = f.name AND (f.lo IS NULL OR x.value >= f.lo) "                            \
  "  AND (f.hi IS NULL OR x.value <= f.hi))) "                                              \
  "AND (cardinality($6::text[]) = 0 OR m.dataset = ANY($6::text[])) "                       \
  "AND ($7 = '' OR m.model_preset = $7) AND ($8::integer = 0 OR m.particle = $8::integer) "

// The search terms of ModelFilter (name substring, owner, alias) with their parameter numbers.
#define MODEL_SEARCH_WHERE(q, owner, alias)                                        \
  "AND (" q " = '' OR m.name ILIKE " q ") AND (" owner " = '' OR m.owner = " owner \
  ") "                                                                             \
  "AND (" alias                                                                    \
  " = '' OR EXISTS (SELECT 1 FROM model_aliases a WHERE a.owner = m.owner "        \
  "AND a.name = m.name AND a.version = m.version AND a.alias = " alias ")) "

// A parsed reference: [owner/]name:version or [owner/]name@alias.
struct ModelRef {
  std::string owner;  // empty = unqualified
  std::string name;
  int version = 0;    // > 0 for name:version
  std::string alias;  // non-empty for name@alias
};

absl::StatusOr<ModelRef> ParseRef(const std::string& ref) {
  const absl::Status bad = absl::InvalidArgumentError(
      absl::StrCat("model reference \"", ref.substr(0, 200),
                   "\" is malformed; write name:version (e.g. electrons:3) or name@alias (e.g. "
                   "electrons@champion), "
                   "optionally prefixed by owner/"));
  ModelRef out;
  std::string rest = ref;
  if (size_t slash = rest.find('/'); slash != std::string::npos) {
    out.owner = rest.substr(0, slash);
    rest = rest.substr(slash + 1);
    if (out.owner.empty()) return bad;
  }
  if (size_t at = rest.find('@'); at != std::string::npos) {
    out.name = rest.substr(0, at);
    out.alias = rest.substr(at + 1);
    if (out.name.empty() || out.alias.empty()) return bad;
    return out;
  }
  size_t colon = rest.rfind(':');
  if (colon == std::string::npos) return bad;
  out.name = rest.substr(0, colon);
  if (out.name.empty() || !absl::SimpleAtoi(rest.substr(colon + 1), &out.version) ||
      out.version <= 0) {
    return bad;
  }
  return out;
}

absl::StatusOr<ModelVersion> ModelFromRow(const pqxx::row& row) {
  ModelVersion m;
  RETURN_IF_ERROR(sql::ParseBytes(row[6], &m));
  m.set_owner(row[1].as<std::string>());
  m.set_name(row[2].as<std::string>());
  m.set_version(row[3].as<int>());
  gantry::v1::Visibility visibility = gantry::v1::VISIBILITY_PRIVATE;
  gantry::v1::Visibility_Parse(row[4].as<std::string>(), &visibility);
  m.set_visibility(visibility);
  gantry::v1::ModelStatus status = gantry::v1::MODEL_STATUS_READY;
  gantry::v1::ModelStatus_Parse(row[5].as<std::string>(), &status);
  m.set_status(status);
  sql::SetTimestamp(row[7], m.mutable_created_at());
  gantry::v1::Bf16Check::State bf16 = gantry::v1::Bf16Check::STATE_UNSPECIFIED;
  gantry::v1::Bf16Check::State_Parse(row[8].as<std::string>(), &bf16);
  m.mutable_bf16()->set_state(bf16);
  m.mutable_bf16()->set_reason(row[9].as<std::string>());
  return m;
}

std::string IdArray(const std::vector<int64_t>& ids) {
  return absl::StrCat("{", absl::StrJoin(ids, ","), "}");
}

// A PostgreSQL text[] literal: {"a","b"}, each element quoted with " and \ escaped. An array
// parameter (not a subquery) lets the planner see the values and use their index.
std::string TextArray(const std::vector<std::string>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += '"';
    for (char c : values[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

// Fills tags, metrics and aliases of `models` (whose row ids are `ids`, same order).
void LoadExtras(Transaction& tx, const std::vector<int64_t>& ids,
                std::vector<ModelVersion*> models) {
  if (ids.empty()) return;
  std::unordered_map<int64_t, ModelVersion*> by_id;
  for (size_t i = 0; i < ids.size(); ++i) by_id[ids[i]] = models[i];
  const std::string array = IdArray(ids);
  for (const pqxx::row& row : tx.Exec("model_tags_load",
                                      "SELECT model_id, key, value FROM model_tags "
                                      "WHERE model_id = ANY($1::bigint[])",
                                      array)) {
    (*by_id[row[0].as<int64_t>()]->mutable_tags())[row[1].as<std::string>()] =
        row[2].as<std::string>();
  }
  for (const pqxx::row& row : tx.Exec("model_metrics_load",
                                      "SELECT model_id, name, value FROM model_metrics "
                                      "WHERE model_id = ANY($1::bigint[])",
                                      array)) {
    (*by_id[row[0].as<int64_t>()]->mutable_metrics())[row[1].as<std::string>()] =
        row[2].as<double>();
  }
  for (const pqxx::row& row : tx.Exec("model_aliases_load",
                                      "SELECT m.id, a.alias FROM model_aliases a JOIN models m "
                                      "ON m.owner = a.owner AND m.name = a.name AND "
                                      "m.version = a.version WHERE m.id = ANY($1::bigint[]) "
                                      "ORDER BY a.alias",
                                      array)) {
    by_id[row[0].as<int64_t>()]->add_aliases(row[1].as<std::string>());
  }
}

// Loads one version by row id, with extras and (optionally) histograms.
absl::StatusOr<ModelVersion> LoadById(Transaction& tx, int64_t id, bool histograms) {
  pqxx::result r = tx.Exec(
      "model_by_id", "SELECT " MODEL_COLUMNS ", m.histograms FROM models m WHERE m.id = $1", id);
  if (r.empty()) return absl::NotFoundError("model version vanished");
  ASSIGN_OR_RETURN(ModelVersion m, ModelFromRow(r[0]));
  if (histograms && !r[0][10].is_null()) {
    ModelVersion h;
    RETURN_IF_ERROR(sql::ParseBytes(r[0][10], &h));
    *m.mutable_histograms() = h.histograms();
  }
  LoadExtras(tx, {id}, {&m});
  return m;
}

// Resolves `ref` for `viewer` (see the header) and returns the row id.
absl::StatusOr<int64_t> ResolveId(Transaction& tx, const std::string& viewer,
                                  const std::string& ref_text) {
  ASSIGN_OR_RETURN(ModelRef ref, ParseRef(ref_text));
  pqxx::result r;
  if (ref.alias.empty()) {
    r = tx.Exec("model_resolve_version",
                "SELECT m.id, m.owner FROM models m WHERE m.name = $2 AND m.version = $3 "
                "AND ($4 = '' OR m.owner = $4) "
                "AND ($1 = '' OR m.owner = $1 OR m.visibility = 'VISIBILITY_PUBLIC') "
                "ORDER BY (m.owner = $1) DESC, m.owner LIMIT 2",
                viewer, ref.name, ref.version, ref.owner);
  } else {
    r = tx.Exec("model_resolve_alias",
                "SELECT m.id, m.owner FROM model_aliases a JOIN models m ON m.owner = a.owner "
                "AND m.name = a.name AND m.version = a.version WHERE a.name = $2 AND a.alias = $3 "
                "AND ($4 = '' OR m.owner = $4) "
                "AND ($1 = '' OR m.owner = $1 OR m.visibility = 'VISIBILITY_PUBLIC') "
                "ORDER BY (m.owner = $1) DESC, m.owner LIMIT 2",
                viewer, ref.name, ref.alias, ref.owner);
  }
  if (r.empty()) {
    return absl::NotFoundError(absl::StrCat("model ", ref_text, " does not exist"));
  }
  if (r.size() > 1 && r[0][1].as<std::string>() != viewer) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model reference ", ref_text, " is ambiguous: public models of owners ", r[0][1].c_str(),
        " and ", r[1][1].c_str(), " match; qualify it as owner/", ref_text));
  }
  return r[0][0].as<int64_t>();
}

// Resolves `ref` for a change by `owner`; only the owner (or an admin, owner "") may change it.
absl::StatusOr<int64_t> ResolveForChange(Transaction& tx, const std::string& owner,
                                         const std::string& ref) {
  ASSIGN_OR_RETURN(int64_t id, ResolveId(tx, owner, ref));
  pqxx::result r =
      tx.Exec("model_owner_lock", "SELECT owner FROM models WHERE id = $1 FOR UPDATE", id);
  if (!owner.empty() && r[0][0].as<std::string>() != owner) {
    return absl::PermissionDeniedError(absl::StrCat("model ", ref, " belongs to ", r[0][0].c_str(),
                                                    "; only its owner may change it"));
  }
  return id;
}

std::string MetricsJson(const google::protobuf::Map<std::string, double>& metrics) {
  std::string out = "{";
  bool first = true;
  for (const auto& [name, value] : metrics) {
    if (!std::isfinite(value)) continue;
    if (!first) out += ",";
    first = false;
    absl::StrAppend(&out, JsonString(name), ":", sql::JsonNumber(value));
  }
  return out + "}";
}

// The serialised bytes of Lineage.parent_model (field 7, length-delimited) holding `value`.
std::string ParentModelFieldBytes(const std::string& value) {
  std::string bytes(1, static_cast<char>((7 << 3) | 2));
  for (uint64_t n = value.size();; n >>= 7) {
    if (n < 0x80) {
      bytes += static_cast<char>(n);
      break;
    }
    bytes += static_cast<char>((n & 0x7f) | 0x80);
  }
  return bytes + value;
}

// The parent version of ModelFilter.fine_tuned_from and the spellings a child's lineage has of it.
struct ParentModel {
  std::string owner;  // empty: no fine_tuned_from filter
  std::string name;
  int version = 0;
  bool is_public = false;
  std::string unqualified;  // "name:version"
  std::string qualified;    // "owner/name:version"
};

absl::StatusOr<ParentModel> ResolveParent(Transaction& tx, const std::string& viewer,
                                          const std::string& ref) {
  ParentModel parent;
  if (ref.empty()) return parent;
  ASSIGN_OR_RETURN(int64_t id, ResolveId(tx, viewer, ref));
  pqxx::result r = tx.Exec("model_parent_of_filter",
                           "SELECT owner, name, version, visibility FROM models WHERE id = $1", id);
  parent.owner = r[0][0].as<std::string>();
  parent.name = r[0][1].as<std::string>();
  parent.version = r[0][2].as<int>();
  parent.is_public = r[0][3].as<std::string>() == "VISIBILITY_PUBLIC";
  parent.unqualified = absl::StrCat(parent.name, ":", parent.version);
  parent.qualified = absl::StrCat(parent.owner, "/", parent.unqualified);
  return parent;
}

// ModelFilter.fine_tuned_from in SQL, its parameters numbered from `first`: the parent's owner
// ('' = no filter), whether it is public, its name and version, and the bytes of Lineage field 7
// spelt "name:version" and "owner/name:version". No column holds the parent reference, so it is
// found inside the stored record (a serialised ModelVersion) by those bytes; ParentModelMatches
// then checks each row exactly, so the same bytes elsewhere in a record never list a version.
std::string ParentModelWhere(int first) {
  const auto p = [first](int i) { return absl::StrCat("$", first + i); };
  return absl::StrCat("AND (", p(0), " = '' OR position(", p(5),
                      "::bytea in m.record) > 0 OR (position(", p(4),
                      "::bytea in m.record) > 0 AND (m.owner = ", p(0), " OR (", p(1),
                      "::boolean AND NOT EXISTS (SELECT 1 FROM models o WHERE o.owner = m.owner "
                      "AND o.name = ",
                      p(2), " AND o.version = ", p(3), "::integer))))) ");
}

bool ParentModelMatches(const ParentModel& parent, const ModelVersion& m) {
  if (parent.owner.empty()) return true;
  const std::string& recorded = m.lineage().parent_model();
  return recorded == parent.qualified || recorded == parent.unqualified;
}

}  // namespace

absl::StatusOr<ModelVersion> ModelRepository::Register(const ModelVersion& model) {
  if (model.owner().empty() || model.name().empty()) {
    return absl::InvalidArgumentError("a model version needs an owner and a name");
  }
  ModelVersion record = model;
  record.clear_version();
  record.clear_tags();
  record.clear_aliases();
  record.clear_metrics();
  record.clear_histograms();
  record.clear_status();
  record.clear_created_at();
  record.clear_bf16();
  ModelVersion histograms;
  *histograms.mutable_histograms() = model.histograms();
  const gantry::v1::Visibility visibility = model.visibility() == gantry::v1::VISIBILITY_PUBLIC
                                                ? gantry::v1::VISIBILITY_PUBLIC
                                                : gantry::v1::VISIBILITY_PRIVATE;
  record.set_visibility(visibility);
  std::map<std::string, std::string> tags(model.tags().begin(), model.tags().end());
  ModelVersion stored;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    // Serialises version allocation per (owner, name); concurrent names proceed in parallel.
    tx.Exec("model_register_lock", "SELECT pg_advisory_xact_lock(hashtext($1 || '/' || $2))",
            model.owner(), model.name());
    pqxx::result r =
        tx.Exec("model_register",
                "INSERT INTO models (owner, name, version, visibility, status, record, histograms, "
                "checkpoint_sha256, bf16_state, bf16_reason, dataset, model_preset, particle) "
                "SELECT $1, $2, COALESCE(MAX(version), 0) + 1, $3, 'MODEL_STATUS_READY', $4, $5, "
                "$6, $7, $8, "
                "$9, $10, $11 FROM models WHERE owner = $1 AND name = $2 RETURNING id",
                model.owner(), model.name(), gantry::v1::Visibility_Name(visibility),
                sql::Bytes(record), sql::Bytes(histograms), model.checkpoint_sha256(),
                gantry::v1::Bf16Check::State_Name(model.bf16().state()), model.bf16().reason(),
                model.lineage().dataset(), model.lineage().model_preset(),
                static_cast<int>(model.particle()));
    const int64_t id = r[0][0].as<int64_t>();
    tx.Exec("model_tags_insert",
            "INSERT INTO model_tags (model_id, key, value) SELECT $1, key, value "
            "FROM jsonb_each_text($2::jsonb)",
            id, sql::JsonObject(tags));
    tx.Exec("model_metrics_insert",
            "INSERT INTO model_metrics (model_id, name, value) SELECT $1, key, value::float8 "
            "FROM jsonb_each_text($2::jsonb)",
            id, MetricsJson(model.metrics()));
    ASSIGN_OR_RETURN(stored, LoadById(tx, id, true));
    return absl::OkStatus();
  }));
  return stored;
}

absl::StatusOr<ModelVersion> ModelRepository::Resolve(const std::string& viewer,
                                                      const std::string& ref) {
  ModelVersion m;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    ASSIGN_OR_RETURN(int64_t id, ResolveId(tx, viewer, ref));
    ASSIGN_OR_RETURN(m, LoadById(tx, id, true));
    return absl::OkStatus();
  }));
  return m;
}

absl::StatusOr<Page<ModelVersion>> ModelRepository::List(const std::string& viewer,
                                                         const ModelFilter& filter, int page_size,
                                                         const std::string& page_token) {
  ASSIGN_OR_RETURN(int limit, sql::PageSize(page_size));
  std::string order_metric;
  if (filter.order_by.rfind("metric:", 0) == 0) {
    order_metric = filter.order_by.substr(7);
    if (order_metric.empty()) {
      return absl::InvalidArgumentError(
          "order_by \"metric:\" needs a metric name, e.g. metric:fom");
    }
  } else if (!filter.order_by.empty() && filter.order_by != "created_at") {
    return absl::InvalidArgumentError(absl::StrCat(
        "order_by \"", filter.order_by.substr(0, 100),
        "\" is not supported; use created_at (newest first) or metric:<name> (ascending)"));
  }
  const bool by_metric = !order_metric.empty();
  int64_t after_id = 0;
  double after_value = 0;
  if (!page_token.empty()) {
    ASSIGN_OR_RETURN(std::vector<std::string> keys,
                     sql::DecodePageToken(by_metric ? "models-m:" + order_metric : "models",
                                          page_token, by_metric ? 2 : 1));
    if (!absl::SimpleAtoi(keys[0], &after_id) || after_id <= 0 ||
        (by_metric && !absl::SimpleAtod(keys[1], &after_value))) {
      return absl::InvalidArgumentError("page_token is malformed; pass next_page_token unchanged");
    }
  }
  std::string metric_json = "[";
  for (size_t i = 0; i < filter.metric_filters.size(); ++i) {
    const gantry::v1::MetricFilter& f = filter.metric_filters[i];
    absl::StrAppend(
        &metric_json, i > 0 ? "," : "", "{\"name\":", JsonString(f.metric()),
        ",\"lo\":", sql::JsonNumber(f.has_min() ? std::optional<double>(f.min()) : std::nullopt),
        ",\"hi\":", sql::JsonNumber(f.has_max() ? std::optional<double>(f.max()) : std::nullopt),
        "}");
  }
  metric_json += "]";
  const std::string tags_json = sql::JsonObject(filter.tags);
  const int particle = static_cast<int>(filter.particle);
  // ILIKE pattern of the name substring, its wildcards and escape character taken literally.
  std::string name_pattern;
  if (!filter.name_contains.empty()) {
    name_pattern = "%";
    for (char c : filter.name_contains) {
      if (c == '%' || c == '_' || c == '\\') name_pattern += '\\';
      name_pattern += c;
    }
    name_pattern += '%';
  }

  Page<ModelVersion> page;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    page = {};
    // The dataset as given, and the ids of the viewer's datasets of that name (every owner's for
    // the admin view), so the listing matches them through the models_dataset index.
    std::vector<std::string> datasets;
    if (!filter.dataset.empty()) {
      datasets.push_back(filter.dataset);
      for (const pqxx::row& row :
           tx.Exec("model_list_dataset_ids",
                   "SELECT id FROM datasets WHERE name = $1 AND ($2 = '' OR owner = $2)",
                   filter.dataset, viewer)) {
        datasets.push_back(row[0].as<std::string>());
      }
    }
    const std::string datasets_array = TextArray(datasets);
    ASSIGN_OR_RETURN(const ParentModel parent, ResolveParent(tx, viewer, filter.fine_tuned_from));
    const pqxx::binarystring unqualified(ParentModelFieldBytes(parent.unqualified));
    const pqxx::binarystring qualified(ParentModelFieldBytes(parent.qualified));
    pqxx::result r;
    if (by_metric) {
      r = tx.Exec("model_list_by_metric",
                  "SELECT " MODEL_COLUMNS
                  ", om.value FROM models m JOIN model_metrics om "
                  "ON om.model_id = m.id AND om.name = $11 WHERE " MODEL_LIST_WHERE
                  MODEL_SEARCH_WHERE("$13", "$14", "$15") "AND ($9::bigint = 0 OR (om.value, "
                  "m.id) > ($12::float8, $9::bigint)) " +
                      ParentModelWhere(16) + "ORDER BY om.value, m.id LIMIT $10",
                  viewer, filter.name, filter.include_archived, tags_json, metric_json,
                  datasets_array, filter.model_preset, particle, after_id, limit + 1, order_metric,
                  after_value, name_pattern, filter.owner, filter.alias, parent.owner,
                  parent.is_public, parent.name, parent.version, unqualified, qualified);
    } else {
      r = tx.Exec("model_list_by_created",
                  "SELECT " MODEL_COLUMNS
                  " FROM models m WHERE " MODEL_LIST_WHERE MODEL_SEARCH_WHERE(
                      "$11", "$12", "$13") "AND ($9::bigint = 0 OR m.id < $9) " +
                      ParentModelWhere(14) + "ORDER BY m.id DESC LIMIT $10",
                  viewer, filter.name, filter.include_archived, tags_json, metric_json,
                  datasets_array, filter.model_preset, particle, after_id, limit + 1, name_pattern,
                  filter.owner, filter.alias, parent.owner, parent.is_public, parent.name,
                  parent.version, unqualified, qualified);
    }
    std::vector<int64_t> ids;
    for (size_t i = 0; i < r.size() && static_cast<int>(i) < limit; ++i) {
      ASSIGN_OR_RETURN(ModelVersion m, ModelFromRow(r[i]));
      if (!ParentModelMatches(parent, m)) continue;
      page.items.push_back(std::move(m));
      ids.push_back(r[i][0].as<int64_t>());
    }
    std::vector<ModelVersion*> ptrs;
    for (ModelVersion& m : page.items) ptrs.push_back(&m);
    LoadExtras(tx, ids, ptrs);
    if (static_cast<int>(r.size()) > limit) {
      const pqxx::row& last = r[limit - 1];
      if (by_metric) {
        char value[40];
        std::snprintf(value, sizeof(value), "%.17g", last[10].as<double>());
        page.next_page_token = sql::EncodePageToken("models-m:" + order_metric,
                                                    {absl::StrCat(last[0].as<int64_t>()), value});
      } else {
        page.next_page_token =
            sql::EncodePageToken("models", {absl::StrCat(last[0].as<int64_t>())});
      }
    }
    return absl::OkStatus();
  }));
  return page;
}

absl::StatusOr<ModelVersion> ModelRepository::SetAlias(const std::string& owner,
                                                       const std::string& name,
                                                       const std::string& alias, int version) {
  if (alias.empty()) return absl::InvalidArgumentError("the alias is empty");
  ModelVersion m;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = tx.Exec("model_alias_target",
                             "SELECT id, status FROM models WHERE owner = $1 AND name = $2 "
                             "AND version = $3 FOR UPDATE",
                             owner, name, version);
    if (r.empty()) {
      return absl::NotFoundError(absl::StrCat("model ", name, ":", version, " does not exist"));
    }
    if (r[0][1].as<std::string>() == "MODEL_STATUS_ARCHIVED") {
      return absl::FailedPreconditionError(absl::StrCat(
          "model ", name, ":", version, " is archived; point the alias at a ready version"));
    }
    tx.Exec("model_alias_set",
            "INSERT INTO model_aliases (owner, name, alias, version) VALUES ($1, $2, $3, $4) "
            "ON CONFLICT (owner, name, alias) DO UPDATE SET version = EXCLUDED.version",
            owner, name, alias, version);
    ASSIGN_OR_RETURN(m, LoadById(tx, r[0][0].as<int64_t>(), false));
    return absl::OkStatus();
  }));
  return m;
}

absl::Status ModelRepository::DeleteAlias(const std::string& owner, const std::string& name,
                                          const std::string& alias) {
  return db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r =
        tx.Exec("model_alias_delete",
                "DELETE FROM model_aliases WHERE owner = $1 AND name = $2 AND alias = $3 "
                "RETURNING version",
                owner, name, alias);
    if (r.empty()) {
      return absl::NotFoundError(absl::StrCat("model ", name, " has no alias \"", alias, "\""));
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<std::map<std::string, std::vector<std::string>>>
ModelRepository::VersionsByCheckpoint(const std::vector<std::string>& checkpoint_sha256s) {
  if (checkpoint_sha256s.size() > 1000) {
    return absl::InvalidArgumentError("at most 1000 checkpoints at a time");
  }
  std::map<std::string, std::vector<std::string>> versions;
  if (checkpoint_sha256s.empty()) return versions;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    versions.clear();
    pqxx::result r =
        tx.Exec("models_by_checkpoint",
                "SELECT checkpoint_sha256, owner, name, version FROM models "
                "WHERE checkpoint_sha256 IN (SELECT jsonb_array_elements_text($1::jsonb)) "
                "ORDER BY checkpoint_sha256, owner, name, version",
                sql::JsonArray(checkpoint_sha256s));
    for (const auto& row : r) {
      versions[row[0].as<std::string>()].push_back(absl::StrCat(
          row[1].as<std::string>(), "/", row[2].as<std::string>(), ":", row[3].as<int>()));
    }
    return absl::OkStatus();
  }));
  return versions;
}

absl::StatusOr<ModelVersion> ModelRepository::SetTags(const std::string& owner,
                                                      const std::string& ref,
                                                      const std::map<std::string, std::string>& set,
                                                      const std::vector<std::string>& remove) {
  ModelVersion m;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    ASSIGN_OR_RETURN(int64_t id, ResolveForChange(tx, owner, ref));
    tx.Exec("model_tags_remove",
            "DELETE FROM model_tags WHERE model_id = $1 "
            "AND key IN (SELECT jsonb_array_elements_text($2::jsonb))",
            id, sql::JsonArray(remove));
    tx.Exec("model_tags_upsert",
            "INSERT INTO model_tags (model_id, key, value) SELECT $1, key, value "
            "FROM jsonb_each_text($2::jsonb) "
            "ON CONFLICT (model_id, key) DO UPDATE SET value = EXCLUDED.value",
            id, sql::JsonObject(set));
    ASSIGN_OR_RETURN(m, LoadById(tx, id, false));
    return absl::OkStatus();
  }));
  return m;
}

absl::StatusOr<ModelVersion> ModelRepository::Update(const std::string& owner,
                                                     const std::string& ref,
                                                     const ModelUpdate& update) {
  if (update.visibility.has_value() && *update.visibility != gantry::v1::VISIBILITY_PRIVATE &&
      *update.visibility != gantry::v1::VISIBILITY_PUBLIC) {
    return absl::InvalidArgumentError("visibility must be VISIBILITY_PRIVATE or VISIBILITY_PUBLIC");
  }
  ModelVersion m;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    ASSIGN_OR_RETURN(int64_t id, ResolveForChange(tx, owner, ref));
    pqxx::result r = tx.Exec("model_update_read",
                             "SELECT status, visibility, record FROM models WHERE id = $1", id);
    if ((update.visibility.has_value() || update.tags.has_value()) &&
        r[0][0].as<std::string>() == "MODEL_STATUS_ARCHIVED") {
      return absl::FailedPreconditionError(
          absl::StrCat("model ", ref,
                       " is archived; its visibility and tags are kept for lineage, only its "
                       "description may change"));
    }
    ModelVersion record;
    RETURN_IF_ERROR(sql::ParseBytes(r[0][2], &record));
    std::string visibility = r[0][1].as<std::string>();
    if (update.description.has_value()) record.set_description(*update.description);
    if (update.visibility.has_value()) {
      record.set_visibility(*update.visibility);
      visibility = gantry::v1::Visibility_Name(*update.visibility);
    }
    tx.Exec("model_update_write", "UPDATE models SET record = $2, visibility = $3 WHERE id = $1",
            id, sql::Bytes(record), visibility);
    if (update.tags.has_value()) {
      tx.Exec("model_update_tags_clear", "DELETE FROM model_tags WHERE model_id = $1", id);
      tx.Exec("model_update_tags_insert",
              "INSERT INTO model_tags (model_id, key, value) SELECT $1, key, value "
              "FROM jsonb_each_text($2::jsonb)",
              id, sql::JsonObject(*update.tags));
    }
    ASSIGN_OR_RETURN(m, LoadById(tx, id, false));
    return absl::OkStatus();
  }));
  return m;
}

absl::StatusOr<ModelVersion> ModelRepository::Archive(const std::string& owner,
                                                      const std::string& ref) {
  ModelVersion m;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    ASSIGN_OR_RETURN(int64_t id, ResolveForChange(tx, owner, ref));
    tx.Exec("model_archive", "UPDATE models SET status = 'MODEL_STATUS_ARCHIVED' WHERE id = $1",
            id);
    tx.Exec("model_archive_aliases",
            "DELETE FROM model_aliases a USING models m WHERE m.id = $1 AND a.owner = m.owner "
            "AND a.name = m.name AND a.version = m.version",
            id);
    ASSIGN_OR_RETURN(m, LoadById(tx, id, false));
    return absl::OkStatus();
  }));
  return m;
}

}  // namespace gantry::storage
