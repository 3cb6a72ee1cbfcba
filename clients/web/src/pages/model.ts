// One model: its versions with their aliases and key metrics.
import { enc, getJson, type ModelVersion, refOf } from "../api";
import { errorBox, h, link, num, setMain, table, when } from "../dom";
import type { Route } from "../main";
import { KEY_METRICS } from "./models";

export async function renderModel(route: Route): Promise<void> {
  const name = route.parts.join("/");
  let versions: ModelVersion[];
  try {
    const answer = await getJson<{ models?: ModelVersion[] }>(`/api/v1/models/${enc(name)}/versions`);
    versions = answer.models ?? [];
  } catch (e) {
    setMain(name, h("h1", {}, name), errorBox((e as Error).message));
    return;
  }
  if (versions.length === 0) {
    setMain(name, h("h1", {}, name), errorBox(`Model ${name} does not exist or is not visible to you.`), h("p", {}, link("/models", "Back to the models")));
    return;
  }
  versions.sort((a, b) => b.version - a.version);
  const columns = KEY_METRICS.filter((k) => versions.some((m) => m.metrics && k in m.metrics));
  const rows = versions.map((m) => [
    link(`/version/${enc(refOf(m))}`, `v${m.version}`, { "data-ref": refOf(m) }),
    h("span", {}, ...(m.aliases ?? []).map((a) => h("span", { className: "badge", "data-alias": a }, a))),
    m.status === "MODEL_STATUS_ARCHIVED" ? "archived" : "ready",
    ...columns.map((k) => num(m.metrics?.[k])),
    m.lineage?.parentModel ? link(`/version/${enc(m.lineage.parentModel)}`, m.lineage.parentModel) : "—",
    when(m.createdAt),
  ]);
  const refs = versions.slice(0, 2).map((m) => enc(refOf(m))).join(",");
  setMain(
    name,
    h("p", { className: "crumbs" }, link("/models", "Models"), " / ", name),
    h("h1", {}, name),
    h("p", {}, `Owner ${versions[0].owner ?? "—"} · preset ${versions[0].lineage?.modelPreset ?? "—"}`),
    h("div", { className: "scroll" }, table(["Version", "Aliases", "Status", ...columns, "Fine-tuned from", "Created"], rows, "Versions")),
    versions.length > 1 ? h("p", {}, link(`/compare?refs=${refs}`, "Compare the two newest versions")) : null,
  );
}
