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
