/* The course website's one script (tools/build_site.py): draws the stored plotly figures with the local
   plotly.js. Each figure is a <script type="application/json" class="lmlib-plotly-json"> holding the figure the
   notebook stored (mime type application/vnd.plotly.v1+json), next to the empty <div> it draws into. */
(function () {
  "use strict";
  function drawFigures() {
    var nodes = document.querySelectorAll("script.lmlib-plotly-json");
    if (!nodes.length) { return; }
    if (!window.Plotly) {
      throw new Error("lmlib site: plotly.min.js did not load, " + nodes.length + " figure(s) not drawn");
    }
    nodes.forEach(function (node) {
      var target = document.getElementById(node.getAttribute("data-target"));
      var figure = JSON.parse(node.textContent);
      var config = Object.assign({responsive: true, displaylogo: false}, figure.config || {});
      window.Plotly.newPlot(target, figure.data || [], figure.layout || {}, config);
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", drawFigures);
  } else {
    drawFigures();
  }
})();
