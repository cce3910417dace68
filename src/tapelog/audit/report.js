(function () {
  "use strict";
  window.addEventListener("error", function (event) {
    document.body.setAttribute("data-error", String(event.message));
  });
  var report = JSON.parse(document.getElementById("tapelog-report").textContent);
  var bars = document.querySelectorAll("svg.chart g.bar");
  if (bars.length !== report.requests.length) {
    throw new Error("the chart has " + bars.length + " bars for " + report.requests.length + " requests");
  }
  function openRequest(index) {
    var section = document.getElementById("req-" + index);
    if (section) { section.open = true; section.scrollIntoView({ block: "start" }); }
  }
  bars.forEach(function (bar) {
    bar.addEventListener("click", function () { openRequest(bar.getAttribute("data-index")); });
  });
  function setAll(open) {
    document.querySelectorAll("details.request").forEach(function (d) { d.open = open; });
  }
  document.getElementById("open-all").addEventListener("click", function () { setAll(true); });
  document.getElementById("close-all").addEventListener("click", function () { setAll(false); });
  if (location.hash.indexOf("#req-") === 0) { openRequest(location.hash.slice(5)); }
  document.body.setAttribute("data-ok", "1");
})();
