// The layout check of tests/console/test_layout.py, run in the page: a list of problems.
// Boxes whose children sit side by side or stacked must not intersect; the content of a panel
// must stay inside it (a child inside a scrolling or clipping box is measured as clipped);
// the page must not scroll sideways.
() => {
  const problems = [];
  const shown = (el) => {
    const r = el.getBoundingClientRect();
    const cs = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && cs.visibility !== "hidden"
      && cs.position !== "absolute" && cs.position !== "fixed";
  };
  const name = (el) => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "")
    + (typeof el.className === "string" && el.className.trim()
       ? "." + el.className.trim().split(/\s+/).join(".") : "");
  const meets = (a, b) => a.left < b.right - 1 && b.left < a.right - 1
    && a.top < b.bottom - 1 && b.top < a.bottom - 1;
  const containers = "body, main, header.top, .top nav, .grid, .charts, .tiles, .buttons, "
    + ".filters, .panel, .chart, .box, main > section, .card, .card form";
  for (const box of document.querySelectorAll(containers)) {
    const kids = [...box.children].filter(shown);
    for (let i = 0; i < kids.length; i++) {
      for (let j = i + 1; j < kids.length; j++) {
        if (meets(kids[i].getBoundingClientRect(), kids[j].getBoundingClientRect())) {
          problems.push(`${name(kids[i])} overlaps ${name(kids[j])} in ${name(box)}`);
        }
      }
    }
  }
  const panels = ".panel, .chart, .tiles > div, .box, .filters, .notice, .problem, "
    + "main, header.top, .card";
  for (const panel of document.querySelectorAll(panels)) {
    if (!shown(panel)) continue;
    const outer = panel.getBoundingClientRect();
    for (const el of panel.querySelectorAll("*")) {
      if (!shown(el) || el.closest("svg") !== null && el.tagName.toLowerCase() !== "svg") continue;
      if (el.closest(".sr, .skip") !== null) continue;
      let r = el.getBoundingClientRect();
      let left = r.left, right = r.right;
      for (let up = el.parentElement; up && up !== panel; up = up.parentElement) {
        if (getComputedStyle(up).overflowX !== "visible") {
          const c = up.getBoundingClientRect();
          left = Math.max(left, c.left); right = Math.min(right, c.right);
        }
      }
      if (right > left && (left < outer.left - 1 || right > outer.right + 1)) {
        problems.push(`${name(el)} spills out of ${name(panel)} (${Math.round(left)}-${Math.round(right)} vs ${Math.round(outer.left)}-${Math.round(outer.right)})`);
      }
      const cs = getComputedStyle(el);
      if (cs.overflowX === "visible" && cs.display !== "inline" && el.clientWidth > 0
          && el.scrollWidth > el.clientWidth + 1 && el.tagName.toLowerCase() !== "table"
          && el.closest(".scroll") === null) {
        problems.push(`${name(el)}'s content is wider than it (${el.scrollWidth} > ${el.clientWidth})`);
      }
    }
  }
  if (document.documentElement.scrollWidth > window.innerWidth) {
    problems.push(`the page scrolls sideways (${document.documentElement.scrollWidth} > ${window.innerWidth})`);
  }
  return [...new Set(problems)];
}
