// jobhook console: the only script of the pages (CSP: script-src 'self').
// 1. Each <time datetime> is shown in the browser's time zone, with UTC in its title.
// 2. On the Live page, completions from /ui/events (the session cookie authenticates it)
//    are added at the top of the table; every value goes in as text, never as HTML.
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
      body.insertBefore(completionRow(data), body.firstChild);
      while (body.rows.length > 200) { body.deleteRow(body.rows.length - 1); }
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("time[datetime]").forEach(showTime);
    var status = document.getElementById("live-status");
    if (status) { live(status); }
  });
})();
