// compare.js: the same class and seed run three ways, one after the other: the target alone at
// one token per step (the law speculative decoding reproduces), the server's default preset
// (MAR's own fast schedule: the strongest baseline), and speculative decoding; side by side
// with the server's measured job times. A speedup is quoted against both baselines.
"use strict";

const compare = {
  init() {
    $("#cmp-form").addEventListener("submit", (e) => { e.preventDefault(); this.run(); });
  },

  // prefill copies a gallery job's class and seed into the form.
  prefill(g) {
    $("#c-class").value = String(g.settings.classes[0]);
    $("#c-seed").value = String(g.settings.seed);
    const perClass = g.settings.classes.filter((c) => c === g.settings.classes[0]).length;
    $("#c-n").value = String(perClass);
    if (g.settings.spec) {
      $("#c-gamma").value = g.settings.spec.gamma;
      $("#c-acceptance").value = g.settings.spec.acceptance;
    }
    $("#compare").scrollIntoView({ behavior: "smooth" });
    $("#c-seed").focus();
  },

  async run() {
    const form = $("#cmp-form"), box = $("#cmp-error"), out = $("#cmp-result"), button = $("#cmp-submit");
    clearError(form, box);
    const base = { class: [fieldValue($("#c-class"))], n: fieldValue($("#c-n")), seed: fieldValue($("#c-seed")) };
    // final_step_noise: speculative decoding gives the last diffusion step its variance, so
    // the target-alone run does too, or the two would not sample the same distribution.
    const targetReq = { ...base, mode: "target", final_step_noise: true };
    const preset = app.models && app.models.default_preset;
    const presetReq = preset ? { ...base, preset } : null;
    const specReq = { ...base, mode: "spec", gamma: fieldValue($("#c-gamma")), acceptance: fieldValue($("#c-acceptance")) };
    out.textContent = "";
    out.dataset.state = "running";
    const targetCol = this.column("target", "Target, one token per step");
    const presetCol = presetReq ? this.column("preset", `Default preset (${preset})`) : null;
    const specCol = this.column("spec", "Speculative decoding");
    out.append(targetCol.node, ...(presetCol ? [presetCol.node] : []), specCol.node);
    const summary = el("p", { class: "cmp-summary" });
    out.appendChild(summary);
    button.disabled = true;
    try {
      const a = await this.one(targetReq, targetCol);
      const seed = a.settings.seed; // the seed the server picked, when none was given
      const p = presetReq ? await this.one({ ...presetReq, seed }, presetCol) : null;
      const b = await this.one({ ...specReq, seed }, specCol);
      const ok = (g) => g && g.status === "succeeded" && g.seconds > 0;
      const versus = (g, name) => {
        const r = g.seconds / b.seconds;
        return `${fmtSeconds(g.seconds)} for ${name}: ` + (r >= 1 ? `${r.toFixed(2)}× faster` : `${(1 / r).toFixed(2)}× slower`);
      };
      if (ok(a) && ok(b)) {
        const parts = [versus(a, "the target at one token per step")];
        if (ok(p)) parts.push(versus(p, `the ${preset} preset`));
        summary.textContent = `Speculative decoding took ${fmtSeconds(b.seconds)}, α ${fmtAlpha(b.alpha)}; against ` +
          parts.join("; against ") + ". One run each; times vary with the machine's load.";
      }
      out.dataset.state = "done";
    } catch (e) {
      showError(form, box, e);
      out.dataset.state = "failed";
    }
    button.disabled = false;
    gallery.load();
  },

  column(role, title) {
    const status = el("p", { class: "muted", "aria-live": "polite" }, "waiting…");
    const time = el("p", { class: "cmp-time" }, "");
    const grid = el("div", { class: "grid" });
    const node = el("div", { class: "cmp-col", dataset: { role } }, el("h3", {}, title), status, time, grid);
    return { node, status, time, grid };
  },

  async one(req, col) {
    const gen = await api.create(req);
    col.node.dataset.job = gen.id;
    const final = await api.follow(gen, (type, data) => {
      const p = data.progress || (data.generation && data.generation.progress);
      if (p) col.status.textContent = fmtProgress(p);
    });
    col.node.dataset.status = final.status;
    col.status.textContent = gallery.describe(final) + " · " + final.status + (final.error ? ": " + final.error : "");
    col.time.textContent = final.status === "succeeded"
      ? `${fmtSeconds(final.seconds)} for ${final.images.length} image${final.images.length === 1 ? "" : "s"}` + (final.alpha !== undefined ? ` · α ${fmtAlpha(final.alpha)}` : "")
      : "";
    col.time.dataset.seconds = String(final.seconds || 0);
    for (const im of final.images) col.grid.appendChild(gallery.tile(final, im));
    return final;
  },
};
