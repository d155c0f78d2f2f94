// Keeps a console page live: every interval, fetch the page's content alone
// (?fragment=1) and put it in place of <main>. Nothing runs while the tab is hidden.
"use strict";
(function () {
  const main = document.querySelector("main[data-refresh-ms]");
  if (!main) {
    return;
  }
  const every = Number(main.dataset.refreshMs) || 2000;
  let busy = false;

  async function refresh() {
    if (busy || document.hidden) {
      return;
    }
    busy = true;
    const url = new URL(window.location.href);
    url.searchParams.set("fragment", "1");
    try {
      const response = await fetch(url, { cache: "no-store" });
      if (response.status === 401) {
        // The session ended (logged out elsewhere, or idle too long): to the login form.
        window.location.assign("/login");
        return;
      }
      if (response.ok || response.status === 404) {
        main.innerHTML = await response.text();
        main.classList.remove("unreachable");
      } else {
        main.classList.add("unreachable");
      }
    } catch (error) {
      // The console itself stopped answering: say so over what is shown.
      main.classList.add("unreachable");
    } finally {
      busy = false;
    }
  }

  window.setInterval(refresh, every);
  document.addEventListener("visibilitychange", refresh);
})();
