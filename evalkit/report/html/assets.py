"""The report pages' shared stylesheet and their one constant script (no side of the trust boundary:
reads rows only, never torch).

``SCRIPT`` sorts tables with class ``sortable`` on a header click, or at load from the URL hash
(``#sort=[table.]key:asc|desc``, several joined by ``,``), and filters the rows of the table a
``div.filters`` names (``data-table``): its search box hides rows whose text lacks any of the words
typed, each ``select[data-filter=NAME]`` keeps rows whose ``data-NAME`` (space-separated values)
holds the value chosen. Filters live in the hash too (``#q=softmax&verdict=correct``), so a filtered
view can be shared. The script is a constant: it reads the page, never data spliced into code.
"""

from __future__ import annotations

from evalkit.records import VERDICT_INFO

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#111827;background:#fff;
overflow-wrap:break-word}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #e5e7eb}
table{border-collapse:collapse;margin:6px 0 12px}th,td{border:1px solid #e5e7eb;padding:3px 8px;text-align:left;
vertical-align:top}th{background:#f3f4f6}
table.sortable td{white-space:nowrap}table.sortable td.reason{white-space:normal}td.num{text-align:right;font-variant-numeric:tabular-nums}
table.sortable th[data-key]{cursor:pointer}table.sortable th[data-key]:after{content:" \\2195";color:#9ca3af}
th[aria-sort=ascending]:after{content:" \\2191"!important;color:#111827!important}
th[aria-sort=descending]:after{content:" \\2193"!important;color:#111827!important}
tfoot td{font-weight:600;background:#f9fafb}.muted{color:#6b7280}.small{font-size:12px}
.badge{display:inline-block;padding:1px 7px;border-radius:9px;font-size:12px;font-weight:600;color:#fff;
white-space:nowrap}.v-unknown{background:#374151}
.flag{display:inline-block;padding:0 5px;margin:0 2px;border-radius:4px;background:#fef3c7;color:#92400e;font-size:11px}
.chart{border:1px solid #e5e7eb;margin:4px 12px 4px 0;background:#fff}.chart text{font-size:11px;fill:#374151}
.chart .title{font-size:13px;font-weight:600}.chart .axis{stroke:#6b7280}.chart .grid{stroke:#f1f5f9}
.chart .one{stroke:#9ca3af;stroke-dasharray:4 3}
pre{background:#f9fafb;border:1px solid #e5e7eb;padding:8px;overflow:auto;max-height:420px;white-space:pre-wrap}
table.code{border:1px solid #e5e7eb;font:12px/1.4 ui-monospace,Menlo,Consolas,monospace;width:100%}
table.code td{border:0;padding:0 8px;white-space:pre}table.code td.ln{color:#9ca3af;text-align:right;
user-select:none;width:1%}table.code tr.hl{background:#fee2e2}table.code tr.hl td.ln{color:#b91c1c;font-weight:700}
tr.chosen{background:#ecfdf5}td.reason{max-width:520px;min-width:240px}a{color:#1d4ed8}
.filters{display:flex;gap:8px;align-items:center;flex-wrap:wrap;margin:6px 0;padding:6px 8px;background:#f9fafb;
border:1px solid #e5e7eb;border-radius:6px}.filters input[type=search]{min-width:320px;padding:3px 6px;font:inherit}
.filters select{padding:2px 4px;font:inherit}.filters .count{color:#6b7280;font-size:12px}
table.sortable td.cmp{white-space:normal;min-width:150px}
td.reason,th.id{overflow-wrap:anywhere}table td.id{white-space:normal;overflow-wrap:anywhere;min-width:8em}
table.sortable td.flags,table.sortable td.best{white-space:normal}td.best{min-width:8em}.na{color:#6b7280;font-style:italic}.warn{background:#fef3c7}td.changed{background:#fff7ed}
details.trace summary{cursor:pointer;color:#1d4ed8}.answer{max-height:560px}
"""
# Each verdict's badge, in its colour (``records.VERDICT_INFO``).
CSS += "".join(f".v-{verdict.value}{{background:{info.colour}}}" for verdict, info in VERDICT_INFO.items()) + "\n"



SCRIPT = """
(function () {
  "use strict";
  function readHash() {
    var out = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (part) {
      var eq = part.indexOf("=");
      if (eq > 0) { out[part.slice(0, eq)] = decodeURIComponent(part.slice(eq + 1).replace(/\\+/g, " ")); }
    });
    return out;
  }
  function writeHash(changes) {
    var now = readHash(), key, parts = [];
    for (key in changes) { if (changes.hasOwnProperty(key)) { now[key] = changes[key]; } }
    for (key in now) { if (now.hasOwnProperty(key) && now[key] !== "") { parts.push(key + "=" + encodeURIComponent(now[key])); } }
    try { history.replaceState(null, "", parts.length ? "#" + parts.join("&") : location.pathname); } catch (e) { /* file:// */ }
  }
  function cellValue(row, idx) {
    var cell = row.cells[idx];
    if (!cell) { return ""; }
    var v = cell.getAttribute("data-v");
    return v === null ? cell.textContent.trim() : v;
  }
  function sortTable(table, key, dir) {
    var heads = table.tHead.rows[0].cells, idx = -1, i;
    for (i = 0; i < heads.length; i++) { if (heads[i].getAttribute("data-key") === key) { idx = i; } }
    if (idx < 0) { return false; }
    var numeric = heads[idx].getAttribute("data-type") === "num";
    var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellValue(a, idx), y = cellValue(b, idx);
      if (x === "" || y === "") { return (x === "") - (y === ""); }
      var c = numeric ? parseFloat(x) - parseFloat(y) : x.localeCompare(y);
      return dir === "desc" ? -c : c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    for (i = 0; i < heads.length; i++) { heads[i].removeAttribute("aria-sort"); }
    heads[idx].setAttribute("aria-sort", dir === "desc" ? "descending" : "ascending");
    table.setAttribute("data-sorted", key + ":" + dir);
    return true;
  }
  function onHeaderClick(table, th) {
    var now = th.getAttribute("aria-sort");
    var dir = now === "descending" ? "asc" : now === "ascending" ? "desc"
      : (th.getAttribute("data-type") === "num" ? "desc" : "asc");
    var key = th.getAttribute("data-key");
    sortTable(table, key, dir);
    writeHash({sort: table.id + "." + key + ":" + dir});
  }
  function applySort(spec) {
    spec.split(",").forEach(function (one) {
      var parts = one.split(":"), target = parts[0], dir = parts[1] === "asc" ? "asc" : "desc";
      var dot = target.indexOf("."), id = dot >= 0 ? target.slice(0, dot) : "", key = target.slice(dot + 1);
      document.querySelectorAll("table.sortable").forEach(function (t) {
        if (!id || t.id === id) { sortTable(t, key, dir); }
      });
    });
  }
  function filterRows(box) {
    var table = document.getElementById(box.getAttribute("data-table"));
    if (!table) { return; }
    var search = box.querySelector("input[type=search]");
    var words = search ? search.value.toLowerCase().split(/\\s+/).filter(Boolean) : [];
    var selects = Array.prototype.slice.call(box.querySelectorAll("select[data-filter]"));
    var rows = Array.prototype.slice.call(table.tBodies[0].rows), shown = 0;
    rows.forEach(function (row) {
      var text = row.textContent.toLowerCase();
      var keep = words.every(function (w) { return text.indexOf(w) >= 0; }) && selects.every(function (s) {
        var values = (row.getAttribute("data-" + s.getAttribute("data-filter")) || "").split(" ");
        return !s.value || values.indexOf(s.value) >= 0;
      });
      row.hidden = !keep;
      shown += keep ? 1 : 0;
    });
    var count = box.querySelector(".count");
    if (count) { count.textContent = shown + " of " + rows.length + " shown"; }
  }
  function onFilterInput(box) {
    var changes = {}, search = box.querySelector("input[type=search]");
    if (search) { changes.q = search.value; }
    box.querySelectorAll("select[data-filter]").forEach(function (s) { changes[s.getAttribute("data-filter")] = s.value; });
    filterRows(box);
    writeHash(changes);
  }
  function applyFilters(hash) {
    document.querySelectorAll("div.filters").forEach(function (box) {
      var search = box.querySelector("input[type=search]");
      if (search && hash.q !== undefined) { search.value = hash.q; }
      box.querySelectorAll("select[data-filter]").forEach(function (s) {
        var want = hash[s.getAttribute("data-filter")];
        if (Array.prototype.some.call(s.options, function (o) { return o.value === want; })) { s.value = want; }
      });
      filterRows(box);
    });
  }
  function applyHash() {
    var hash = readHash();
    if (hash.sort) { applySort(hash.sort); }
    applyFilters(hash);
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      if (th.getAttribute("data-key")) { th.addEventListener("click", function () { onHeaderClick(table, th); }); }
    });
  });
  document.querySelectorAll("div.filters").forEach(function (box) {
    box.querySelectorAll("input, select").forEach(function (el) {
      el.addEventListener("input", function () { onFilterInput(box); });
      el.addEventListener("change", function () { onFilterInput(box); });
    });
  });
  window.evalkitSort = sortTable;
  applyHash();
  window.addEventListener("hashchange", applyHash);
})();
"""
