// dom.js: small helpers shared by the gallery's scripts: building elements (text only, never
// HTML from the server), reading form fields into request values, and showing server errors
// next to the field they name.
"use strict";

function $(sel, root) { return (root || document).querySelector(sel); }

// pictures says how big an image is shown. Tiny ones (Fashion-MNIST's 28x28 grey) are scaled
// up to a fixed size with crisp pixels; larger ones (MAR's 256x256 colour) keep their natural
// size, shrunk only to fit a narrow screen.
const pictures = {
  natural: null, // [height, width] of the target's images, from GET /v1/models

  setSize(image) { this.natural = image ? [image[0], image[1]] : null; },

  // fit is the size attributes and class of an image of size [h, w] where tiny images are
  // drawn `small` px wide.
  fit(small, [h, w]) {
    if (Math.max(h, w) > small) return { width: w, height: h, class: "natural" };
    return { width: small, height: small, class: "scaled" };
  },

  // img makes an <img> sized as the target pack's images are, corrected once it has loaded:
  // a data folder may hold images an earlier pack made.
  img(attrs, small) {
    const node = el("img", { ...attrs, ...this.fit(small, this.natural || [0, 0]) });
    node.addEventListener("load", () => {
      const f = this.fit(small, [node.naturalHeight, node.naturalWidth]);
      Object.assign(node, { width: f.width, height: f.height, className: f.class });
    });
    return node;
  },
};

// el builds an element: el("p", {class: "x"}, "text", child).
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "dataset") Object.assign(node.dataset, v);
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    node.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
  return node;
}

// fieldValue reads one input for a request: undefined when empty (the server's default), a
// number when it reads as one, otherwise the text as typed so that the server's validation
// names the field and says what is allowed (the page does not second-guess the server).
function fieldValue(input) {
  const raw = input.value.trim();
  if (raw === "") return undefined;
  const kind = input.dataset.kind || (input.tagName === "SELECT" ? "text" : "number");
  if (kind === "text") return raw;
  if (kind === "gamma" && raw.toLowerCase() === "auto") return "auto";
  const n = Number(raw);
  return Number.isFinite(n) ? n : raw;
}

// collect reads the inputs of root that carry data-field into a request object.
function collect(root) {
  const req = {};
  for (const input of root.querySelectorAll("input[data-field], select[data-field]")) {
    const v = fieldValue(input);
    if (v !== undefined) req[input.dataset.field] = v;
  }
  return req;
}

function clearError(form, box) {
  box.hidden = true;
  box.textContent = "";
  for (const n of form.querySelectorAll("[aria-invalid]")) n.removeAttribute("aria-invalid");
}

// showError puts the server's message in box and marks the field it names (opening the
// advanced options when the field is there).
function showError(form, box, err) {
  box.textContent = "";
  const field = err.field || "";
  if (field) box.appendChild(el("strong", { class: "field" }, field));
  box.appendChild(el("span", {}, err.message));
  box.dataset.field = field;
  box.hidden = false;
  if (!field) return;
  const target = form.querySelector(`[data-field="${CSS.escape(field)}"]`);
  if (!target) return;
  target.setAttribute("aria-invalid", "true");
  const details = target.closest("details");
  if (details) details.open = true;
  const focusable = target.matches("input, select") ? target : target.querySelector("input, select");
  if (focusable) focusable.focus();
}

function fmtSeconds(s) {
  if (s === undefined || s === null) return "–";
  return s < 10 ? s.toFixed(2) + " s" : s.toFixed(1) + " s";
}

// fmtDuration writes seconds as the largest unit that fits: "45 s", "12 min", "3 h", "2 d".
function fmtDuration(s) {
  if (s < 90) return Math.round(s) + " s";
  if (s < 5400) return Math.round(s / 60) + " min";
  if (s < 172800) return Math.round(s / 3600) + " h";
  return Math.round(s / 86400) + " d";
}

// fmtProgress writes a job's progress: images and tokens, and while it runs the rate and the
// time left ("2/4 images, 1200/2048 tokens · 31.5 tokens/s, about 26 s left").
function fmtProgress(p) {
  let s = `${p.images_done}/${p.images_total} images, ${p.tokens_done}/${p.tokens_total} tokens`;
  if (typeof p.tokens_per_second === "number") {
    const r = p.tokens_per_second;
    s += ` · ${r >= 100 ? Math.round(r) : Number(r.toPrecision(3))} tokens/s`;
    if (typeof p.seconds_left === "number") s += `, about ${fmtDuration(p.seconds_left)} left`;
  }
  return s;
}

function fmtAlpha(a) { return a === undefined || a === null ? "–" : a.toFixed(3); }
