// detail.js: one image large, with its acceptance heatmap (per grid position, paper Fig. 11)
// and its acceptance rate per AR step (paper Fig. 9), for the image alone or summed over all
// images of its job.
"use strict";

const detail = {
  gen: null,
  image: null,
  picture: null,
  scope: "image",

  init() {
    const dlg = $("#detail");
    $("#detail-close").addEventListener("click", () => dlg.close());
    dlg.addEventListener("click", (e) => { if (e.target === dlg) dlg.close(); }); // backdrop
    $("#heat-toggle").addEventListener("change", () => this.draw());
    $("#heat-opacity").addEventListener("input", () => this.draw());
    charts.legend($("#heat-legend"));
  },

  // stats returns the statistics in the chosen scope, or null outside spec mode.
  stats() {
    if (!this.image.stats) return null;
    if (this.scope === "image") return this.image.stats;
    const all = this.gen.images.map((im) => im.stats).filter(Boolean);
    return all.length ? charts.sumStats(all) : null;
  },

  open(gen, im) {
    this.gen = gen;
    this.image = im;
    this.scope = "image";
    const s = gen.settings;
    $("#detail-title").textContent = `${im.class_name} · image ${im.index + 1} of ${gen.images.length} · ${s.mode}, seed ${s.seed}`;
    $("#detail-png").href = im.url;
    $("#detail-png").setAttribute("download", im.id + ".png");
    this.fillStats();
    this.picture = new Image();
    this.picture.onload = () => this.draw();
    this.picture.src = im.url;
    this.draw();
    const dlg = $("#detail");
    if (!dlg.open) dlg.showModal();
  },

  fillStats() {
    const dl = $("#detail-stats"), im = this.image, st = im.stats;
    dl.textContent = "";
    const row = (k, v) => { dl.appendChild(el("dt", {}, k)); dl.appendChild(el("dd", {}, String(v))); };
    row("Class", `${im.class_name} (${im.class})`);
    row("Ready after", fmtSeconds(im.seconds) + " from the job's start");
    row("Job time", fmtSeconds(this.gen.seconds));
    if (st) {
      row("α (this image)", fmtAlpha(st.alpha));
      if (this.gen.images.length > 1) row("α (whole job)", fmtAlpha(this.gen.alpha));
      row("Drafts accepted", `${st.accepted} of ${st.drafted}`);
      row("Resampled", st.resampled);
      row("Bonus tokens", st.bonus);
      row("Prefilled", st.prefilled);
      row("Rounds", st.rounds);
      if (this.gen.images.length > 1) {
        const sel = el("select", { id: "detail-scope", "aria-label": "Statistics of" },
          el("option", { value: "image" }, "this image"),
          el("option", { value: "job" }, `all ${this.gen.images.length} images of the job`));
        sel.value = this.scope;
        sel.addEventListener("change", () => { this.scope = sel.value; this.draw(); });
        dl.appendChild(el("dt", {}, "Charts show"));
        dl.appendChild(el("dd", {}, sel));
      }
    } else {
      row("Speculative statistics", "none: mode " + this.gen.settings.mode + " runs one model");
    }
    if (this.gen.priority) row("Priority", this.gen.priority);
    if (this.gen.webhook) this.fillWebhook(row);
  },

  // fillWebhook adds where each of the job's webhook calls stands (only one job's GET lists
  // its deliveries, so it is read now).
  async fillWebhook(row) {
    const gen = this.gen;
    let full;
    try {
      full = await api.get(gen.id);
    } catch (e) {
      row("Webhook", "cannot read the deliveries: " + e.message);
      return;
    }
    if (this.gen !== gen) return; // another image was opened meanwhile
    const ds = (full.webhook && full.webhook.deliveries) || [];
    const what = (d) => `${d.event}: ${d.state}, ${d.attempts} ${d.attempts === 1 ? "try" : "tries"}` +
      (d.last_status ? `, last answer ${d.last_status}` : "") + (d.state !== "delivered" && d.last_error ? ` (${d.last_error})` : "");
    row("Webhook", ds.length ? ds.map(what).join("; ") : "no event called yet");
  },

  draw() {
    const stats = this.stats();
    const heat = $("#heat-canvas");
    const rated = charts.heatmap(heat, this.picture, stats, $("#heat-toggle").checked, Number($("#heat-opacity").value));
    const note = $("#heat-note");
    if (!stats) note.textContent = "No heatmap: this image was not made by speculative decoding.";
    else {
      const n = stats.grid_height * stats.grid_width;
      note.textContent = `${rated} of ${n} positions had a draft verified` +
        (this.scope === "job" ? " (summed over the job's images)" : "") +
        "; the target sampled the hatched ones alone (prefill or bonus tokens).";
    }
    heat.setAttribute("aria-label", stats
      ? `Image with its acceptance heatmap: ${rated} positions with verified drafts`
      : "Image (no acceptance statistics)");
    const steps = charts.alphaChart($("#alpha-canvas"), stats);
    $("#alpha-note").textContent = stats
      ? `${steps} AR steps with verified drafts; the dashed line is the overall α.`
      : "No per-step acceptance outside speculative decoding.";
    const table = $("#alpha-table");
    table.textContent = "";
    if (stats) table.appendChild(charts.alphaTable(stats));
  },
};
