#include "storage/model_repository.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "storage/migrations.h"
#include "storage/transaction.h"
#include "tests/storage/storage_fixture.h"

namespace gantry::storage {
namespace {

using gantry::v1::ModelVersion;

ModelVersion Model(const std::string& owner, const std::string& name,
                   std::map<std::string, double> metrics = {},
                   gantry::v1::Visibility visibility = gantry::v1::VISIBILITY_PRIVATE) {
  ModelVersion m;
  m.set_owner(owner);
  m.set_name(name);
  m.set_visibility(visibility);
  m.set_description("a model");
  m.set_version(77);         // ignored
  m.add_aliases("ignored");  // ignored
  m.mutable_lineage()->set_job_id("job-1");
  m.mutable_lineage()->set_model_preset("tiny");
  m.set_checkpoint_sha256(std::string(64, 'c'));
  m.set_checkpoint_size_bytes(42);
  m.mutable_energy_range_gev()->set_min(10);
  m.mutable_energy_range_gev()->set_max(100);
  for (const auto& [k, v] : metrics) (*m.mutable_metrics())[k] = v;
  auto* h = m.add_histograms();
  h->set_name("longitudinal_profile");
  h->add_reference(1.5);
  h->add_generated(1.25);
  return m;
}

std::vector<std::string> Refs(const std::vector<ModelVersion>& models) {
  std::vector<std::string> out;
  for (const auto& m : models)
    out.push_back(m.owner() + "/" + m.name() + ":" + std::to_string(m.version()));
  return out;
}

using ModelRepositoryTest = StorageFixture;

TEST_F(ModelRepositoryTest, RegisterNumbersVersionsPerOwnerAndName) {
  ModelRepository models(*db_);
  auto v1 = models.Register(Model("alice", "ele", {{"fom", 0.3}}));
  ASSERT_TRUE(v1.ok()) << v1.status();
  EXPECT_EQ(v1->version(), 1);
  EXPECT_EQ(v1->status(), gantry::v1::MODEL_STATUS_READY);
  EXPECT_EQ(v1->visibility(), gantry::v1::VISIBILITY_PRIVATE);
  EXPECT_TRUE(v1->aliases().empty());
  EXPECT_EQ(v1->metrics().at("fom"), 0.3);
  EXPECT_EQ(v1->lineage().job_id(), "job-1");
  EXPECT_EQ(v1->checkpoint_size_bytes(), 42);
  ASSERT_EQ(v1->histograms_size(), 1);
  EXPECT_EQ(v1->histograms(0).generated(0), 1.25);
  EXPECT_GT(v1->created_at().seconds(), 1600000000);
  EXPECT_EQ(models.Register(Model("alice", "ele"))->version(), 2);
  EXPECT_EQ(models.Register(Model("alice", "pion"))->version(), 1);
  EXPECT_EQ(models.Register(Model("bob", "ele"))->version(), 1);
  EXPECT_EQ(models.Register(Model("", "x")).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ModelRepositoryTest, VersionsByCheckpointNamesEveryVersionStoredWithIt) {
  ModelRepository models(*db_);
  ASSERT_TRUE(models.Register(Model("bob", "ele")).ok());
  ASSERT_TRUE(models.Register(Model("alice", "ele")).ok());
  ModelVersion other = Model("alice", "pion");
  other.set_checkpoint_sha256(std::string(64, 'd'));
  ASSERT_TRUE(models.Register(other).ok());
  ASSERT_TRUE(models.Archive("alice", "ele:1").ok());  // archived versions are still named

  auto found = models.VersionsByCheckpoint(
      {std::string(64, 'c'), std::string(64, 'd'), std::string(64, 'e')});
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->size(), 2u);  // 'e' has none
  EXPECT_EQ(found->at(std::string(64, 'c')),
            (std::vector<std::string>{"alice/ele:1", "bob/ele:1"}));
  EXPECT_EQ(found->at(std::string(64, 'd')), (std::vector<std::string>{"alice/pion:1"}));
  EXPECT_TRUE(models.VersionsByCheckpoint({})->empty());
  EXPECT_EQ(models.VersionsByCheckpoint(std::vector<std::string>(1001, "x")).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ModelRepositoryTest, ConcurrentRegisterGetsDistinctConsecutiveVersions) {
  ModelRepository models(*db_);
  std::mutex mu;
  std::vector<int> versions;
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5; ++i) {
        auto m = models.Register(Model("alice", "hot"));
        ASSERT_TRUE(m.ok()) << m.status();
        std::lock_guard<std::mutex> lock(mu);
        versions.push_back(m->version());
      }
    });
  }
  for (auto& t : threads) t.join();
  std::sort(versions.begin(), versions.end());
  std::vector<int> expected(30);
  for (int i = 0; i < 30; ++i) expected[i] = i + 1;
  EXPECT_EQ(versions, expected);
}

