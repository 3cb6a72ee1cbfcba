#include "storage/model_repository.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <thread>

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

}  // namespace
}  // namespace gantry::storage
