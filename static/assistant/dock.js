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

// Connection indicator: proves the live channel is reachable for this user. The conversation itself
// arrives with the live panel.
(function () {
  "use strict";
  function connect(status) {
    var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    var socket = new WebSocket(scheme + window.location.host + "/ws/assistant/");
    socket.addEventListener("open", function () {
      socket.send(JSON.stringify({ type: "assistant.ping", id: "dock" }));
    });
    socket.addEventListener("message", function (event) {
      var data = JSON.parse(event.data);
      if (data.type === "assistant.pong") {
        status.textContent = "Connected";
        status.classList.add("is-connected");
      }
    });
    socket.addEventListener("close", function () {
      status.textContent = "Offline — reconnecting…";
      status.classList.remove("is-connected");
      setTimeout(function () { connect(status); }, 3000);
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    var status = document.querySelector("[data-assistant-status]");
    if (status && "WebSocket" in window) connect(status);
  });
})();
