// Pointing at a turn of the timeline marks its node in the drawing, and the other way round.
(function () {
  "use strict";
  var nodes = {};
  document.querySelectorAll(".drawing g.node").forEach(function (g) {
    var title = g.querySelector("title");
    if (title) {
      nodes[title.textContent] = g;
    }
  });
  function mark(name, on) {
    var g = nodes[name];
    if (g) {
      g.classList.toggle("focus", on);
    }
    document.querySelectorAll(".turn").forEach(function (turn) {
      if (turn.dataset.node === name) {
        turn.classList.toggle("focus", on);
      }
    });
  }
  document.querySelectorAll(".turn").forEach(function (turn) {
    turn.addEventListener("mouseenter", function () { mark(turn.dataset.node, true); });
    turn.addEventListener("mouseleave", function () { mark(turn.dataset.node, false); });
  });
  Object.keys(nodes).forEach(function (name) {
    nodes[name].addEventListener("mouseenter", function () { mark(name, true); });
    nodes[name].addEventListener("mouseleave", function () { mark(name, false); });
  });
}());
