// The conversation: a client of the live protocol at /ws/assistant/ (docs/protocol.md).
// It renders what the server says happened; the server's rows are the truth, so after any reconnect
// it asks for the whole chat again (assistant.load) instead of trusting what it had drawn.
(function () {
  "use strict";

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function stepText(step) {
    var result = step.result || {};
    if (step.kind === "notice") return step.reason;
    if (step.kind === "model_call") {
      if (result.interrupted) return "The model was interrupted: " + (step.reason || "stopped");
      if (step.arguments && step.arguments.purpose === "summarise") return "Summarised the earlier conversation";
      var calls = (result.tool_calls || []).map(function (call) { return call.name; });
      return calls.length ? "Decided to use " + calls.join(", ") : "Wrote the answer";
    }
    if (step.state === "awaiting_confirmation" && !step.confirmation) return step.tool_name + " — waiting for your approval";
    if (step.state === "started") return "Running " + step.tool_name + "…";
    var status = result.status || "";
    if (step.took_effect) return step.tool_name + " — done";
    if (status === "declined") return step.tool_name + " — declined by you";
    if (status === "data") return step.tool_name + " — read";
    return step.tool_name + " — " + (step.reason || status || "no effect");
  }

  function stepClass(step) {
    var status = (step.result || {}).status;
    if (step.kind === "notice") return "assistant-step is-notice";
    if (step.state === "started" || step.state === "awaiting_confirmation") return "assistant-step is-running";
    if (["invalid", "denied", "not_found", "error", "unknown", "declined"].indexOf(status) >= 0) {
      return "assistant-step is-failed";
    }
    return "assistant-step";
  }

  function Conversation(root) {
    this.root = root;
    this.thread = root.querySelector("[data-assistant-thread]");
    this.form = root.querySelector("[data-assistant-form]");
    this.input = root.querySelector("[data-assistant-input]");
    this.button = root.querySelector("[data-assistant-send]");
    this.status = root.querySelector("[data-assistant-status]");
    this.chatId = null;
    this.activeRun = null;
    this.runs = {};  // run id -> {steps: element, draft: element, stepRows: {seq: element}}
    this.retry = 1000;
    var self = this;
    this.form.addEventListener("submit", function (event) { event.preventDefault(); self.submit(); });
    this.input.addEventListener("keydown", function (event) {
      if (event.key !== "Enter" || event.shiftKey) return;
      event.preventDefault();
      // While a run works, Enter must not turn into "Stop": only the button stops a run.
      if (!self.activeRun) self.submit();
    });
    this.connect();
  }

  Conversation.prototype.connect = function () {
    var self = this;
    var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    this.socket = new WebSocket(scheme + window.location.host + this.root.dataset.wsPath);
    this.socket.addEventListener("open", function () {
      self.retry = 1000;
      self.setStatus("Connected", "is-connected");
      self.input.disabled = false;
      self.button.disabled = false;
      self.send({ type: "assistant.load" });
    });
    this.socket.addEventListener("message", function (event) { self.handle(JSON.parse(event.data)); });
    this.socket.addEventListener("close", function (event) {
      self.input.disabled = true;
      self.button.disabled = true;
      if (event.code === 4401) {
        // The session ended. Signing in again (in any tab) starts a new one, so keep trying, slowly.
        self.setStatus("Signed out — sign in again to use the assistant.", "");
        self.retry = 15000;
      } else {
        self.setStatus("Offline — reconnecting…", "");
      }
      setTimeout(function () { self.connect(); }, self.retry);
      self.retry = Math.min(self.retry * 2, 15000);
    });
  };

  Conversation.prototype.send = function (event) {
    if (this.socket && this.socket.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(event));
  };

  Conversation.prototype.setStatus = function (text, className) {
    this.status.textContent = text;
    this.status.className = "assistant-status " + (className || "");
  };

  Conversation.prototype.setActive = function (runId) {
    this.activeRun = runId;
    this.button.textContent = runId ? "Stop" : "Send";
  };

  Conversation.prototype.submit = function () {
    if (this.activeRun) {
      this.send({ type: "assistant.cancel", run_id: this.activeRun });
      return;
    }
    var text = this.input.value.trim();
    if (!text) return;
    this.send({ type: "assistant.send", content: text, chat_id: this.chatId });
    this.input.value = "";
  };

  Conversation.prototype.append = function (node) {
    var empty = this.thread.querySelector(".assistant-empty");
    if (empty) empty.remove();
    this.thread.appendChild(node);
    this.thread.scrollTop = this.thread.scrollHeight;
    return node;
  };

  Conversation.prototype.bubble = function (message) {
    var existing = this.thread.querySelector('[data-message-id="' + message.id + '"]');
    if (existing) return existing;
    var node = el("li", "assistant-message is-" + message.role, message.content);
    node.dataset.messageId = message.id;
    return this.append(node);
  };

  Conversation.prototype.run = function (runId) {
    if (!this.runs[runId]) {
      var steps = this.append(el("li", "assistant-steps"));
      steps.appendChild(el("span", "assistant-thinking", "Working…"));
      this.runs[runId] = { steps: steps, draft: null, rows: {} };
    }
    return this.runs[runId];
  };

  Conversation.prototype.showStep = function (step) {
    var run = this.run(step.run_id);
    var row = run.rows[step.seq];
    if (!row) {
      row = run.rows[step.seq] = el("div");
      run.steps.insertBefore(row, run.steps.querySelector(".assistant-thinking"));
    }
    row.className = stepClass(step);
    row.textContent = stepText(step);
    if (step.state === "awaiting_confirmation" && !step.confirmation) {
      this.askToConfirm(step, row);
      this.setActive(null);  // waiting for the person: a new message may replace the question
    }
  };

  Conversation.prototype.askToConfirm = function (step, row) {
    var self = this;
    var card = el("div", "assistant-confirm");
    card.appendChild(el("p", null, "Allow the assistant to run " + step.tool_name + "?"));
    card.appendChild(el("pre", null, JSON.stringify(step.arguments, null, 2)));
    [["Approve", true], ["Deny", false]].forEach(function (choice) {
      var button = el("button", choice[1] ? "assistant-button assistant-button-primary" : "assistant-button", choice[0]);
      button.type = "button";
      button.addEventListener("click", function () {
        // The answer names the card it answers: it can never approve a question this tab did not show.
        self.send({ type: "assistant.confirm", run_id: step.run_id, step_id: step.id, approve: choice[1] });
        self.setActive(step.run_id);
        card.remove();
      });
      card.appendChild(button);
    });
    row.appendChild(card);
  };

  Conversation.prototype.finishRun = function (runId, node) {
    var run = this.runs[runId];
    if (run) {
      var thinking = run.steps.querySelector(".assistant-thinking");
      if (thinking) thinking.remove();
      if (run.draft) { run.draft.remove(); run.draft = null; }
    }
    if (node) this.append(node);
    if (this.activeRun === runId) this.setActive(null);
  };

  Conversation.prototype.handle = function (event) {
    if (event.chat_id !== undefined && event.chat_id !== null && this.chatId !== null &&
        event.chat_id !== this.chatId && event.type !== "assistant.sent") {
      return;  // another of this person's chats
    }
    switch (event.type) {
      case "assistant.messages_loaded": return this.load(event);
      case "assistant.sent":
        if (this.chatId !== event.chat_id) { this.chatId = event.chat_id; this.thread.textContent = ""; this.runs = {}; }
        this.bubble(event.message);
        this.run(event.run_id);
        this.setActive(event.run_id);
        return;
      case "assistant.step": return this.showStep(event.step);
      case "assistant.confirm": return this.showStep(event.step);
      case "assistant.token": {
        var run = this.run(event.run_id);
        if (!run.draft) run.draft = this.append(el("li", "assistant-message is-assistant is-draft", ""));
        run.draft.textContent += event.delta;
        return;
      }
      case "assistant.replied": {
        var reply = el("li", "assistant-message is-assistant", event.message.content);
        reply.dataset.messageId = event.message.id;
        return this.finishRun(event.run_id, reply);
      }
      case "assistant.reply_failed":
        return this.finishRun(event.run_id, el("li", "assistant-message is-error", event.error));
      case "assistant.cancelled":
        return this.finishRun(event.run_id, el("li", "assistant-note", event.run.error || "Stopped."));
      case "assistant.error":
        // A card answered elsewhere (another tab) or gone: redraw what the run is waiting on now.
        if (event.code === "stale_confirmation") this.send({ type: "assistant.load", chat_id: this.chatId });
        return this.setStatus(event.message, "is-error");
      case "assistant.thread_failed":
        return this.setStatus(event.error, "is-error");
      case "assistant.resync":  // events were lost or withheld: redraw this chat from the server's rows
        return this.send({ type: "assistant.load", chat_id: this.chatId });
      default:
        return undefined;
    }
  };

  Conversation.prototype.load = function (state) {
    this.thread.textContent = "";
    this.runs = {};
    this.chatId = state.chat ? state.chat.id : null;
    var self = this;
    if (!state.messages.length) {
      this.thread.appendChild(el("li", "assistant-empty",
        "Ask the assistant to find or change things in this app for you. It acts as you, and shows every step it takes."));
    }
    state.messages.forEach(function (message) { self.bubble(message); });
    this.setActive(null);
    if (state.active_run) {
      this.run(state.active_run.id);
      state.steps.forEach(function (step) { self.showStep(step); });
      this.setActive(state.active_run.id);
    }
  };

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-assistant-conversation]").forEach(function (root) {
      if ("WebSocket" in window) new Conversation(root);
    });
  });
})();
