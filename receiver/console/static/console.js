// jobhook console: the only script of the pages (CSP: script-src 'self').
// 1. Each <time datetime> is shown in the browser's time zone, with UTC in its title.
// 2. On the Live page, completions from /ui/events (the session cookie authenticates it)
//    are added at the top of the table; every value goes in as text, never as HTML.
// 3. On the jobs list, the same list is fetched again every few seconds; new and changed jobs
//    are announced in a bar ("2 new, 1 changed — Show") that moves nothing, and "Show" swaps in
//    the fresh rows (marked) where the old ones were, so the reader keeps their place.
"use strict";

(function () {
  function two(n) { return (n < 10 ? "0" : "") + n; }

  // 2026-11-25 16:19:42 in the browser's zone: short, sortable, the same in every locale.
  function localText(d) {
    return d.getFullYear() + "-" + two(d.getMonth() + 1) + "-" + two(d.getDate()) + " " +
      two(d.getHours()) + ":" + two(d.getMinutes()) + ":" + two(d.getSeconds());
  }

  function showTime(el) {
    var when = new Date(el.getAttribute("datetime"));
    if (isNaN(when.getTime())) { return; }
    el.title = when.toISOString().replace(".000Z", "Z").replace("T", " ") + " (UTC)";
    el.textContent = localText(when);
  }

  function cell(row, text) {
    var td = document.createElement("td");
    td.textContent = text;
    row.appendChild(td);
    return td;
  }

  function completionRow(data) {
    var row = document.createElement("tr");
    row.className = "fresh";
    var td = document.createElement("td");
    td.className = "when";
    var time = document.createElement("time");
    time.setAttribute("datetime", data.created_at || "");
    showTime(time);
    td.appendChild(time);
    row.appendChild(td);
    cell(row, data.source);
    var job = cell(row, "");
    job.className = "id";
    var link = document.createElement("a");
    link.href = "/ui/jobs/" + encodeURIComponent(data.source) + "/" + encodeURIComponent(data.job_id);
    link.textContent = data.job_id;
    job.appendChild(link);
    var state = cell(row, "");
    var badge = document.createElement("span");
    badge.className = "state state-" + String(data.state).replace(/[^a-z_]/g, "");
    badge.textContent = data.state;
    state.appendChild(badge);
    cell(row, data.provider_status);
    return row;
  }

  function live(status) {
    var body = document.querySelector("#live tbody");
    var source = new EventSource(status.getAttribute("data-live-src"));
    source.addEventListener("open", function () { status.textContent = "Live."; });
    source.addEventListener("error", function () { status.textContent = "Reconnecting…"; });
    source.addEventListener("completion", function (event) {
      var data = JSON.parse(event.data);
      var none = body.querySelector("tr.none");
      if (none) { none.remove(); }
      body.insertBefore(completionRow(data), body.firstChild);
      while (body.rows.length > 200) { body.deleteRow(body.rows.length - 1); }
    });
  }

  var POLL_MS = 5000;

  function seen(body) {
    var rows = {};
    body.querySelectorAll("tr[data-key]").forEach(function (row) {
      rows[row.getAttribute("data-key")] = row.getAttribute("data-seen");
    });
    return rows;
  }

  function watch(table) {
    var bar = document.getElementById("news");
    var text = document.getElementById("news-text");
    var show = document.getElementById("news-show");
    var newsToo = table.getAttribute("data-watch") === "news";
    var fresh = null;

    function compare(html) {
      var doc = new DOMParser().parseFromString(html, "text/html");
      var body = doc.querySelector("table.jobs tbody");
      if (!body) { return; }
      var now = seen(table.tBodies[0]);
      var added = 0, changed = 0;
      body.querySelectorAll("tr[data-key]").forEach(function (row) {
        var key = row.getAttribute("data-key");
        if (!(key in now)) {
          if (newsToo) { added += 1; row.className = "fresh"; }
        } else if (now[key] !== row.getAttribute("data-seen")) {
          changed += 1;
          row.className = "fresh";
        }
      });
      if (!added && !changed) { bar.hidden = true; fresh = null; return; }
      fresh = body;
      var parts = [];
      if (added) { parts.push(added + " new"); }
      if (changed) { parts.push(changed + " changed"); }
      text.textContent = parts.join(", ") + " since the page was loaded.";
      bar.hidden = false;
    }

    function poll() {
      if (document.hidden) { return; }
      fetch(window.location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then(function (r) { return r.ok && !r.redirected ? r.text() : null; })
        .then(function (html) { if (html !== null) { compare(html); } })
        .catch(function () { /* the next poll tries again */ });
    }

    show.addEventListener("click", function () {
      if (!fresh) { return; }
      var old = table.tBodies[0];
      // The first row on screen stays where it is: rows added above it push the page down.
      var anchor = null, top = 0;
      old.querySelectorAll("tr[data-key]").forEach(function (row) {
        var r = row.getBoundingClientRect();
        if (anchor === null && r.bottom > 0) { anchor = row.getAttribute("data-key"); top = r.top; }
      });
      var body = document.importNode(fresh, true);
      old.parentNode.replaceChild(body, old);
      if (anchor !== null) {
        var same = Array.prototype.find.call(body.rows, function (row) {
          return row.getAttribute("data-key") === anchor;
        });
        if (same) { window.scrollBy(0, same.getBoundingClientRect().top - top); }
      }
      body.querySelectorAll("time[datetime]").forEach(showTime);
      bar.hidden = true;
      fresh = null;
    });
    window.setInterval(poll, POLL_MS);
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("time[datetime]").forEach(showTime);
    var status = document.getElementById("live-status");
    if (status) { live(status); }
    var jobs = document.querySelector("table.jobs[data-watch]");
    if (jobs && document.getElementById("news")) { watch(jobs); }
  });
})();
