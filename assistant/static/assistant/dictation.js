// Dictation: the microphone beside Send, drawn only where the site configures a transcription model
// (ASSISTANT["TRANSCRIPTION_MODEL"]). A press records with the browser's MediaRecorder, the next press (or the
// time limit) stops; the recording goes to the assistant's transcription endpoint, and its text goes into the
// message box at the cursor, for the person to check and send: nothing is sent to the assistant by itself.
// It stands beside conversation.js and changes nothing of it: it reads the same message box, status line and
// live region. What goes wrong is said in words in the status line, and the panel works on as before.
(function () {
  "use strict";

  // The containers tried, in order: what browsers record (Chromium and Firefox WebM or Ogg with Opus, Safari MP4)
  // and the transcription servers read.
  var TYPES = ["audio/webm;codecs=opus", "audio/ogg;codecs=opus", "audio/mp4", "audio/webm"];
  // Speech needs little: at this rate a minute's recording is about 250 kB.
  var BITS_PER_SECOND = 32000;
  var CANNOT_RECORD = "This browser cannot record audio here, so dictation is not available. Type your message instead.";

  function clock(seconds) {
    var rest = seconds % 60;
    return Math.floor(seconds / 60) + ":" + (rest < 10 ? "0" : "") + rest;
  }

  function duration(seconds) {
    if (seconds % 60 === 0) return seconds === 60 ? "1 minute" : seconds / 60 + " minutes";
    return seconds + " seconds";
  }

  function size(bytes) {
    return bytes >= 1000000 ? Math.round(bytes / 100000) / 10 + " MB" : Math.ceil(bytes / 1000) + " kB";
  }

  function release(stream) {
    stream.getTracks().forEach(function (track) { track.stop(); });
  }

  function microphoneProblem(error) {
    var name = error && error.name;
    if (name === "NotAllowedError" || name === "SecurityError") {
      return "The microphone is blocked for this site. Allow it in the browser's site settings to dictate, or type your message.";
    }
    if (name === "NotFoundError" || name === "OverconstrainedError") {
      return "No microphone was found. Connect one to dictate, or type your message.";
    }
    if (name === "NotReadableError" || name === "AbortError") {
      return "The microphone could not be started: another application may be using it. Type your message instead.";
    }
    return "The microphone could not be started, so dictation is not available. Type your message instead.";
  }

  function Dictation(root, button) {
    this.root = root;
    this.button = button;
    this.input = root.querySelector("[data-assistant-input]");
    this.status = root.querySelector("[data-assistant-status]");
    this.announcer = root.querySelector("[data-assistant-announce]");
    this.label = button.querySelector("[data-assistant-dictate-label]");
    this.time = button.querySelector("[data-assistant-dictate-time]");
    this.url = button.dataset.url;
    this.maxSeconds = Number(button.dataset.maxSeconds);
    this.maxBytes = Number(button.dataset.maxBytes);
    this.state = "idle";     // idle, asking (for the microphone), recording, sending
    this.shown = null;       // what this put in the status line, and what it replaced there
    var self = this;
    button.addEventListener("click", function () { self.press(); });
    // The microphone works while the message box does (the socket is open); a recording can always be stopped.
    new MutationObserver(function () { self.follow(); })
      .observe(this.input, { attributes: true, attributeFilter: ["disabled"] });
    // A dock closed while recording stops listening at once, and keeps nothing of it.
    var dock = this.dock = root.closest(".assistant-dock");
    if (dock) {
      new MutationObserver(function () { if (dock.hidden) self.discard(); })
        .observe(dock, { attributes: true, attributeFilter: ["hidden"] });
    }
    this.follow();
  }

  Dictation.prototype.follow = function () {
    this.button.disabled = this.input.disabled && this.state === "idle";
  };

  Dictation.prototype.setState = function (state) {
    this.state = state;
    var recording = state === "recording";
    var name = recording ? "Stop recording" : state === "sending" ? "Transcribing…" : "Dictate";
    this.label.textContent = name;
    this.button.title = name;
    this.button.setAttribute("aria-pressed", recording ? "true" : "false");
    this.button.classList.toggle("is-recording", recording);
    // Busy, not disabled: a disabled button would lose the keyboard's focus.
    if (state === "asking" || state === "sending") this.button.setAttribute("aria-disabled", "true");
    else this.button.removeAttribute("aria-disabled");
    this.time.hidden = !recording;
    this.follow();
  };

  Dictation.prototype.press = function () {
    if (this.state === "recording") return this.stop(false);
    if (this.state !== "idle") return;
    this.clearProblem();
    if (!window.MediaRecorder || !navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) {
      return this.problem(CANNOT_RECORD);
    }
    var self = this;
    this.setState("asking");
    navigator.mediaDevices.getUserMedia({ audio: true }).then(function (stream) {
      self.record(stream);
    }, function (error) {
      self.setState("idle");
      self.problem(microphoneProblem(error));
    });
  };

  Dictation.prototype.record = function (stream) {
    var self = this;
    if (this.dock && this.dock.hidden) {  // closed while the browser asked for the microphone: no recording
      release(stream);
      return this.setState("idle");
    }
    var type = TYPES.filter(function (candidate) { return MediaRecorder.isTypeSupported(candidate); })[0];
    var options = { audioBitsPerSecond: BITS_PER_SECOND };
    if (type) options.mimeType = type;
    var recorder;
    try {
      recorder = new MediaRecorder(stream, options);
      recorder.start();
    } catch (error) {
      release(stream);
      this.setState("idle");
      return this.problem(CANNOT_RECORD);
    }
    var chunks = [];
    this.recorder = recorder;
    this.atLimit = false;
    recorder.addEventListener("dataavailable", function (event) {
      if (event.data && event.data.size) chunks.push(event.data);
    });
    recorder.addEventListener("stop", function () {
      release(stream);
      if (self.recorder !== recorder) return;  // discarded
      self.recorder = null;
      self.send(new Blob(chunks, { type: recorder.mimeType || type || "audio/webm" }));
    });
    this.started = Date.now();
    this.setState("recording");
    this.tick();
    this.ticker = setInterval(function () { self.tick(); }, 250);
    this.limit = setTimeout(function () { self.stop(true); }, this.maxSeconds * 1000);
    this.announce("Recording. Press Stop recording when you are done; it stops by itself after " +
      duration(this.maxSeconds) + ".");
  };

  Dictation.prototype.tick = function () {
    var seconds = Math.min(this.maxSeconds, Math.floor((Date.now() - this.started) / 1000));
    this.time.textContent = clock(seconds);
  };

  Dictation.prototype.stopTimers = function () {
    clearInterval(this.ticker);
    clearTimeout(this.limit);
  };

  Dictation.prototype.stop = function (atLimit) {
    if (this.state !== "recording") return;
    this.stopTimers();
    this.atLimit = atLimit;
    this.setState("sending");
    this.announce("Transcribing…");
    this.recorder.stop();  // its "stop" event sends what it recorded
  };

  Dictation.prototype.discard = function () {
    if (this.state !== "recording") return;
    var recorder = this.recorder;
    this.recorder = null;
    this.stopTimers();
    recorder.stop();
    this.setState("idle");
  };

  Dictation.prototype.send = function (recording) {
    var self = this;
    if (!recording.size) {
      this.setState("idle");
      return this.problem("Nothing was recorded. Check the microphone, or type your message.");
    }
    if (recording.size > this.maxBytes) {
      this.setState("idle");
      return this.problem("The recording is too large to send (" + size(recording.size) + "; at most " +
        size(this.maxBytes) + "). Record a shorter message.");
    }
    var form = new FormData();
    form.append("audio", recording, "recording");
    fetch(this.url, {
      method: "POST", body: form, credentials: "same-origin",
      headers: { "X-CSRFToken": this.button.dataset.csrfToken || "" },
    }).then(function (response) {
      return response.json().then(function (body) {
        return { ok: response.ok, status: response.status, body: body || {} };
      }, function () {
        return { ok: false, status: response.status, body: {} };
      });
    }).then(function (answer) {
      self.setState("idle");
      if (answer.ok && typeof answer.body.text === "string") return self.insert(answer.body.text);
      self.problem(typeof answer.body.error === "string" ? answer.body.error :
        "Dictation failed (HTTP " + answer.status + "). Reload the page and try again, or type your message.");
    }, function () {
      self.setState("idle");
      self.problem("Dictation is unavailable right now: the site could not be reached. Type your message instead, or try again.");
    });
  };

  // The text goes where the cursor was in the message box (replacing a selection), a space apart from the words
  // around it; the cursor then stands after it, and nothing is sent.
  Dictation.prototype.insert = function (text) {
    text = text.trim();
    if (!text) return this.problem("No speech was heard in the recording. Try again closer to the microphone, or type your message.");
    var input = this.input;
    var value = input.value;
    var start = typeof input.selectionStart === "number" ? input.selectionStart : value.length;
    var end = typeof input.selectionEnd === "number" ? input.selectionEnd : start;
    var before = value.slice(0, start);
    var after = value.slice(end);
    var added = (before && !/\s$/.test(before) ? " " : "") + text + (after && !/^\s/.test(after) ? " " : "");
    input.value = before + added + after;
    input.setSelectionRange(before.length + added.length, before.length + added.length);
    // Whatever listens to the message box (its height, a draft) hears of the change as of typing.
    input.dispatchEvent(new Event("input", { bubbles: true }));
    input.focus();
    this.announce((this.atLimit ? "The recording stopped at its limit of " + duration(this.maxSeconds) + ". " : "") +
      "Added to your message: " + (text.length > 300 ? text.slice(0, 300) + "…" : text));
  };

  // The status line belongs to the conversation (its connection); a problem is shown there until the next
  // dictation, which puts back what it replaced, unless the conversation has written there since.
  Dictation.prototype.problem = function (text) {
    if (!this.shown) this.shown = { replaced: this.status.textContent, className: this.status.className };
    this.shown.text = text;
    this.status.textContent = text;
    this.status.className = "assistant-status is-error";
    this.announce(text);
  };

  Dictation.prototype.clearProblem = function () {
    var shown = this.shown;
    this.shown = null;
    if (shown && this.status.textContent === shown.text) {
      this.status.textContent = shown.replaced;
      this.status.className = shown.className;
    }
  };

  Dictation.prototype.announce = function (text) {
    var announcer = this.announcer;
    if (!announcer) return;
    announcer.textContent = "";
    setTimeout(function () { announcer.textContent = text; }, 30);
  };

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-assistant-conversation]").forEach(function (root) {
      var button = root.querySelector("[data-assistant-dictate]");
      if (button) root.assistantDictation = new Dictation(root, button);
    });
  });
})();
