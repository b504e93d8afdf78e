// gallery.js: the jobs, newest first, a page at a time, each with its settings, time, alpha
// and images (class label and per-image statistics under each).
"use strict";

const gallery = {
  // pages by cursor (?after=): cursors[i] starts page i ("" the first); the list is never
  // counted, so a page costs the same however many jobs there are
  cursors: [""],
  limit: 6,
  jobs: new Map(), // id -> generation, for the detail view
  timer: 0,

  init() {
    $("#g-refresh").addEventListener("click", () => this.load());
    $("#g-class").addEventListener("change", () => { this.cursors = [""]; this.load(); });
    $("#g-mode").addEventListener("change", () => { this.cursors = [""]; this.load(); });
    $("#g-key").addEventListener("change", () => { this.cursors = [""]; this.load(); });
    this.loadKeys();
    $("#g-prev").addEventListener("click", () => { if (this.cursors.length > 1) this.cursors.pop(); this.load(); });
    $("#g-next").addEventListener("click", () => { if (this.next) this.cursors.push(this.next); this.load(); });
    this.load();
  },

  async load() {
    const box = $("#gallery-error");
    box.hidden = true;
    let page;
    try {
      page = await api.list({ limit: this.limit, after: this.cursors[this.cursors.length - 1], class: $("#g-class").value, mode: $("#g-mode").value, key: $("#g-key").value });
    } catch (e) {
      box.textContent = (e.field ? e.field + ": " : "") + e.message;
      box.hidden = false;
      return;
    }
    this.next = page.next || "";
    const list = $("#jobs");
    list.textContent = "";
    this.jobs.clear();
    for (const g of page.generations) {
      this.jobs.set(g.id, g);
      list.appendChild(this.card(g));
    }
    if (page.generations.length === 0) list.appendChild(el("p", { class: "muted" }, "No images yet: generate some above."));
    $("#g-page").textContent = `Page ${this.cursors.length}`;
    // jobs still queued or running (from another tab, or a restart) are refreshed until done
    clearTimeout(this.timer);
    if (page.generations.some((g) => this.isLive(g))) this.timer = setTimeout(() => this.load(), 2000);
    $("#g-prev").disabled = this.cursors.length === 1;
    $("#g-next").disabled = !this.next;
  },

  // loadKeys offers the key filter when the page's key sees other keys' jobs (an admin key)
  async loadKeys() {
    const box = $("#g-key-box"), sel = $("#g-key");
    let k;
    try {
      k = await api.keys();
    } catch (e) {
      box.hidden = true;
      return;
    }
    sel.textContent = "";
    sel.appendChild(el("option", { value: "" }, "all"));
    for (const key of k.keys) sel.appendChild(el("option", { value: key.name }, key.name + (key.admin ? " (admin)" : "")));
    box.hidden = k.keys.length < 2;
  },

  // expiry says when a job is deleted with its images (nothing when it is kept forever)
  expiry(g) {
    if (g.expires_at) {
      const left = (Date.parse(g.expires_at) - Date.now()) / 1000;
      return el("span", { class: "muted small expiry", title: "deleted with its images at " + g.expires_at },
        left > 0 ? "expires in " + fmtDuration(left) : "expired");
    }
    if (g.expires_in) return el("span", { class: "muted small expiry", title: "kept this long once it ends" }, "kept " + fmtDuration(g.expires_in));
    return null;
  },

  describe(g) {
    const s = g.settings;
    const parts = [s.mode + (s.preset ? ` (${s.preset})` : ""), "seed " + s.seed];
    if (s.cfg !== 1) parts.push("cfg " + s.cfg);
    if (s.temperature !== 1) parts.push("T " + s.temperature);
    if (s.mode !== "spec" && s.num_iter) parts.push(s.num_iter + " AR steps");
    if (s.spec) parts.push(`γ ${s.spec.gamma}, ${s.spec.verify}/${s.spec.acceptance}`);
    return parts.join(" · ");
  },

  card(g) {
    const head = el("header", { class: "job-head" },
      el("span", { class: "badge " + g.status }, g.status),
      el("span", {}, this.describe(g)),
      el("span", { class: "muted" }, g.seconds ? fmtSeconds(g.seconds) : ""),
      g.alpha !== undefined ? el("span", { title: "accepted over verified drafts, all images" }, "α " + fmtAlpha(g.alpha)) : null,
      g.key ? el("span", { class: "key-tag", title: "the API key that made this job" }, g.key) : null,
      this.expiry(g),
      el("span", { class: "spacer" }),
      g.images.length > 0 && g.links && g.links.grid
        ? el("a", {
          class: "small button-link", href: g.links.grid, download: g.id.slice(0, 8) + "-grid.png",
          title: "All images of this job as one PNG, a row per class, each row named",
        }, "Grid PNG")
        : null,
      g.status === "succeeded" && app.hasDraft
        ? el("button", { type: "button", class: "small", onclick: () => compare.prefill(g) }, "Compare")
        : null,
      el("button", {
        type: "button", class: "small", "aria-label": (this.isLive(g) ? "Cancel" : "Delete") + " job " + g.id.slice(0, 8),
        onclick: () => this.remove(g),
      }, this.isLive(g) ? "Cancel" : "Delete"));
    const card = el("article", { class: "job", dataset: { job: g.id, status: g.status, mode: g.settings.mode, key: g.key || "" } }, head);
    if (g.error) card.appendChild(el("p", { class: "error-inline" }, g.error + (g.error_code ? ` (${g.error_code})` : "")));
    const queue = this.queueInfo(g);
    if (queue) card.appendChild(el("p", { class: "muted small queue-info" }, queue));
    if (this.isLive(g)) {
      card.appendChild(el("p", { class: "muted" }, `${g.progress.images_done}/${g.progress.images_total} images…`));
    }
    const grid = el("div", { class: "grid" });
    for (const im of g.images) grid.appendChild(this.tile(g, im));
    card.appendChild(grid);
    return card;
  },

  isLive(g) { return g.status === "queued" || g.status === "running"; },

  // queueInfo says what the job asked of the queue: its priority, its start deadline while it
  // waits, and its webhook (the deliveries show in an image's detail).
  queueInfo(g) {
    const parts = [];
    if (g.priority) parts.push("priority " + g.priority);
    if (g.queue_deadline && g.status === "queued") parts.push("must start by " + new Date(g.queue_deadline).toLocaleTimeString());
    if (g.webhook) parts.push("webhook on " + g.webhook.events.join(", "));
    return parts.join(" · ");
  },

  tile(g, im) {
    const st = im.stats;
    const label = `${im.class_name}, image ${im.index + 1}` + (st ? `, alpha ${fmtAlpha(st.alpha)}` : "");
    return el("figure", { class: "tile", dataset: { image: im.id } },
      el("button", { type: "button", class: "thumb", "aria-label": "Open " + label, onclick: () => detail.open(g, im) },
        pictures.img({ src: im.url, alt: label }, 84)),
      el("figcaption", {},
        el("span", { class: "cls" }, im.class_name),
        el("span", { class: "muted small" },
          st ? `α ${fmtAlpha(st.alpha)} · ${st.accepted}/${st.drafted} · ${fmtSeconds(im.seconds)}` : fmtSeconds(im.seconds))));
  },

  async remove(g) {
    try {
      await api.remove(g.id);
    } catch (e) {
      const box = $("#gallery-error");
      box.textContent = (e.field ? e.field + ": " : "") + e.message;
      box.hidden = false;
      return;
    }
    this.load();
  },
};
