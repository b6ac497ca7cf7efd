// Live pages: every element with data-live="MS" is refreshed from the server every MS milliseconds
// (at least 2 s apart): the page is fetched again with X-Ledger-Live: 1, which returns only that part.
(function () {
  "use strict";
  function follow(box) {
    var every = Math.max(parseInt(box.getAttribute("data-live"), 10) || 2000, 2000);
    var last = box.innerHTML;
    function tick() {
      if (document.hidden) { return; }
      fetch(window.location.href, {headers: {"X-Ledger-Live": "1"}, credentials: "same-origin"})
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) {
          if (html !== null && html !== last) { box.innerHTML = html; last = html; }
        })
        .catch(function () { /* the server may be restarting: try again at the next tick */ });
    }
    window.setInterval(tick, every);
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-live]").forEach(follow);
  });
})();

// The views' small scripts: the time zone form (the browser's own zone named, sent with "my time zone"; a choice
// sent as soon as it is made), and the follow of a running try's log (what was appended is fetched every 2 s and
// added at the end, until the try ends).
(function () {
  "use strict";

  function zoneForm() {
    var field = document.getElementById("tz-browser"), mine = document.getElementById("tz-mine");
    var select = document.getElementById("tz-zone");
    var zone = "";
    try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { /* none said */ }
    if (field) { field.value = zone; }
    if (mine && zone) { mine.textContent = "my time zone (" + zone + ")"; }
    if (select) { select.addEventListener("change", function () { select.form.submit(); }); }
  }

  // A try's log file is rewritten when the try ends (the secrets it read become ***): the last page of the
  // file as it is then replaces what was followed.
  function settle(pre) {
    fetch(window.location.pathname, {credentials: "same-origin"})
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html === null) { return; }
        var page = new DOMParser().parseFromString(html, "text/html");
        var final = page.getElementById("log");
        if (final && final.innerHTML !== pre.innerHTML) { pre.innerHTML = final.innerHTML; }
        ["log-end", "log-size"].forEach(function (id) {
          var now = page.getElementById(id), shown = document.getElementById(id);
          if (now && shown) { shown.textContent = now.textContent; }
        });
      })
      .catch(function () { /* what was followed stays */ });
  }

  function follow(pre) {
    var next = pre.getAttribute("data-follow");
    var base = window.location.pathname;
    var busy = false;
    var timer = window.setInterval(function () {
      if (busy || document.hidden) { return; }
      busy = true;
      fetch(base + "?after=" + encodeURIComponent(next), {headers: {"X-Ledger-Live": "1"}, credentials: "same-origin"})
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) {
          busy = false;
          if (html === null) { return; }
          var box = document.createElement("template");
          box.innerHTML = html;  // rendered and escaped by the server (log_more.html)
          var part = box.content.firstElementChild;
          if (!part) { return; }
          next = part.getAttribute("data-next");
          var atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
          while (part.firstChild) { pre.appendChild(part.firstChild); }
          pre.setAttribute("data-follow", next);
          ["log-end", "log-size"].forEach(function (id) {
            var shown = document.getElementById(id);
            if (shown) { shown.textContent = next; }
          });
          if (atBottom) { pre.scrollTop = pre.scrollHeight; }
          if (part.getAttribute("data-done") === "1") {
            window.clearInterval(timer);
            pre.removeAttribute("data-follow");
            var note = document.querySelector(".following");
            if (note) { note.textContent = "the try has ended"; }
            settle(pre);
          }
        })
        .catch(function () { busy = false; });
    }, 2000);
  }

  document.addEventListener("DOMContentLoaded", function () {
    zoneForm();
    document.querySelectorAll("pre.log").forEach(function (pre) { pre.scrollTop = pre.scrollHeight; });
    document.querySelectorAll("pre[data-follow]").forEach(follow);
  });
})();
