// qita plots: draw each figure whose Plotly JSON sits in a <script type="application/json"> next to it.
// Works in the board (plotly.min.js served from the installed plotly package) and in exports (inlined).
(function () {
  "use strict";
  if (typeof window.Plotly === "undefined") { return; }
  var links = document.body.getAttribute("data-export") !== "1";
  document.querySelectorAll(".plot[data-figure]").forEach(function (el) {
    var source = document.getElementById(el.getAttribute("data-figure"));
    if (!source) { return; }
    var fig = JSON.parse(source.textContent);
    var config = { displayModeBar: false, responsive: true };
    window.Plotly.newPlot(el, fig.data, fig.layout, config).then(function () {
      el.setAttribute("data-rendered", "1");
      if (!links) { return; }
      el.on("plotly_click", function (ev) {
        var point = ev && ev.points && ev.points[0];
        if (point && typeof point.customdata === "string") { window.location.href = "/configs/" + point.customdata; }
      });
    });
  });
})();
