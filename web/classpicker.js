// classpicker.js: the generate form's class picker, one chip (a checkbox) per class of the
// target pack, with a search box so that MAR's 1,000 classes are as usable as Fashion-MNIST's
// 10. Typing filters by name or id; Enter picks the first match, ArrowDown moves into the
// chips, arrows move between them, Escape goes back to the search box.
"use strict";

const classPicker = {
  shown: 60, // most unpicked matches shown at once: a readable list, and "type to narrow"
  chips: [], // {label, input, name} per class id

  init(names) {
    const list = $("#class-list");
    this.chips = names.map((name, i) => {
      const input = el("input", { type: "checkbox", name: "class", value: i, checked: i === 0 });
      const label = el("label", { class: "chip", title: `class ${i}` }, input, name);
      input.addEventListener("change", () => this.filter());
      input.addEventListener("keydown", (ev) => this.onChipKey(ev, i));
      list.appendChild(label);
      return { label, input, name: name.toLowerCase() };
    });
    const search = $("#class-search");
    search.addEventListener("input", () => this.filter());
    search.addEventListener("keydown", (ev) => this.onSearchKey(ev));
    // Enter in the box picks a class and never submits the form: the submission is the
    // keypress's default, which a keydown's preventDefault does not reach when a key's
    // character comes as its own event (as DevTools input sends it)
    search.addEventListener("keypress", (ev) => { if (ev.key === "Enter") ev.preventDefault(); });
    this.filter();
  },

  // selected is the picked class ids, for the request.
  selected() {
    return this.chips.flatMap((c, i) => (c.input.checked ? [i] : []));
  },

  matches(i, q) {
    return q === "" || this.chips[i].name.includes(q) || String(i) === q;
  },

  // filter shows the picked classes and the first `shown` others that match the search.
  filter() {
    const q = $("#class-search").value.trim().toLowerCase();
    let matched = 0, waiting = 0, others = 0; // waiting: unpicked matches, others: those shown
    this.chips.forEach((c, i) => {
      const match = this.matches(i, q);
      if (match) matched++;
      if (match && !c.input.checked) waiting++;
      const show = c.input.checked || (match && others < this.shown);
      if (show && !c.input.checked) others++;
      c.label.hidden = !show;
    });
    const n = this.chips.length;
    let note = `${this.selected().length} picked · ` + (q === "" ? `${n} classes` : `${matched} of ${n} classes match`);
    if (others < waiting) note += `, ${others} shown: type to narrow`;
    $("#class-count").textContent = note;
    $("#class-list").dataset.visible = String(this.visible().length);
  },

  visible() {
    return this.chips.filter((c) => !c.label.hidden).map((c) => c.input);
  },

  onSearchKey(ev) {
    if (ev.key === "Enter") {
      ev.preventDefault(); // picking a class, not submitting the form
      const q = ev.target.value.trim().toLowerCase();
      const first = this.chips.find((c, i) => !c.input.checked && this.matches(i, q));
      if (first) {
        first.input.checked = true;
        this.filter();
      }
    } else if (ev.key === "ArrowDown") {
      const first = this.visible()[0];
      if (first) { ev.preventDefault(); first.focus(); }
    }
  },

  onChipKey(ev, i) {
    const shown = this.visible();
    const at = shown.indexOf(this.chips[i].input);
    let to = null;
    if (ev.key === "ArrowRight" || ev.key === "ArrowDown") to = shown[at + 1];
    else if (ev.key === "ArrowLeft" || ev.key === "ArrowUp") to = at > 0 ? shown[at - 1] : $("#class-search");
    else if (ev.key === "Escape") to = $("#class-search");
    if (to) { ev.preventDefault(); to.focus(); }
  },
};
