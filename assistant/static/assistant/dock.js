// Opens, closes and resizes the docked assistant. The open/closed choice and the width survive page
// loads; Alt+Shift+A toggles it from anywhere; Esc closes it and gives focus back to what opened it.
(function () {
  "use strict";
  var OPEN_KEY = "assistant.dock.open";
  var WIDTH_KEY = "assistant.dock.width";
  var MIN_WIDTH = 320;
  var STEP = 16;
  var opener = null;

  function remember(key, value) {
    try { localStorage.setItem(key, value); } catch (e) { /* private mode: not remembered */ }
  }

  function recall(key) {
    try { return localStorage.getItem(key); } catch (e) { return null; }
  }

  function dock() {
    return document.getElementById("assistant-dock");
  }

  function launcher() {
    return document.querySelector(".assistant-launcher");
  }

  function maxWidth() {
    return Math.max(MIN_WIDTH, Math.min(960, window.innerWidth - 240));
  }

  function setWidth(width, save) {
    var clamped = Math.round(Math.max(MIN_WIDTH, Math.min(maxWidth(), width)));
    document.documentElement.style.setProperty("--assistant-dock-width", clamped + "px");
    var handle = document.querySelector("[data-assistant-resize]");
    if (handle) {
      handle.setAttribute("aria-valuenow", String(clamped));
      handle.setAttribute("aria-valuemax", String(maxWidth()));
      handle.setAttribute("aria-valuetext", clamped + " pixels wide");
    }
    if (save) remember(WIDTH_KEY, String(clamped));
    return clamped;
  }

  function currentWidth() {
    var node = dock();
    return node && !node.hidden ? node.getBoundingClientRect().width : Number(recall(WIDTH_KEY)) || 400;
  }

  function setOpen(open, options) {
    var node = dock();
    if (!node) return;
    var focus = !options || options.focus !== false;
    if (open && !node.hidden) return;
    if (open) {
      var active = document.activeElement;
      opener = active && active !== document.body && !node.contains(active) ? active : null;
    }
    node.hidden = !open;
    document.body.classList.toggle("assistant-open", open);
    document.querySelectorAll(".assistant-launcher").forEach(function (button) {
      button.setAttribute("aria-expanded", String(open));
    });
    remember(OPEN_KEY, open ? "1" : "0");
    if (!focus) return;
    if (open) {
      var input = node.querySelector("[data-assistant-input]");
      // A chat of the person's own agent has no composer: its "New chat" takes focus instead.
      var agentNote = node.querySelector("[data-assistant-agent-note]:not([hidden]) [data-assistant-agent-new-chat]");
      if (agentNote) agentNote.focus();
      else if (input && !input.disabled) input.focus();
      else node.querySelector("[data-assistant-toggle]").focus();
    } else {
      // Back to what opened it, if it is still there to take focus; else the launcher.
      var back = opener && document.contains(opener) && opener.offsetParent !== null ? opener : launcher();
      opener = null;
      if (back) back.focus();
    }
  }

  function toggle() {
    var node = dock();
    if (node) setOpen(node.hidden);
  }

  document.addEventListener("click", function (event) {
    if (event.target.closest("[data-assistant-toggle]")) toggle();
  });

  document.addEventListener("keydown", function (event) {
    if (event.altKey && event.shiftKey && !event.ctrlKey && !event.metaKey && event.code === "KeyA") {
      event.preventDefault();
      toggle();
      return;
    }
    var node = dock();
    if (event.key !== "Escape" || event.defaultPrevented || !node || node.hidden) return;
    // Esc belongs to the dock when focus is in it (or nowhere in particular), never to the page's own widgets.
    var active = document.activeElement;
    if (node.contains(active) || !active || active === document.body) setOpen(false);
  });

  function setUpResize() {
    var handle = document.querySelector("[data-assistant-resize]");
    if (!handle) return;
    handle.addEventListener("keydown", function (event) {
      var width = currentWidth();
      var next = null;
      // The handle is on the dock's left edge: left makes it wider, right narrower.
      if (event.key === "ArrowLeft" || event.key === "ArrowUp") next = width + STEP;
      else if (event.key === "ArrowRight" || event.key === "ArrowDown") next = width - STEP;
      else if (event.key === "PageUp") next = width + STEP * 4;
      else if (event.key === "PageDown") next = width - STEP * 4;
      else if (event.key === "Home") next = MIN_WIDTH;
      else if (event.key === "End") next = maxWidth();
      if (next === null) return;
      event.preventDefault();
      setWidth(next, true);
    });
    handle.addEventListener("pointerdown", function (event) {
      event.preventDefault();
      handle.setPointerCapture(event.pointerId);
      document.body.classList.add("assistant-resizing");
      var move = function (moved) { setWidth(window.innerWidth - moved.clientX, false); };
      var up = function (released) {
        handle.releasePointerCapture(released.pointerId);
        handle.removeEventListener("pointermove", move);
        handle.removeEventListener("pointerup", up);
        document.body.classList.remove("assistant-resizing");
        setWidth(window.innerWidth - released.clientX, true);
      };
      handle.addEventListener("pointermove", move);
      handle.addEventListener("pointerup", up);
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var width = Number(recall(WIDTH_KEY));
    setWidth(width || 400, false);
    setUpResize();
    // Reopened as it was left, without taking focus from the page that just loaded.
    if (recall(OPEN_KEY) === "1") setOpen(true, { focus: false });
  });
})();
