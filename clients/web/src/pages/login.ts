// Login: a tenant token becomes an HttpOnly session cookie; the token never enters a URL.
import { ApiError, login } from "../api";
import { errorBox, field, h, setMain } from "../dom";
import type { Route } from "../main";

export async function renderLogin(route: Route): Promise<void> {
  const next = route.query.get("next") || "/models";
  const token = h("input", { type: "password", name: "token", autocomplete: "off", required: true, spellcheck: "false" });
  const status = h("div", { "aria-live": "polite" });
  const form = h(
    "form",
    { className: "card narrow" },
    field("Tenant token", token, "The gnt_… token an administrator created for your tenant."),
    h("button", { type: "submit" }, "Log in"),
    status,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    status.replaceChildren();
    try {
      await login(token.value.trim());
      token.value = "";
      // Only routes inside the app: never an address taken from the URL.
      location.hash = `#${next.startsWith("/") ? next : "/models"}`;
    } catch (e) {
      const msg = e instanceof ApiError && e.httpStatus === 401 ? "That token was not accepted: check it and try again." : (e as Error).message;
      status.append(errorBox(msg));
      token.focus();
    }
  });
  setMain("Log in", h("h1", {}, "Log in to gantry"), form);
  token.focus();
}
