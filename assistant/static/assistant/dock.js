// Opens and closes the docked assistant; the open/closed choice survives page loads.
(function () {
  "use strict";
  var STORAGE_KEY = "assistant.dock.open";

  function setOpen(open) {
    var dock = document.getElementById("assistant-dock");
    if (!dock) return;
    dock.hidden = !open;
    document.body.classList.toggle("assistant-open", open);
    document.querySelectorAll(".assistant-launcher").forEach(function (button) {
      button.setAttribute("aria-expanded", String(open));
    });
    try { localStorage.setItem(STORAGE_KEY, open ? "1" : "0"); } catch (e) { /* private mode: not remembered */ }
    if (open) {
      var input = dock.querySelector("textarea");
      if (input && !input.disabled) input.focus();
    }
  }

  document.addEventListener("click", function (event) {
    var toggle = event.target.closest("[data-assistant-toggle]");
    if (!toggle) return;
    var dock = document.getElementById("assistant-dock");
    setOpen(dock ? dock.hidden : false);
  });

  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape" && document.body.classList.contains("assistant-open")) setOpen(false);
  });

  document.addEventListener("DOMContentLoaded", function () {
    var remembered = null;
    try { remembered = localStorage.getItem(STORAGE_KEY); } catch (e) { remembered = null; }
    if (remembered === "1") setOpen(true);
  });
})();

