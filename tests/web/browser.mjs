// The browser half of ctest web.catalog_e2e (web_e2e.py starts the stack and passes it in WEB_*):
// drives Debian's chromium with puppeteer-core over the real pages and exits non-zero on the first
// failed check, naming it. Screenshots go to WEB_SCREENSHOTS when it is set.
import { existsSync } from "node:fs";
import { join } from "node:path";
import puppeteer from "puppeteer-core";

const env = (name) => {
  const v = process.env[name];
  if (v === undefined) throw new Error(`${name} is not set (web_e2e.py sets it)`);
  return v;
};
const BASE = env("WEB_BASE");
const TOKEN = env("WEB_TOKEN");
const RUNNING_JOB = env("WEB_RUNNING_JOB");
const DOWNLOADS = env("WEB_DOWNLOADS");
const SHOTS = process.env.WEB_SCREENSHOTS ?? "";
const t0 = Date.now();
const log = (msg) => console.log(`[browser ${((Date.now() - t0) / 1000).toFixed(1)} s] ${msg}`);

class CheckFailed extends Error {}
function check(ok, what) {
  if (!ok) throw new CheckFailed(what);
}

const browser = await puppeteer.launch({
  executablePath: env("WEB_CHROMIUM"),
  headless: true,
  userDataDir: env("WEB_PROFILE"),
  // root in a container-less test: chromium's sandbox needs user namespaces it may not get.
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--lang=en-US"],
  defaultViewport: { width: 1366, height: 900 },
});
let failed = null;
try {
  const page = await browser.newPage();
  const pageErrors = [];
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  page.on("console", (m) => {
    if (m.type() === "error" && !/Failed to load resource/.test(m.text())) pageErrors.push(m.text());
  });
  const cdp = await page.createCDPSession();
  await cdp.send("Browser.setDownloadBehavior", { behavior: "allow", downloadPath: DOWNLOADS });

  /** Goes to an app route and waits until that page says it has loaded. */
  async function open(route, pageName) {
    // A new fragment does not reload the document: forget the last page's marker first, so the
    // wait below sees the new page's.
    await page.evaluate(() => document.getElementById("main")?.removeAttribute("data-page")).catch(() => undefined);
    await page.goto(`${BASE}/#${route}`, { waitUntil: "domcontentloaded" });
    await page.waitForSelector(`main[data-page="${pageName}"]`, { timeout: 20000 });
  }
  async function shot(name) {
    if (!SHOTS) return;
    await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: false });
    log(`screenshot ${name}.png`);
  }
  const texts = (selector) => page.$$eval(selector, (els) => els.map((e) => e.textContent.trim()));
  const api = (path, init) =>
    page.evaluate(
      async (path, init) => {
        const r = await fetch(path, init);
        return { status: r.status, body: await r.text() };
      },
      path,
      init ?? {},
    );

  /** Every figure.plot on the page: its data-points and how many canvas pixels carry a series colour. */
  async function plotsDrawn() {
    return page.$$eval("figure.plot", (figs) =>
      figs.map((fig) => {
        const canvas = fig.querySelector("canvas");
        let coloured = 0;
        if (canvas && canvas.width > 0) {
          const px = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
          for (let i = 0; i < px.length; i += 4) {
            const [r, g, b, a] = [px[i], px[i + 1], px[i + 2], px[i + 3]];
            // the first series colour (#c2410c), the second (#1d4ed8) and the Monte Carlo grey fill
            const orange = r > 150 && g > 40 && g < 120 && b < 60;
            const blue = b > 150 && r < 80 && g > 50 && g < 120;
            const grey = Math.abs(r - g) < 12 && Math.abs(g - b) < 16 && r > 90 && r < 225 && a > 0;
            if (a > 0 && (orange || blue || grey)) coloured++;
          }
        }
        return { name: fig.dataset.plot, points: Number(fig.dataset.points), coloured, hasCanvas: !!canvas };
      }),
    );
  }

  // 1. No session: every app page sends the browser to the login page, and the API answers 401.
  await page.goto(`${BASE}/#/models`, { waitUntil: "domcontentloaded" });
  await page.waitForSelector('main[data-page="login"]', { timeout: 20000 });
  check(page.url().includes("#/login?next="), `without a session #/models went to ${page.url()}, not the login page`);
  await open("/version/web-ele%3A1", "login");
  const next = new URLSearchParams(new URL(page.url()).hash.split("?")[1] ?? "").get("next");
  check(next === "/version/web-ele%3A1", `the login page does not remember the version page: ${page.url()}`);
  check((await api("/api/v1/models")).status === 401, "GET /api/v1/models without a session is not 401");
  await shot("login");
  log("no session: redirected to login, API 401");

  // 2. A wrong token is refused with a message; the right one logs in and returns to the page asked for.
  await page.type("input[name=token]", "gnt_not_a_real_token_0000");
  await page.keyboard.press("Enter");
  await page.waitForSelector("main .error", { timeout: 10000 });
  check(/not accepted/.test(await page.$eval("main .error", (e) => e.textContent)), "a wrong token's message does not say it was not accepted");
  await page.$eval("input[name=token]", (e) => (e.value = ""));
  await page.type("input[name=token]", TOKEN);
  await page.keyboard.press("Enter");
  await page.waitForSelector('main[data-page="version"]', { timeout: 20000 });
  check(page.url().includes("#/version/"), `after login the browser is at ${page.url()}, not the version page it asked for`);
  const cookies = await page.cookies();
  const session = cookies.find((c) => c.name === "gantry_session");
  check(session && session.httpOnly && session.sameSite === "Strict", `the session cookie is not HttpOnly SameSite=Strict: ${JSON.stringify(session)}`);
  check(!page.url().includes(TOKEN), "the token appears in the URL");
  log("login: wrong token refused, session cookie HttpOnly SameSite=Strict");

  // 3. The catalog: alice's two versions, not bob's model, whatever the filters.
  await open("/models", "models");
  let refs = await page.$$eval("main table a[data-ref]", (as) => as.map((a) => a.dataset.ref));
  check(refs.includes("web-ele:1") && refs.includes("web-ele:2") && refs.includes("web-live:1") === false, `the catalog lists ${refs}`);
  check(!refs.some((r) => r.startsWith("bob-secret")), `another tenant's model is listed: ${refs}`);
  await shot("models");
  // Search by name and filter by tag through the form, with the keyboard.
  await page.type("input[name=q]", "web-ele");
  await page.type("input[name=tag]", "campaign:web");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => location.hash.includes("tag=campaign"), { timeout: 5000 });
  await page.waitForSelector('main[data-page="models"]');
  refs = await page.$$eval("main table a[data-ref]", (as) => as.map((a) => a.dataset.ref));
  check(refs.join() === "web-ele:1", `name web-ele + tag campaign:web lists ${refs}, expected only web-ele:1`);
  await open("/models?preset=tiny&owner=alice", "models");
  refs = await page.$$eval("main table a[data-ref]", (as) => as.map((a) => a.dataset.ref));
  check(refs.includes("web-ele:1") && refs.includes("web-ele:2"), `preset tiny + owner alice lists ${refs}`);
  await open("/models?owner=bob", "models");
  check((await page.$$("main table a[data-ref]")).length === 0, "owner=bob shows versions to alice");
  // Metric thresholds: fom <= 100% keeps both, fom <= 0 keeps none; sorting by fom is ascending.
  const all = JSON.parse((await api("/api/v1/models?name=web-ele")).body).models;
  const foms = Object.fromEntries(all.map((m) => [`${m.name}:${m.version}`, m.metrics.fom]));
  check(Number.isFinite(foms["web-ele:1"]) && Number.isFinite(foms["web-ele:2"]), `the API gives no fom: ${JSON.stringify(foms)}`);
  await open("/models?q=web-ele&metric=fom&max=200%25", "models");
  refs = await page.$$eval("main table a[data-ref]", (as) => as.map((a) => a.dataset.ref));
  check(refs.length === 2, `fom <= 200% lists ${refs}`);
  const lower = Math.min(foms["web-ele:1"], foms["web-ele:2"]);
  await open(`/models?q=web-ele&metric=fom&max=${lower}`, "models");
  refs = await page.$$eval("main table a[data-ref]", (as) => as.map((a) => a.dataset.ref));
  const expected = Object.keys(foms).filter((r) => foms[r] <= lower);
  check(refs.sort().join() === expected.sort().join(), `fom <= ${lower} lists ${refs}, expected ${expected}`);
  await open("/models?q=web-ele&sort=fom", "models");
  refs = await page.$$eval("main table a[data-ref]", (as) => as.map((a) => a.dataset.ref));
  const byFom = Object.keys(foms).sort((a, b) => foms[a] - foms[b]);
  check(refs.join() === byFom.join(), `sorted by fom: ${refs}, expected ${byFom}`);
  await open("/models?metric=fom&max=abc", "models");
  check(/Threshold "abc"/.test(await page.$eval("main .error", (e) => e.textContent)), "a bad threshold gets no clear message");
  log("catalog: search, tag, preset, owner, metric threshold and sort behave; bob's model absent");

  // 4. The version page: every plot drawn with data, metrics, lineage, checkpoint, usage.
  await open("/version/web-ele%3A1", "version");
  await page.waitForFunction(() => document.querySelectorAll("figure.plot canvas").length >= 6, { timeout: 20000 });
  await new Promise((r) => setTimeout(r, 300));
  let plots = await plotsDrawn();
  const names = plots.map((p) => p.name);
  for (const want of ["sampling_fraction_vs_energy", "profile_z|", "profile_x|", "profile_y|", "feature/total_energy|"]) {
    check(names.some((n) => n.startsWith(want)), `the version page has no ${want} plot: ${names}`);
  }
  for (const p of plots) {
    // A histogram has 25+ points and a filled area; the validation curve may have one step.
    const ink = p.name === "validation_curve" ? 10 : 50;
    check(p.hasCanvas && p.points > 0 && p.coloured > ink, `plot ${p.name} is empty: ${JSON.stringify(p)}`);
  }
  const model = JSON.parse((await api("/api/v1/models/web-ele%3A1")).body);
  const pageText = await page.$eval("main", (m) => m.textContent);
  check(pageText.includes(model.checkpointSha256), "the checkpoint sha256 is not shown");
  check(pageText.includes(model.lineage.dataset), "the dataset is not shown");
  check(pageText.includes(model.lineage.jobId), "the training job is not shown");
  // The validity domain: the energy range it was trained on, the angle, no left-out band.
  check(pageText.includes("fixed: normal incidence only"), "the angle of a fixed-angle model is not shown");
  check((await texts('[data-fact="left-out"]'))[0] === "—", "a model trained on every energy shows a left-out band");
  // Which checkpoint of the job the version is (the last one: no register_best).
  const checkpointFact = (await texts('[data-fact="checkpoint"]'))[0];
  check(checkpointFact === `epoch ${model.lineage.checkpointEpoch ?? 0}, step ${model.lineage.checkpointStep}` &&
        Number(model.lineage.checkpointStep) > 0, `the checkpoint fact reads ${checkpointFact}`);
  // The model card: a download of the registry's card, the same JSON GetModel returns.
  const download = await page.$eval('a[data-card="download"]', (a) => ({ name: a.getAttribute("download"), href: a.href }));
  check(download.name === "web-ele-1.card.json" && download.href.startsWith("blob:"), `the model card downloads as ${JSON.stringify(download)}`);
  const shown = JSON.parse(await page.$eval('pre[data-card="json"]', (p) => p.textContent));
  check(shown.schema === "gantry.model_card/1" && shown.model.ref === "web-ele:1" && shown.file === null,
    `the page's card is ${JSON.stringify(shown).slice(0, 200)}`);
  check(shown.validity.energy_gev.min === model.energyRangeGev.min, "the card's energy range is not the model's");
  check(JSON.stringify(shown) === JSON.stringify(JSON.parse(model.modelCardJson)), "the page's card differs from GetModel's");
  check((await texts("pre[data-usage=cli]"))[0].startsWith("gantry generate web-ele:1 "), "the CLI line is missing");
  check((await texts("pre[data-usage=python]"))[0].includes('client.generate("web-ele:1"'), "the Python line is missing");
  const metricRows = await texts("table.metrics tbody tr td:first-child");
  check(metricRows.includes("fom") && metricRows.includes("eprof"), `the metrics table lists ${metricRows}`);
  check((await texts("ol.lineage li li a")).includes("web-ele:2"), "the lineage does not list web-ele:2 as fine-tuned from web-ele:1");
  await shot("version");
  await page.$eval("#plots-h", (e) => e.scrollIntoView());
  await shot("version-plots");
  await page.evaluate(() => window.scrollTo(0, 0));
  log(`version page: ${plots.length} plots drawn with data, metrics, lineage, checkpoint, usage`);

  // 5. Compare two versions on the same plots.
  await open("/compare?refs=web-ele%3A1,web-ele%3A2", "compare");
  await page.waitForFunction(() => document.querySelectorAll("figure.plot canvas").length >= 6, { timeout: 20000 });
  await new Promise((r) => setTimeout(r, 300));
  plots = await plotsDrawn();
  for (const p of plots) check(p.points > 0 && p.coloured > 50, `compared plot ${p.name} is empty: ${JSON.stringify(p)}`);
  const heads = await texts("table.metrics thead th");
  check(heads.includes("web-ele:1") && heads.includes("web-ele:2"), `the comparison's metrics table has columns ${heads}`);
  const legend = await page.$$eval("figure.plot .u-legend .u-series .u-label", (ls) => ls.map((l) => l.textContent));
  check(legend.includes("web-ele:1") && legend.includes("web-ele:2"), `the compared plots' legends name ${[...new Set(legend)]}`);
  await page.$eval("#cmp-plots", (e) => e.scrollIntoView());
  await shot("compare");
  log(`compare: ${plots.length} plots with both versions`);

  // 6. Alias: set on web-ele:2 from its page; the API then resolves web-ele@champion to version 2.
  await open("/version/web-ele%3A2", "version");
  await page.type("input[name=alias]", "champion");
  await page.keyboard.press("Enter");
  await page.waitForSelector('h1 .badge[data-alias="champion"]', { timeout: 15000 });
  const champion = JSON.parse((await api("/api/v1/models/web-ele%40champion")).body);
  check(champion.version === 2, `web-ele@champion resolves to ${JSON.stringify(champion.version)}`);
  // A write without the CSRF header is refused.
  const noCsrf = await api("/api/v1/models/web-ele/aliases", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ name: "web-ele", alias: "sneaky", version: 1 }),
  });
  check(noCsrf.status === 403, `a write without X-CSRF-Token answered ${noCsrf.status}`);
  log("alias set through the page; a write without the CSRF token refused");

  // 7. Another tenant's model: not found, even by its exact name.
  await open("/version/bob-secret%3A1", "version");
  const bobText = await page.$eval("main", (m) => m.textContent);
  check(/not visible to you/.test(bobText), `bob's version page does not say it is not visible: ${bobText.slice(0, 300)}`);
  check((await api("/api/v1/models/bob-secret%3A1")).status === 404, "GET bob-secret:1 as alice is not 404");
  log("bob-secret:1 is absent for alice");

  // 8. A running job: its loss curve grows from the live stream.
  await open(`/jobs/${encodeURIComponent(RUNNING_JOB)}`, "jobs");
  const points = () => page.$eval('figure[data-plot="loss_curve"]', (f) => Number(f.dataset.points));
  const p0 = await points();
  await page.waitForFunction((p) => Number(document.querySelector('figure[data-plot="loss_curve"]').dataset.points) > p, { timeout: 45000 }, p0);
  const p1 = await points();
  await page.waitForFunction((p) => Number(document.querySelector('figure[data-plot="loss_curve"]').dataset.points) > p, { timeout: 45000 }, p1);
  const p2 = await points();
  const live = await page.$eval('dd[data-live="Samples/s"]', (d) => d.textContent);
  check(Number(live) > 0, `samples/s reads ${live}`);
  const drawn = (await plotsDrawn()).find((p) => p.name === "loss_curve");
  check(drawn.coloured > 20, `the loss curve canvas is empty: ${JSON.stringify(drawn)}`);
  await shot("job");
  log(`job page: loss curve grew ${p0} -> ${p1} -> ${p2} points, ${live} samples/s`);
  await open("/jobs", "jobs");
  check((await page.$$eval("a[data-job]", (as) => as.map((a) => a.dataset.job))).includes(RUNNING_JOB), "the jobs list lacks the running job");

  // 9. Generate: the form's answer is saved as an HDF5 file (web_e2e.py reads it).
  await open("/generate?model=web-ele%3A1", "generate");
  await page.$eval("input[name=energies]", (e) => (e.value = ""));
  await page.type("input[name=energies]", "50:100");
  await page.$eval("input[name=count]", (e) => (e.value = ""));
  await page.type("input[name=count]", "20");
  await page.$eval("input[name=seed]", (e) => (e.value = ""));
  await page.type("input[name=seed]", "7");
  await page.click("form button[type=submit]");
  await page.waitForSelector("[data-downloaded], main .error", { timeout: 60000 });
  const err = await page.$("main .error");
  check(!err, `generation failed: ${err ? await page.$eval("main .error", (e) => e.textContent) : ""}`);
  const file = join(DOWNLOADS, await page.$eval("[data-downloaded]", (e) => e.dataset.downloaded));
  for (let i = 0; i < 100 && !existsSync(file); i++) await new Promise((r) => setTimeout(r, 100));
  check(existsSync(file), `${file} was not saved`);
  // Bad input is refused in the form, naming the field.
  await page.$eval("input[name=count]", (e) => (e.value = "0"));
  await page.click("form button[type=submit]");
  await page.waitForSelector("main .error", { timeout: 5000 });
  check(/Count 0/.test(await page.$eval("main .error", (e) => e.textContent)), "count 0 gets no clear message");
  log(`generate: saved ${file}`);

  // 10. Log out: the session is gone, pages go to the login page again.
  await page.click("#who button");
  await page.waitForSelector('main[data-page="login"]', { timeout: 10000 });
  await open("/models", "login");
  check((await api("/api/v1/session")).status === 401, "the session still answers after logging out");
  log("logged out");

  check(pageErrors.length === 0, `the pages logged errors: ${pageErrors.join(" | ")}`);
} catch (e) {
  failed = e;
} finally {
  await browser.close();
}
if (failed) {
  console.log(`FAIL: ${failed instanceof CheckFailed ? failed.message : failed.stack}`);
  process.exit(1);
}
log("all browser checks passed");
