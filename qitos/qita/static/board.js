// qita board: small progressive enhancements; every page works without this file.
(function () {
  "use strict";
  // Filter selects on the runs page apply as soon as they change.
  document.querySelectorAll("select[data-autosubmit]").forEach(function (select) {
    select.addEventListener("change", function () {
      if (select.form) { select.form.requestSubmit(); }
    });
  });
  // A run still being written reloads itself while its box is ticked and the tab is visible.
  var live = document.getElementById("live-reload");
  if (live) {
    window.setInterval(function () {
      if (live.checked && document.visibilityState === "visible") { window.location.reload(); }
    }, 5000);
  }
  // The compare button is usable once exactly two runs are ticked.
  var compare = document.getElementById("compare-form");
  if (compare) {
    var boxes = document.querySelectorAll("input[form='compare-form']");
    var button = compare.querySelector("button");
    var update = function () {
      var ticked = Array.prototype.filter.call(boxes, function (b) { return b.checked; }).length;
      button.disabled = ticked !== 2;
      button.textContent = ticked === 2 ? "Compare" : "Compare (" + ticked + "/2)";
    };
    boxes.forEach(function (b) { b.addEventListener("change", update); });
    update();
  }
})();
