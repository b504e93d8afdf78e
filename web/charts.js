// charts.js: the acceptance heatmap over an image (paper Fig. 11) and the acceptance rate per
// AR step (paper Fig. 9), drawn on canvases from the counts the server reports. Nothing here
// invents data: a position or step with no verified draft is drawn as "no data".
"use strict";

const charts = {
  // rates turns accepted/rejected counts into rates; null where nothing was verified.
  rates(accepted, rejected) {
    return accepted.map((a, i) => {
      const n = a + (rejected[i] || 0);
      return n > 0 ? a / n : null;
    });
  },

  // sumStats adds the counts of several images' statistics (one job's images).
  sumStats(list) {
    const first = list[0];
    const zero = (arr) => arr.map(() => 0);
    const out = {
      accepted_at_step: zero(first.accepted_at_step), rejected_at_step: zero(first.rejected_at_step),
      accepted_at_pos: zero(first.accepted_at_pos), rejected_at_pos: zero(first.rejected_at_pos),
      grid_height: first.grid_height, grid_width: first.grid_width, drafted: 0, accepted: 0,
    };
    for (const s of list) {
      for (const k of ["accepted_at_step", "rejected_at_step", "accepted_at_pos", "rejected_at_pos"]) {
        s[k].forEach((v, i) => { out[k][i] += v; });
      }
      out.drafted += s.drafted;
      out.accepted += s.accepted;
    }
    return out;
  },

  // color maps a rate in [0, 1] from dark blue (rejected) to yellow (accepted), as the CLI's
  // --heatmap PNG does (render/heatmap.go), so both read the same way.
  color(v) {
    v = Math.max(0, Math.min(1, v));
    return [Math.round(30 + 225 * v), Math.round(30 + 200 * v), Math.round(120 * (1 - v))];
  },

  hatch(ctx, x, y, w, h) {
    ctx.save();
    ctx.fillStyle = "rgba(128,128,128,0.55)";
    ctx.fillRect(x, y, w, h);
    ctx.strokeStyle = "rgba(255,255,255,0.5)";
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (let d = -h; d < w; d += 6) {
      ctx.moveTo(x + Math.max(0, d), y + Math.max(0, -d));
      ctx.lineTo(x + Math.min(w, d + h), y + Math.min(h, w - d));
    }
    ctx.stroke();
    ctx.restore();
  },

  // heatmap draws img scaled to the canvas and, when stats exist and overlay is on, one cell
  // per grid position coloured by its acceptance rate. It returns how many cells had data.
  heatmap(canvas, img, stats, overlay, opacity) {
    const ctx = canvas.getContext("2d");
    const W = canvas.width, H = canvas.height;
    // crisp pixels for tiny images scaled up, smooth ones for full-size images
    ctx.imageSmoothingEnabled = Boolean(img && img.naturalWidth * 2 > W);
    ctx.fillStyle = "#000";
    ctx.fillRect(0, 0, W, H);
    if (img && img.naturalWidth > 0) ctx.drawImage(img, 0, 0, W, H);
    canvas.dataset.cells = "0";
    canvas.dataset.rated = "0";
    if (!stats || !overlay) return 0;
    const rows = stats.grid_height, cols = stats.grid_width;
    const rates = this.rates(stats.accepted_at_pos, stats.rejected_at_pos);
    const cw = W / cols, ch = H / rows;
    let rated = 0;
    ctx.font = Math.max(9, Math.floor(Math.min(cw, ch) / 3.2)) + "px system-ui, sans-serif";
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    for (let p = 0; p < rows * cols; p++) {
      const x = (p % cols) * cw, y = Math.floor(p / cols) * ch;
      const r = rates[p];
      if (r === null) {
        ctx.globalAlpha = opacity;
        this.hatch(ctx, x, y, cw, ch);
        ctx.globalAlpha = 1;
        continue;
      }
      rated++;
      const [cr, cg, cb] = this.color(r);
      ctx.fillStyle = `rgba(${cr},${cg},${cb},${opacity})`;
      ctx.fillRect(x, y, cw, ch);
      // a number only where it is a rate over several drafts (a job's images summed); one
      // image has one verdict per position, which the colour already shows
      const n = stats.accepted_at_pos[p] + stats.rejected_at_pos[p];
      if (n > 1 && cw >= 30 && opacity > 0.25) {
        ctx.fillStyle = r > 0.55 ? "#111" : "#fff";
        ctx.fillText(Math.round(r * 100) + "%", x + cw / 2, y + ch / 2);
      }
    }
    ctx.strokeStyle = "rgba(255,255,255,0.25)";
    for (let c = 1; c < cols; c++) { ctx.beginPath(); ctx.moveTo(c * cw, 0); ctx.lineTo(c * cw, H); ctx.stroke(); }
    for (let r = 1; r < rows; r++) { ctx.beginPath(); ctx.moveTo(0, r * ch); ctx.lineTo(W, r * ch); ctx.stroke(); }
    canvas.dataset.cells = String(rows * cols);
    canvas.dataset.rated = String(rated);
    return rated;
  },

  // legend draws the colour scale from 0 % to 100 % accepted and the "no draft verified" swatch.
  legend(canvas) {
    const ctx = canvas.getContext("2d");
    const W = canvas.width;
    ctx.clearRect(0, 0, W, canvas.height);
    const barW = W - 80, barH = 14;
    for (let x = 0; x < barW; x++) {
      const [r, g, b] = this.color(x / (barW - 1));
      ctx.fillStyle = `rgb(${r},${g},${b})`;
      ctx.fillRect(x, 0, 1, barH);
    }
    ctx.fillStyle = getComputedStyle(canvas).color || "#222";
    ctx.font = "11px system-ui, sans-serif";
    ctx.textBaseline = "top";
    ctx.textAlign = "left";
    ctx.fillText("0 %", 0, barH + 3);
    ctx.textAlign = "center";
    ctx.fillText("accepted", barW / 2, barH + 3);
    ctx.textAlign = "right";
    ctx.fillText("100 %", barW, barH + 3);
    this.hatch(ctx, barW + 14, 0, 20, barH);
    ctx.fillStyle = getComputedStyle(canvas).color || "#222";
    ctx.textAlign = "left";
    ctx.fillText("no draft", barW + 8, barH + 3);
    ctx.fillText("verified", barW + 8, barH + 16);
  },

  // alphaChart draws one bar per AR step: accepted over verified drafts at that step, with the
  // overall rate as a dashed line. It returns the number of steps with data.
  alphaChart(canvas, stats) {
    const ctx = canvas.getContext("2d");
    const W = canvas.width, H = canvas.height;
    const ink = getComputedStyle(canvas).color || "#222";
    ctx.clearRect(0, 0, W, H);
    canvas.dataset.steps = "0";
    if (!stats) return 0;
    const rates = this.rates(stats.accepted_at_step, stats.rejected_at_step);
    const left = 36, right = 8, top = 10, bottom = 30;
    const pw = W - left - right, ph = H - top - bottom;
    ctx.strokeStyle = ink;
    ctx.fillStyle = ink;
    ctx.font = "11px system-ui, sans-serif";
    ctx.lineWidth = 1;
    ctx.beginPath();
    ctx.moveTo(left, top); ctx.lineTo(left, top + ph); ctx.lineTo(left + pw, top + ph);
    ctx.stroke();
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (const t of [0, 0.25, 0.5, 0.75, 1]) {
      const y = top + ph * (1 - t);
      ctx.fillText(t.toFixed(2), left - 4, y);
      ctx.globalAlpha = 0.15;
      ctx.beginPath(); ctx.moveTo(left, y); ctx.lineTo(left + pw, y); ctx.stroke();
      ctx.globalAlpha = 1;
    }
    const n = rates.length;
    const bw = pw / n;
    let withData = 0;
    for (let i = 0; i < n; i++) {
      const r = rates[i];
      if (r === null) continue;
      withData++;
      const [cr, cg, cb] = this.color(r);
      ctx.fillStyle = `rgb(${cr},${cg},${cb})`;
      const h = Math.max(3, ph * r); // a rate of 0 stays visible, apart from "no data"
      ctx.fillRect(left + i * bw + bw * 0.1, top + ph - h, Math.max(1, bw * 0.8), h);
    }
    ctx.fillStyle = ink;
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    const every = Math.max(1, Math.ceil(n / 10));
    for (let i = 0; i < n; i += every) ctx.fillText(String(i + 1), left + (i + 0.5) * bw, top + ph + 4);
    ctx.fillText("AR step", left + pw / 2, top + ph + 16);
    if (stats.drafted > 0) {
      const a = stats.accepted / stats.drafted;
      const y = top + ph * (1 - a);
      ctx.setLineDash([5, 4]);
      ctx.strokeStyle = ink;
      ctx.beginPath(); ctx.moveTo(left, y); ctx.lineTo(left + pw, y); ctx.stroke();
      ctx.setLineDash([]);
      ctx.textAlign = "right";
      ctx.textBaseline = "bottom";
      ctx.fillText("α = " + a.toFixed(3), left + pw, y - 2);
    }
    canvas.dataset.steps = String(withData);
    return withData;
  },

  // alphaTable is the per-step numbers as an HTML table (the chart's text alternative).
  alphaTable(stats) {
    const t = document.createElement("table");
    t.innerHTML = "<caption>Drafts verified per AR step</caption><thead><tr><th scope=col>Step</th>" +
      "<th scope=col>Accepted</th><th scope=col>Rejected</th><th scope=col>Rate</th></tr></thead>";
    const body = document.createElement("tbody");
    stats.accepted_at_step.forEach((a, i) => {
      const r = stats.rejected_at_step[i];
      if (a + r === 0) return;
      const tr = document.createElement("tr");
      for (const v of [i + 1, a, r, (a / (a + r)).toFixed(2)]) {
        const td = document.createElement("td");
        td.textContent = String(v);
        tr.appendChild(td);
      }
      body.appendChild(tr);
    });
    t.appendChild(body);
    return t;
  },
};
