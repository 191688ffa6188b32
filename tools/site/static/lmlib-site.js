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
  // An output wider than its column scrolls (tables, attention views): with no control inside, a keyboard user
  // reaches it only if it takes the focus itself (WCAG 2.1.1), so such a region gets tabindex 0 and a name.
  function focusableScrolling() {
    document.querySelectorAll(".cell_output *, .lmlib-deck-output *, .lmlib-w-output").forEach(function (el) {
      if (el.hasAttribute("tabindex") || el.scrollWidth <= el.clientWidth + 1) { return; }
      var overflow = getComputedStyle(el).overflowX;
      if (overflow !== "auto" && overflow !== "scroll") { return; }
      if (el.querySelector("a[href], button:not([disabled]), input:not([disabled]), select:not([disabled]), textarea:not([disabled]), [tabindex]")) { return; }
      el.setAttribute("tabindex", "0");
      el.setAttribute("role", "region");
      el.setAttribute("aria-label", "output (scrolls sideways)");
    });
  }
  function start() {
    try { drawFigures(); } finally { focusableScrolling(); }
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
  window.addEventListener("load", focusableScrolling);
})();
