/* The website's slide decks (tools/lecture.py): reveal.js from the built folder, its speaker-notes plugin ("s" opens
   the speaker view), no transition. The slide on screen is the one keyboard-scrollable region: it gets tabindex 0
   (a tall slide scrolls), the others none. Figures on a slide that comes into view are resized to it. */
(function () {
  "use strict";
  function focusable(event) {
    document.querySelectorAll(".reveal .slides section[tabindex]").forEach(function (s) { s.removeAttribute("tabindex"); });
    var slide = event && event.currentSlide;
    if (slide) {
      slide.setAttribute("tabindex", "0");
      if (window.Plotly) {
        slide.querySelectorAll(".js-plotly-plot").forEach(function (plot) { window.Plotly.Plots.resize(plot); });
      }
    }
  }
  window.Reveal.initialize({
    hash: true, controls: true, progress: true, center: false, transition: "none", backgroundTransition: "none",
    slideNumber: "c/t", width: 1280, height: 760, margin: 0.03, viewDistance: 2, plugins: [window.RevealNotes]
  }).then(function () { focusable({currentSlide: window.Reveal.getCurrentSlide()}); });
  window.Reveal.on("slidechanged", focusable);
})();