TEST_F(ModelRepositoryTest, ResolveVisibilityAndNamespaces) {
  ModelRepository models(*db_);
  ASSERT_TRUE(models.Register(Model("alice", "priv")).ok());
  ASSERT_TRUE(models.Register(Model("alice", "pub", {}, gantry::v1::VISIBILITY_PUBLIC)).ok());
  ASSERT_TRUE(models.Register(Model("bob", "mine")).ok());

  EXPECT_TRUE(models.Resolve("alice", "priv:1").ok());
  EXPECT_EQ(models.Resolve("bob", "priv:1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(models.Resolve("bob", "alice/priv:1").status().code(), absl::StatusCode::kNotFound);
  auto pub = models.Resolve("bob", "pub:1");
  ASSERT_TRUE(pub.ok()) << pub.status();
  EXPECT_EQ(pub->owner(), "alice");
  EXPECT_EQ(pub->histograms_size(), 1);
  EXPECT_TRUE(models.Resolve("", "priv:1").ok());  // admin
  EXPECT_EQ(models.Resolve("alice", "priv:2").status().code(), absl::StatusCode::kNotFound);
  for (const char* bad : {"priv", "priv:", "priv:x", "priv:0", ":1", "@a", "priv@", "/priv:1"}) {
    EXPECT_EQ(models.Resolve("alice", bad).status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }

  // Own namespace first: bob registers his own "pub".
  ASSERT_TRUE(models.Register(Model("bob", "pub")).ok());
  EXPECT_EQ(models.Resolve("bob", "pub:1")->owner(), "bob");
  EXPECT_EQ(models.Resolve("bob", "alice/pub:1")->owner(), "alice");
  // A third tenant sees only alice's public one (bob's is private).
  TenantRepository tenants(*db_);
  ASSERT_TRUE(tenants.CreateTenant("carol", false).ok());
  EXPECT_EQ(models.Resolve("carol", "pub:1")->owner(), "alice");
  // Two public candidates from other owners: ambiguous, qualify it.
  ASSERT_TRUE(models.Register(Model("bob", "pub", {}, gantry::v1::VISIBILITY_PUBLIC)).ok());
  ASSERT_TRUE(models.SetAlias("bob", "pub", "x", 2).ok());
  ASSERT_TRUE(models.Register(Model("alice", "pub", {}, gantry::v1::VISIBILITY_PUBLIC)).ok());
  auto amb = models.Resolve("carol", "pub:2");
  EXPECT_EQ(amb.status().code(), absl::StatusCode::kFailedPrecondition) << amb.status();
  EXPECT_EQ(models.Resolve("carol", "bob/pub:2")->owner(), "bob");
  EXPECT_EQ(models.Resolve("carol", "pub@x")->owner(), "bob");
}

TEST_F(ModelRepositoryTest, AliasesMoveAtomically) {
  ModelRepository models(*db_);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(models.Register(Model("alice", "ele")).ok());
  auto set = models.SetAlias("alice", "ele", "champion", 1);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->version(), 1);
  EXPECT_EQ(std::vector<std::string>(set->aliases().begin(), set->aliases().end()),
            std::vector<std::string>{"champion"});
  EXPECT_EQ(models.Resolve("alice", "ele@champion")->version(), 1);
  ASSERT_TRUE(models.SetAlias("alice", "ele", "champion", 3).ok());
  EXPECT_EQ(models.Resolve("alice", "ele@champion")->version(), 3);
  EXPECT_TRUE(models.Resolve("alice", "ele:1")->aliases().empty());
  EXPECT_EQ(models.SetAlias("alice", "ele", "champion", 9).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(models.SetAlias("bob", "ele", "champion", 1).status().code(),
            absl::StatusCode::kNotFound);

  // Concurrent moves: at every moment exactly one version carries the alias.
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::thread reader([&] {
    while (!stop) {
      auto page = models.List("alice", ModelFilter{"ele"}, 0, "");
      if (!page.ok()) continue;
      int carriers = 0;
      for (const auto& m : page->items) {
        carriers += std::count(m.aliases().begin(), m.aliases().end(), "champion");
      }
      if (carriers != 1) ++bad;
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < 3; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < 15; ++i)
        ASSERT_TRUE(models.SetAlias("alice", "ele", "champion", 1 + (t + i) % 3).ok());
    });
  }
  for (auto& w : writers) w.join();
  stop = true;
  reader.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(test_db_.Query("SELECT count(*) FROM model_aliases WHERE alias = 'champion'"), "1\n");

  ASSERT_TRUE(models.DeleteAlias("alice", "ele", "champion").ok());
  EXPECT_EQ(models.Resolve("alice", "ele@champion").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(models.DeleteAlias("alice", "ele", "champion").code(), absl::StatusCode::kNotFound);
}

TEST_F(ModelRepositoryTest, TagsArchiveAndPermissions) {
  ModelRepository models(*db_);
  ModelVersion m = Model("alice", "ele", {}, gantry::v1::VISIBILITY_PUBLIC);
  (*m.mutable_tags())["stage"] = "dev";
  (*m.mutable_tags())["particle"] = "e-";
  ASSERT_TRUE(models.Register(m).ok());
  ASSERT_TRUE(models.Register(Model("alice", "ele")).ok());  // private v2

  auto tagged =
      models.SetTags("alice", "ele:1", {{"stage", "prod"}, {"team", "calo"}}, {"particle"});
  ASSERT_TRUE(tagged.ok()) << tagged.status();
  EXPECT_EQ(tagged->tags().size(), 2u);
  EXPECT_EQ(tagged->tags().at("stage"), "prod");
  EXPECT_EQ(tagged->tags().at("team"), "calo");

  auto prod = models.List("bob", ModelFilter{"", {{"stage", "prod"}}}, 0, "");
  ASSERT_TRUE(prod.ok());
  ASSERT_EQ(prod->items.size(), 1u);
  EXPECT_EQ(prod->items[0].version(), 1);
  EXPECT_EQ(prod->items[0].histograms_size(), 0);  // listings carry no histograms

  // Others: public -> PERMISSION_DENIED, private -> NOT_FOUND.
  EXPECT_EQ(models.SetTags("bob", "alice/ele:1", {{"x", "y"}}, {}).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(models.Archive("bob", "alice/ele:1").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(models.SetTags("bob", "alice/ele:2", {{"x", "y"}}, {}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(models.Archive("bob", "alice/ele:2").status().code(), absl::StatusCode::kNotFound);

  ASSERT_TRUE(models.SetAlias("alice", "ele", "champion", 1).ok());
  auto archived = models.Archive("alice", "ele@champion");
  ASSERT_TRUE(archived.ok()) << archived.status();
  EXPECT_EQ(archived->status(), gantry::v1::MODEL_STATUS_ARCHIVED);
  EXPECT_TRUE(archived->aliases().empty());
  EXPECT_TRUE(models.Archive("alice", "ele:1").ok());  // idempotent
  EXPECT_EQ(models.Resolve("alice", "ele:1")->status(), gantry::v1::MODEL_STATUS_ARCHIVED);
  EXPECT_EQ(models.SetAlias("alice", "ele", "champion", 1).status().code(),
            absl::StatusCode::kFailedPrecondition);

  auto visible = models.List("alice", ModelFilter{"ele"}, 0, "");
  ASSERT_EQ(visible->items.size(), 1u);
  EXPECT_EQ(visible->items[0].version(), 2);
  ModelFilter with_archived{"ele"};
  with_archived.include_archived = true;
  EXPECT_EQ(models.List("alice", with_archived, 0, "")->items.size(), 2u);
}

TEST_F(ModelRepositoryTest, MetricFiltersAndOrdering) {
  ModelRepository models(*db_);
  // fom values; "m3" has no fom.
  ASSERT_TRUE(models.Register(Model("alice", "m", {{"fom", 0.5}, {"eprof", 2.0}})).ok());  // m:1
  ASSERT_TRUE(models.Register(Model("alice", "m", {{"fom", 0.1}, {"eprof", 9.0}})).ok());  // m:2
  ASSERT_TRUE(models.Register(Model("alice", "m", {{"fom", 0.3}, {"eprof", 1.0}})).ok());  // m:3
  ASSERT_TRUE(models.Register(Model("alice", "m", {{"eprof", 0.5}})).ok());                // m:4
  ASSERT_TRUE(models.Register(Model("alice", "m", {{"fom", 0.3}})).ok());                  // m:5
  ASSERT_TRUE(models.Register(Model("bob", "m", {{"fom", 0.0}})).ok());  // private

  ModelFilter by_fom;
  by_fom.order_by = "metric:fom";
  auto all = models.List("alice", by_fom, 0, "");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(Refs(all->items),
            (std::vector<std::string>{"alice/m:2", "alice/m:3", "alice/m:5", "alice/m:1"}));

  // The same through pages of 1 (ties on 0.3 are broken stably).
  std::vector<std::string> paged;
  std::string token;
  for (int i = 0; i < 10; ++i) {
    auto page = models.List("alice", by_fom, 1, token);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const auto& r : Refs(page->items)) paged.push_back(r);
    token = page->next_page_token;
    if (token.empty()) break;
  }
  EXPECT_EQ(paged, Refs(all->items));
  // A token of the created_at ordering is refused by the metric ordering.
  auto created_page = models.List("alice", ModelFilter{}, 1, "");
  EXPECT_EQ(models.List("alice", by_fom, 1, created_page->next_page_token).status().code(),
            absl::StatusCode::kInvalidArgument);

  // Thresholds: fom <= 0.3 and eprof >= 1.
  ModelFilter thresholds;
  gantry::v1::MetricFilter f1;
  f1.set_metric("fom");
  f1.set_max(0.3);
  gantry::v1::MetricFilter f2;
  f2.set_metric("eprof");
  f2.set_min(1.0);
  thresholds.metric_filters = {f1, f2};
  auto filtered = models.List("alice", thresholds, 0, "");
  ASSERT_TRUE(filtered.ok()) << filtered.status();
  EXPECT_EQ(Refs(filtered->items), (std::vector<std::string>{"alice/m:3", "alice/m:2"}));
  // A filter on a metric a version lacks excludes it.
  ModelFilter fom_only;
  fom_only.metric_filters = {f1};
  EXPECT_EQ(Refs(models.List("alice", fom_only, 0, "")->items),
            (std::vector<std::string>{"alice/m:5", "alice/m:3", "alice/m:2"}));

  // Default ordering: newest first, paginated.
  auto p1 = models.List("alice", ModelFilter{}, 2, "");
  auto p2 = models.List("alice", ModelFilter{}, 2, p1->next_page_token);
  auto p3 = models.List("alice", ModelFilter{}, 2, p2->next_page_token);
  EXPECT_EQ(Refs(p1->items), (std::vector<std::string>{"alice/m:5", "alice/m:4"}));
  EXPECT_EQ(Refs(p2->items), (std::vector<std::string>{"alice/m:3", "alice/m:2"}));
  EXPECT_EQ(Refs(p3->items), (std::vector<std::string>{"alice/m:1"}));
  EXPECT_TRUE(p3->next_page_token.empty());

  ModelFilter bad;
  bad.order_by = "size; DROP TABLE models";
  EXPECT_EQ(models.List("alice", bad, 0, "").status().code(), absl::StatusCode::kInvalidArgument);
  // Hostile strings are data, not SQL.
  ModelFilter hostile;
  hostile.name = "m' OR '1'='1";
  hostile.tags = {{"\"}", "'; DROP TABLE models; --"}};
  auto none = models.List("alice", hostile, 0, "");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->items.empty());
  EXPECT_EQ(test_db_.Query("SELECT count(*) FROM models"), "6\n");
}

TEST_F(ModelRepositoryTest, UpdateChangesOnlyWhatItNamesAndOnlyForTheOwner) {
  ModelRepository models(*db_);
  ModelVersion registered = Model("alice", "ele");
  (*registered.mutable_tags())["stage"] = "draft";
  ASSERT_TRUE(models.Register(registered).ok());

  ModelUpdate description;
  description.description = "better words";
  auto updated = models.Update("alice", "ele:1", description);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->description(), "better words");
  EXPECT_EQ(updated->visibility(), gantry::v1::VISIBILITY_PRIVATE);
  EXPECT_EQ(updated->tags().at("stage"), "draft");
  EXPECT_EQ(updated->lineage().model_preset(), "tiny");  // the rest of the record is kept

  // Bob cannot see the private version, nor change it.
  EXPECT_EQ(models.Update("bob", "alice/ele:1", description).status().code(),
            absl::StatusCode::kNotFound);

  ModelUpdate publish;
  publish.visibility = gantry::v1::VISIBILITY_PUBLIC;
  publish.tags = std::map<std::string, std::string>{{"detector", "ecal"}, {"stage", "final"}};
  updated = models.Update("alice", "ele:1", publish);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->visibility(), gantry::v1::VISIBILITY_PUBLIC);
  EXPECT_EQ(updated->tags().size(), 2u);
  EXPECT_EQ(updated->tags().at("stage"), "final");
  EXPECT_EQ(updated->description(), "better words");
  auto seen_by_bob = models.Resolve("bob", "ele:1");
  ASSERT_TRUE(seen_by_bob.ok()) << seen_by_bob.status();
  EXPECT_EQ(seen_by_bob->visibility(), gantry::v1::VISIBILITY_PUBLIC);
  EXPECT_EQ(seen_by_bob->description(), "better words");
  // Public now: Bob sees it but may not change it.
  EXPECT_EQ(models.Update("bob", "alice/ele:1", description).status().code(),
            absl::StatusCode::kPermissionDenied);
  // Listed by the new tags, not the old ones.
  ModelFilter by_tag;
  by_tag.tags = {{"stage", "final"}};
  EXPECT_EQ(Refs(models.List("bob", by_tag, 0, "")->items),
            (std::vector<std::string>{"alice/ele:1"}));
  by_tag.tags = {{"stage", "draft"}};
  EXPECT_TRUE(models.List("alice", by_tag, 0, "")->items.empty());

  ModelUpdate bad;
  bad.visibility = gantry::v1::VISIBILITY_UNSPECIFIED;
  EXPECT_EQ(models.Update("alice", "ele:1", bad).status().code(),
            absl::StatusCode::kInvalidArgument);

  // Archived: the description may change, visibility and tags may not, and a refused update
  // changes nothing.
  ASSERT_TRUE(models.Archive("alice", "ele:1").ok());
  description.description = "archived: superseded by ele:2";
  updated = models.Update("alice", "ele:1", description);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->status(), gantry::v1::MODEL_STATUS_ARCHIVED);
  EXPECT_EQ(updated->description(), "archived: superseded by ele:2");
  ModelUpdate both = publish;
  both.description = "not applied";
  both.visibility = gantry::v1::VISIBILITY_PRIVATE;
  EXPECT_EQ(models.Update("alice", "ele:1", both).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ModelUpdate tags_only;
  tags_only.tags = std::map<std::string, std::string>{};
  EXPECT_EQ(models.Update("alice", "ele:1", tags_only).status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto after = models.Resolve("alice", "ele:1");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->description(), "archived: superseded by ele:2");
  EXPECT_EQ(after->visibility(), gantry::v1::VISIBILITY_PUBLIC);
  EXPECT_EQ(after->tags().size(), 2u);
  EXPECT_EQ(models.Update("alice", "ele:9", description).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ModelRepositoryTest, ListSearchesNameSubstringOwnerAndAliasInBothOrders) {
  ModelRepository models(*db_);
  ASSERT_TRUE(models.Register(Model("alice", "Electrons_25", {{"fom", 0.2}})).ok());
  ASSERT_TRUE(models.Register(Model("alice", "electrons%x", {{"fom", 0.1}})).ok());
  ASSERT_TRUE(models.Register(Model("alice", "pions", {{"fom", 0.3}})).ok());
  ASSERT_TRUE(
      models.Register(Model("bob", "electrons", {{"fom", 0.4}}, gantry::v1::VISIBILITY_PUBLIC))
          .ok());
  ASSERT_TRUE(models.SetAlias("alice", "Electrons_25", "champion", 1).ok());
  for (const std::string order : {"", "metric:fom"}) {
    const auto list = [&](ModelFilter filter) {
      filter.order_by = order;
      auto page = models.List("alice", filter, 50, "");
      EXPECT_TRUE(page.ok()) << page.status();
      return page.ok() ? Refs(page->items) : std::vector<std::string>{};
    };
    ModelFilter search;
    search.name_contains = "ELECTRONS";
    EXPECT_EQ(list(search).size(), 3u) << order;
    search.name_contains = "%";  // literal, not a wildcard
    EXPECT_EQ(list(search), (std::vector<std::string>{"alice/electrons%x:1"})) << order;
    search.name_contains = "s_2";  // "_" is literal too
    EXPECT_EQ(list(search), (std::vector<std::string>{"alice/Electrons_25:1"})) << order;
    ModelFilter owner;
    owner.owner = "bob";
    EXPECT_EQ(list(owner), (std::vector<std::string>{"bob/electrons:1"})) << order;
    ModelFilter alias;
    alias.alias = "champion";
    EXPECT_EQ(list(alias), (std::vector<std::string>{"alice/Electrons_25:1"})) << order;
    alias.owner = "bob";
    EXPECT_TRUE(list(alias).empty()) << order;
  }
}

TEST_F(ModelRepositoryTest, ListFiltersByDatasetPresetAndParticleWithTheOtherFilters) {
  // Alice's uploaded dataset "electrons" is ds-e1; bob has a dataset of the same name.
  test_db_.Query(
      "INSERT INTO datasets (id, owner, name, sha256, record) VALUES "
      "('ds-e1', 'alice', 'electrons', 'x', ''), ('ds-b1', 'bob', 'electrons', 'y', '')");
  ModelRepository models(*db_);
  auto add = [&](const std::string& owner, const std::string& dataset, const std::string& preset,
                 gantry::v1::Particle particle, double fom,
                 gantry::v1::Visibility visibility = gantry::v1::VISIBILITY_PRIVATE) {
    ModelVersion m = Model(owner, "m", {{"fom", fom}}, visibility);
    m.mutable_lineage()->set_dataset(dataset);
    m.mutable_lineage()->set_model_preset(preset);
    m.set_particle(particle);
    ASSERT_TRUE(models.Register(m).ok());
  };
  using gantry::v1::PARTICLE_ELECTRON;
  using gantry::v1::PARTICLE_PHOTON;
  add("alice", "ds-e1", "3dgan-25", PARTICLE_ELECTRON, 0.5);              // alice/m:1
  add("alice", "ds-e1", "tiny", PARTICLE_ELECTRON, 0.2);                  // alice/m:2
  add("alice", "toymc:events=100,seed=3", "tiny", PARTICLE_PHOTON, 0.1);  // alice/m:3
  add("alice", "ds-e1", "3dgan-25", PARTICLE_ELECTRON, 0.4);              // alice/m:4
  add("bob", "ds-b1", "3dgan-25", PARTICLE_ELECTRON, 0.3, gantry::v1::VISIBILITY_PUBLIC);
  ASSERT_TRUE(models.Archive("alice", "m:4").ok());

  auto list = [&](const std::string& viewer, const ModelFilter& f) {
    auto page = models.List(viewer, f, 0, "");
    EXPECT_TRUE(page.ok()) << page.status();
    return page.ok() ? Refs(page->items) : std::vector<std::string>{};
  };
  ModelFilter by_id;
  by_id.dataset = "ds-e1";
  EXPECT_EQ(list("alice", by_id), (std::vector<std::string>{"alice/m:2", "alice/m:1"}));
  by_id.include_archived = true;
  EXPECT_EQ(list("alice", by_id),
            (std::vector<std::string>{"alice/m:4", "alice/m:2", "alice/m:1"}));
  // By name: the viewer's own dataset of that name; bob's "electrons" is another dataset.
  ModelFilter by_name;
  by_name.dataset = "electrons";
  EXPECT_EQ(list("alice", by_name), (std::vector<std::string>{"alice/m:2", "alice/m:1"}));
  EXPECT_EQ(list("bob", by_name), (std::vector<std::string>{"bob/m:1"}));
  EXPECT_EQ(list("", by_name).size(), 3u);  // the admin view: every owner's "electrons"
  ModelFilter toymc;
  toymc.dataset = "toymc:events=100,seed=3";
  EXPECT_EQ(list("alice", toymc), (std::vector<std::string>{"alice/m:3"}));
  // References with the characters an array literal must escape.
  const std::string odd = R"(file:///data/a "b",{c}\d.h5)";
  add("alice", odd, "tiny", PARTICLE_PHOTON, 0.6);  // alice/m:5
  ModelFilter odd_ref;
  odd_ref.dataset = odd;
  EXPECT_EQ(list("alice", odd_ref), (std::vector<std::string>{"alice/m:5"}));
  ASSERT_TRUE(models.Archive("alice", "m:5").ok());
  ModelFilter unknown;
  unknown.dataset = "no-such-dataset";
  EXPECT_TRUE(list("alice", unknown).empty());

  ModelFilter preset;
  preset.model_preset = "3dgan-25";
  EXPECT_EQ(list("alice", preset), (std::vector<std::string>{"bob/m:1", "alice/m:1"}));
  ModelFilter photon;
  photon.particle = PARTICLE_PHOTON;
  EXPECT_EQ(list("alice", photon), (std::vector<std::string>{"alice/m:3"}));

  // Combined with each other, the name, tags, metric thresholds and the metric ordering, paged.
  ModelFilter combined;
  combined.dataset = "electrons";
  combined.particle = PARTICLE_ELECTRON;
  combined.name = "m";
  combined.tags = {};
  gantry::v1::MetricFilter fom;
  fom.set_metric("fom");
  fom.set_max(0.45);
  combined.metric_filters = {fom};
  combined.include_archived = true;
  combined.order_by = "metric:fom";
  EXPECT_EQ(list("alice", combined), (std::vector<std::string>{"alice/m:2", "alice/m:4"}));
  std::vector<std::string> paged;
  std::string token;
  for (int i = 0; i < 5; ++i) {
    auto page = models.List("alice", combined, 1, token);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const auto& r : Refs(page->items)) paged.push_back(r);
    token = page->next_page_token;
    if (token.empty()) break;
  }
  EXPECT_EQ(paged, (std::vector<std::string>{"alice/m:2", "alice/m:4"}));
  combined.model_preset = "tiny";
  EXPECT_EQ(list("alice", combined), (std::vector<std::string>{"alice/m:2"}));
}

TEST_F(ModelRepositoryTest, TheLineageColumnsOfExistingVersionsAreFilledFromTheirRecords) {
  ModelRepository models(*db_);
  ModelVersion m = Model("alice", "old");
  m.mutable_lineage()->set_dataset("ds-old");
  m.set_particle(gantry::v1::PARTICLE_PI0);
  ASSERT_TRUE(models.Register(m).ok());
  ASSERT_TRUE(models.Register(Model("alice", "bare")).ok());
  // As a version stored before the columns existed.
  test_db_.Query("UPDATE models SET dataset = '', model_preset = '', particle = 0");
  const Migration* columns = nullptr;
  for (const Migration& migration : EmbeddedMigrations()) {
    if (migration.version == 7) columns = &migration;
  }
  ASSERT_NE(columns, nullptr);
  ASSERT_NE(columns->backfill, nullptr);
  ASSERT_TRUE(db_->Transact([&](Transaction& tx) { return columns->backfill(tx); }).ok());
  EXPECT_EQ(test_db_.Query("SELECT name, dataset, model_preset, particle FROM models ORDER BY id"),
            "old\tds-old\ttiny\t3\nbare\t\ttiny\t0\n");
}

}  // namespace
}  // namespace gantry::storage
