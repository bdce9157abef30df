// jetfn console: live refresh of a page's main part, keyboard shortcuts.
// No framework, no build step; the pages work without it (minus the
// refresh).
"use strict";
(function () {
  const main = document.getElementById("main");
  const state = document.getElementById("live-state");
  const every = 2000;

  // Live pages name the URL of their main part; it is fetched every few
  // seconds while the tab is visible and swapped in when it changed. The
  // focused link or field keeps its focus across the swap.
  let last = main ? main.innerHTML : "";
  async function refresh() {
    const url = main && main.dataset.live;
    if (!url || document.hidden) return;
    try {
      const res = await fetch(url, { headers: { "X-Requested-With": "jetfn-console" }, cache: "no-store" });
      if (!res.ok) throw new Error(res.status);
      const html = await res.text();
      state.textContent = "live · " + new Date().toLocaleTimeString();
      state.classList.remove("stale");
      if (html === last) return;
      const focusKey = keyOf(document.activeElement);
      main.innerHTML = html;
      last = html;
      if (focusKey) restore(focusKey);
    } catch (e) {
      state.textContent = "not updating (" + e.message + ")";
      state.classList.add("stale");
    }
  }
  function keyOf(el) {
    if (!el || !main.contains(el)) return null;
    return el.id ? "#" + CSS.escape(el.id) : el.getAttribute("href") ? 'a[href="' + CSS.escape(el.getAttribute("href")) + '"]' : null;
  }
  function restore(sel) {
    const el = main.querySelector(sel);
    if (el) el.focus({ preventScroll: true });
  }
  if (main && main.dataset.live) {
    setInterval(refresh, every);
    document.addEventListener("visibilitychange", refresh);
  }

  // Shortcuts, unless typing in a field.
  const go = { f: "/functions", d: "/deadletters", p: "/deploys" };
  document.addEventListener("keydown", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const t = ev.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
    const help = document.getElementById("help");
    if (go[ev.key]) { location.href = go[ev.key]; return; }
    if (ev.key === "?") { help.showModal(); return; }
    if (ev.key === "/") {
      const f = document.querySelector("[data-filter]");
      if (f) { ev.preventDefault(); f.focus(); }
      return;
    }
    if (ev.key === "j" || ev.key === "k") {
      const links = Array.from(main.querySelectorAll("a.rowlink, .fn h2 a"));
      if (!links.length) return;
      const i = links.indexOf(document.activeElement);
      const next = ev.key === "j" ? Math.min(i + 1, links.length - 1) : Math.max(i - 1, 0);
      links[i < 0 ? 0 : next].focus();
    }
  });
})();
