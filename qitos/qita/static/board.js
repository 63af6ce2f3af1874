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
  // A configuration line expands to its task runs (fetched as an HTML fragment); without script it is a link.
  document.querySelectorAll("a.expand[data-expand]").forEach(function (link) {
    link.addEventListener("click", function (ev) {
      ev.preventDefault();
      var row = link.closest("tr");
      var next = row.nextElementSibling;
      if (next && next.classList.contains("expansion")) {
        next.remove();
        link.setAttribute("aria-expanded", "false");
        link.textContent = "\u25b8";
        return;
      }
      fetch("/configs/" + encodeURIComponent(link.getAttribute("data-expand")) + "/runs", { credentials: "same-origin" })
        .then(function (r) { if (!r.ok) { throw new Error(r.status); } return r.text(); })
        .then(function (html) {
          var tr = document.createElement("tr");
          tr.className = "expansion";
          var td = document.createElement("td");
          td.colSpan = row.children.length;
          td.innerHTML = html;  // same-origin fragment rendered by the board with autoescaping
          tr.appendChild(td);
          row.after(tr);
          link.setAttribute("aria-expanded", "true");
          link.textContent = "\u25be";
        })
        .catch(function () { window.location.href = link.href; });
    });
  });
  // A compare button is usable once exactly two runs (or configurations) are ticked.
  ["compare-form", "compare-configs"].forEach(function (id) {
    var form = document.getElementById(id);
    if (!form) { return; }
    var boxes = document.querySelectorAll("input[form='" + id + "']");
    var button = form.querySelector("button");
    var label = button.textContent;
    var update = function () {
      var ticked = Array.prototype.filter.call(boxes, function (b) { return b.checked; }).length;
      button.disabled = ticked !== 2;
      button.textContent = ticked === 2 ? label : label + " (" + ticked + "/2)";
    };
    boxes.forEach(function (b) { b.addEventListener("change", update); });
    update();
  });
})();
