// app.js: start-up (models, class pickers) and the generate form with its live progress.
"use strict";

const app = { models: null, classes: [], hasDraft: false };

async function start() {
  try {
    app.models = await api.models();
  } catch (e) {
    $("#models-line").textContent = "Cannot read the models: " + e.message;
    return;
  }
  const target = app.models.models.find((m) => m.role === "target");
  const draft = app.models.models.find((m) => m.role === "draft");
  app.classes = target ? target.classes : [];
  app.hasDraft = Boolean(draft);
  const [h, w, c] = target ? target.image : [0, 0, 0];
  $("#models-line").textContent = target
    ? `target ${target.name} (${h}×${w}×${c}, ${target.seq_len} tokens, ${target.sampling_steps} diffusion steps)` +
      (draft ? ` · draft ${draft.name}` : " · no draft model: speculative decoding is off")
    : "no target model loaded";
  if (target && target.max_images_per_request) $("#f-n").max = target.max_images_per_request;

  pictures.setSize(target ? target.image : null);
  classPicker.init(app.classes);
  app.classes.forEach((name, i) => {
    $("#c-class").appendChild(el("option", { value: i }, name));
    $("#g-class").appendChild(el("option", { value: i }, name));
  });
  // the presets are the running pack's (its manifest's), each with where it comes from
  const about = app.models.preset_about || {};
  const info = app.models.preset_info || {};
  const presetTitle = (p) => [about[p], info[p] && info[p].provenance].filter(Boolean).join(" — ");
  for (const p of app.models.presets || []) {
    const tag = info[p] && info[p].evaluation ? " (paper evaluation)" : "";
    $("#f-preset").appendChild(el("option", { value: p, title: presetTitle(p) }, p + tag));
  }
  const def = $("#f-preset").querySelector('option[value=""]');
  def.textContent = app.models.default_preset ? `default (${app.models.default_preset})` : "default (speculative)";
  def.title = presetTitle(app.models.default_preset);
  // the pack's defaults show where a field is left empty
  const d = target && target.defaults;
  if (d) {
    $("#f-num_iter").placeholder = String(d.num_iter);
    $("#f-steps").placeholder = String(d.steps);
    $("#f-cfg").placeholder = String(d.cfg);
    $("#f-temperature").placeholder = String(d.temperature);
    $("#f-cfg").title = $("#f-temperature").title = "pack default: " + d.provenance;
  }
  for (const s of (target && target.samplers) || []) {
    const steps = s === "distilled" && target.distilled_steps ? ` (steps ${target.distilled_steps.join(", ")})` : "";
    $("#f-sampler").appendChild(el("option", { value: s }, s + steps));
  }
  for (const p of (target && target.precisions) || []) {
    $("#f-precision").appendChild(el("option", { value: p }, p));
  }
  if (app.models.default_precision) {
    $("#f-precision").querySelector('option[value=""]').textContent = `default (${app.models.default_precision})`;
  }
  for (const m of app.models.modes || []) {
    $("#f-mode").appendChild(el("option", { value: m }, m));
    $("#g-mode").appendChild(el("option", { value: m }, m));
  }
  if (!app.hasDraft) {
    $("#cmp-submit").disabled = true;
    $("#cmp-error").hidden = false;
    $("#cmp-error").textContent = "The server runs no draft model, so there is no speculative side to compare.";
  }
  $("#gen-form").addEventListener("submit", onGenerate);
  const token = $("#token");
  token.value = sessionStorage.getItem("marspec-token") || "";
  $("#token-box").hidden = token.value === "";
  if (token.value) api.setToken(token.value); // the cookie as well, for images and event streams
  token.addEventListener("change", () => { api.setToken(token.value.trim()); gallery.loadKeys(); gallery.load(); });
  api.onUnauthorized = () => { $("#token-box").hidden = false; };
  gallery.init();
  compare.init();
  detail.init();
  document.body.dataset.ready = "true";
}

async function onGenerate(ev) {
  ev.preventDefault();
  const form = $("#gen-form"), box = $("#gen-error"), button = $("#gen-submit");
  clearError(form, box);
  const req = collect(form);
  req.class = classPicker.selected();
  button.disabled = true;
  let gen;
  try {
    gen = await api.create(req);
  } catch (e) {
    showError(form, box, e);
    button.disabled = false;
    return;
  }
  button.disabled = false;
  gallery.load();
  watch(gen);
}

// watch shows a job's progress and its images as they arrive.
async function watch(gen) {
  const live = $("#live"), label = $("#live-label"), bar = $("#live-progress"), strip = $("#live-images");
  live.hidden = false;
  live.dataset.job = gen.id;
  live.dataset.status = gen.status;
  strip.textContent = "";
  const seen = new Set();
  const show = (p, status) => {
    bar.value = p.fraction || 0;
    label.textContent = `Job ${gen.id.slice(0, 8)} (seed ${gen.settings.seed}): ${status}, ` + fmtProgress(p);
  };
  const addImage = (im) => {
    if (seen.has(im.id)) return;
    seen.add(im.id);
    strip.appendChild(pictures.img({ src: im.url, alt: `${im.class_name}, image ${im.index + 1}` }, 56));
  };
  let status = gen.status;
  show(gen.progress, status);
  try {
    const final = await api.follow(gen, (type, data) => {
      if (data.generation) {
        status = data.generation.status;
        show(data.generation.progress, status);
        data.generation.images.forEach(addImage);
      }
      if (type === "progress") show(data.progress, status === "queued" ? "running" : status);
      if (type === "image") addImage(data.image);
    });
    live.dataset.status = final.status;
    if (final.error) label.textContent += " — " + final.error;
    if (final.status === "succeeded") label.textContent += ` in ${fmtSeconds(final.seconds)}`;
  } catch (e) {
    label.textContent = "Lost the job: " + e.message;
  }
  gallery.load();
}

document.addEventListener("DOMContentLoaded", start);
