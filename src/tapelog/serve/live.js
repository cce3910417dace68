(function () {
  "use strict";
  var config = JSON.parse(document.getElementById("tapelog-live").textContent);
  var timeline = document.querySelector("ol.timeline");
  if (!window.EventSource || !timeline) { return; }
  function steps() {
    var turn = timeline.lastElementChild;
    return turn && turn.querySelector(":scope > ol.steps");
  }
  function openStep() {
    var list = steps(), last = list && list.lastElementChild;
    return last && last.classList.contains("step") ? last : null;
  }
  function apply(op) {
    var step = openStep(), target = null, node = null;
    if (op.op === "turn") { target = timeline; }
    else if (op.op === "step" || (op.op === "item" && op.to === "turn")) { target = steps(); }
    else if (op.op === "item") { target = step && step.querySelector(":scope > ul.items"); }
    else if (op.op === "usage") { node = step && step.querySelector(".usage"); }
    else if (op.op === "end") {
      node = timeline.lastElementChild && timeline.lastElementChild.querySelector(".reason");
    }
    if (target) { target.insertAdjacentHTML("beforeend", op.html); }
    if (node && op.op === "usage") { node.textContent = op.text; }
    if (node && op.op === "end") {
      node.textContent = op.reason;
      node.className = "reason reason-" + op.reason;
    }
  }
  var source = new EventSource(config.events);
  source.addEventListener("update", function (message) {
    var update = JSON.parse(message.data);
    update.ops.forEach(apply);
    Object.keys(update.totals).forEach(function (key) {
      document.querySelectorAll('[data-total="' + key + '"]').forEach(function (node) {
        node.textContent = update.totals[key];
      });
    });
    var efficiency = document.querySelector('[data-total="efficiency"]');
    if (update.stale && efficiency) {
      efficiency.parentNode.querySelector(".name").textContent = "cache efficiency (at page load)";
    }
    document.querySelectorAll("[data-status]").forEach(function (node) {
      node.textContent = update.status;
      node.className = "status status-" + update.status;
    });
    document.body.setAttribute("data-seq", String(update.seq));
  });
  source.addEventListener("gone", function (message) {
    source.close();
    document.querySelectorAll(".live-note").forEach(function (node) {
      node.textContent = JSON.parse(message.data).message;
    });
  });
  source.addEventListener("open", function () { document.body.setAttribute("data-live", "open"); });
})();
