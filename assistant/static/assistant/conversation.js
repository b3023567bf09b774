// The conversation: a client of the live protocol at /ws/assistant/ (docs/protocol.md). Its parts:
// steps.js (how steps read), this file (the socket, the thread, answers), chats.js (the conversations),
// plans.js (a run's plan as a checklist above its steps).
// It renders what the server says happened; the server's rows are the truth, so after any reconnect
// it asks for the chat again (assistant.load) instead of trusting what it had drawn.
// Text from the server is always set as text; the two exceptions are a reply's `html`, which the server
// rendered from Markdown and sanitised with an allow-list (see assistant/live/markdown.py), and a step's `card`,
// the app's template drawing the step's object, sanitised the same way (assistant/live/cards.py).
(function () {
  "use strict";

  var Steps = window.AssistantSteps;
  var el = Steps.el;
  var PAGE_SIZE = 50;
  // How long a missing event number may stay missing before it counts as lost: events from different
  // processes can arrive slightly out of order (docs/protocol.md, "Event numbers").
  var GAP_WAIT_MS = 1500;
  // A member's run in words, after "Steps of <member>: ".
  var MEMBER_STATES = { working: "working…", answered: "answered", failed: "could not finish", stopped: "stopped",
                        ended: "ended" };
  // A member run's status (in `members` and `runs`) as the state its nested block shows.
  var MEMBER_ENDS = { succeeded: "answered", failed: "failed", timed_out: "failed", cancelled: "stopped" };
  // A delegation step's outcome as its member's state, once the run that asked it heard back.
  var DELEGATION_ENDS = { answered: "answered", escalated: "failed", member_stopped: "stopped" };
  var MEMBER_RANK = { working: 0, ended: 1, answered: 2, failed: 3, stopped: 3 };
  var EMPTY_TEXT = "Ask the assistant to find or change things in this app for you. It acts as you, and shows every step it takes.";
  // Steps already reported to the page as "assistant:changed", by step id: once each, even with two surfaces.
  var reportedChanges = {};
  var tabId = Math.random().toString(36).slice(2, 10);
  var requestCount = 0;

  function requestId(kind) {
    requestCount += 1;
    return kind + ":" + tabId + ":" + requestCount;
  }

  function requestKind(event) {
    return typeof event.request_id === "string" ? event.request_id.split(":")[0] : "";
  }

  function button(text, className, attributes) {
    var node = el("button", className || "assistant-button", text);
    node.type = "button";
    Object.keys(attributes || {}).forEach(function (name) { node.setAttribute(name, attributes[name]); });
    return node;
  }

  // Icons drawn as SVG (no icon font, no emoji font needed); paths from Feather (MIT licence).
  var ICONS = {
    up: "M14 9V5a3 3 0 0 0-3-3l-4 9v11h11.28a2 2 0 0 0 2-1.7l1.38-9a2 2 0 0 0-2-2.3zM7 22H4a2 2 0 0 1-2-2v-7a2 2 0 0 1 2-2h3",
    down: "M10 15v4a3 3 0 0 0 3 3l4-9V2H5.72a2 2 0 0 0-2 1.7l-1.38 9a2 2 0 0 0 2 2.3zm7-13h2.67A2.31 2.31 0 0 1 22 4v7a2.31 2.31 0 0 1-2.33 2H17",
    rename: "M17 3a2.83 2.83 0 1 1 4 4L7.5 20.5 2 22l1.5-5.5L17 3z",
    trash: "M3 6h18M19 6v14a2 2 0 0 1-2 2H7a2 2 0 0 1-2-2V6m3 0V4a2 2 0 0 1 2-2h4a2 2 0 0 1 2 2v2",
  };

  function iconButton(icon, label, attributes) {
    var node = button("", "assistant-icon-button", attributes);
    node.setAttribute("aria-label", label);
    node.title = label;
    var svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    svg.setAttribute("viewBox", "0 0 24 24");
    svg.setAttribute("width", "16");
    svg.setAttribute("height", "16");
    svg.setAttribute("aria-hidden", "true");
    svg.setAttribute("focusable", "false");
    var path = document.createElementNS("http://www.w3.org/2000/svg", "path");
    path.setAttribute("d", ICONS[icon]);
    path.setAttribute("fill", "none");
    path.setAttribute("stroke", "currentColor");
    path.setAttribute("stroke-width", "2");
    path.setAttribute("stroke-linecap", "round");
    path.setAttribute("stroke-linejoin", "round");
    svg.appendChild(path);
    node.appendChild(svg);
    return node;
  }

  // Who wrote a reply that a member answered itself (a handoff), said beside it.
  function memberLabel(member) {
    return "Answered by " + member;
  }

  function visible(node) {
    return !!(node && node.offsetParent !== null);
  }

  function Conversation(root) {
    this.root = root;
    this.thread = root.querySelector("[data-assistant-thread]");
    this.form = root.querySelector("[data-assistant-form]");
    this.input = root.querySelector("[data-assistant-input]");
    this.button = root.querySelector("[data-assistant-send]");
    this.status = root.querySelector("[data-assistant-status]");
    this.reconnectButton = root.querySelector("[data-assistant-reconnect]");
    this.announcer = root.querySelector("[data-assistant-announce]");
    this.allowanceNote = root.querySelector("[data-assistant-allowance]");
    this.title = root.querySelector("[data-assistant-chat-title]");
    this.chatsToggle = root.querySelector("[data-assistant-chats-toggle]");
    this.chatsPanel = root.querySelector("[data-assistant-chats]");
    this.chatList = root.querySelector("[data-assistant-chat-list]");
    this.chatsMore = root.querySelector("[data-assistant-chats-more]");
    this.chatId = null;
    this.newChat = false;        // the next send starts a new chat
    this.activeRun = null;       // a run that works now: the button is Stop
    // run id -> {node, list, count, rows: {seq: element}, cards: {seq: element}, draft, plan}; a top run's reply
    // draft also has draftBy (the run whose text it is) and draftBody. A member's run (one another run handed work
    // to) also has member, parentId, rootId, askedIn and state, and its node sits in its parent's list, right
    // under the step that asked it.
    this.runs = {};
    this.heard = {};             // delegation step id -> its member's state, once the asking run heard back
    this.messages = {};          // message id -> message payload
    this.tools = {};             // tool name -> {name, description, destructive}, from assistant.confirm
    this.mySends = {};           // request ids of this tab's sends: their chat becomes this tab's chat
    this.pendingFeedback = {};   // request id -> the feedback shown before a thumb was pressed
    this.chats = {};             // chat id -> chat payload
    this.hasMore = false;
    this.loadingOlder = false;
    this.currentLoad = null;
    this.retryDelay = 1000;
    this.reconnectAt = 0;
    // The person's count of events on this socket (`event_seq`): `last` is the highest number up to which
    // every event arrived or a load covered it; `waiting` holds later numbers (by arrival time) until the
    // ones before them come. `gaps` and `restarts` count what was caught, for whoever looks.
    this.sequence = { last: null, highest: null, waiting: {}, timer: null, gaps: 0, restarts: 0 };
    var self = this;

    this.form.addEventListener("submit", function (event) { event.preventDefault(); self.submit(); });
    this.input.addEventListener("keydown", function (event) {
      if (event.key !== "Enter" || event.shiftKey || event.isComposing) return;
      event.preventDefault();
      // While a run works, Enter must not turn into "Stop": only the button stops a run.
      if (!self.activeRun) self.submit();
    });
    this.thread.addEventListener("click", function (event) { self.onThreadClick(event); });
    this.thread.addEventListener("submit", function (event) {
      if (!event.target.matches(".assistant-feedback-form")) return;
      event.preventDefault();
      self.sendFeedbackComment(event.target);
    });
    this.stick = true;  // follow the newest message, unless the person scrolled up to read
    this.thread.addEventListener("scroll", function () {
      self.stick = self.nearBottom();
      if (self.thread.scrollTop < 40) self.loadOlder();
    });
    // A thread drawn while hidden (the dock closed) has no height to scroll: follow up once it is shown.
    if (window.ResizeObserver) {
      new ResizeObserver(function () { if (self.stick) self.thread.scrollTop = self.thread.scrollHeight; }).observe(this.thread);
    }
    if (this.reconnectButton) {
      this.reconnectButton.addEventListener("click", function () { self.reconnectNow(); });
    }
    window.addEventListener("online", function () { self.reconnectNow(); });
    window.addEventListener("offline", function () { self.wentOffline(); });
    this.setUpChats();
    if (this.setUpPage) this.setUpPage();
    if (this.setUpAttachments) this.setUpAttachments();
    setInterval(function () { self.refreshTimes(); }, 60000);
    this.connect();
  }

  // --- The socket -----------------------------------------------------------------------------------

  Conversation.prototype.connect = function () {
    var self = this;
    if (this.socket && this.socket.readyState <= WebSocket.OPEN) return;
    clearTimeout(this.reconnectTimer);
    clearInterval(this.countdown);
    var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    var socket = this.socket = new WebSocket(scheme + window.location.host + this.root.dataset.wsPath);
    if (this.wasOffline) this.setStatus("Reconnecting…", "");
    socket.addEventListener("open", function () {
      self.retryDelay = 1000;
      self.restartCount();  // a new socket: its count starts with the load below
      if (self.wasOffline) self.announce("The assistant is connected again.");
      self.wasOffline = false;
      self.setStatus("Connected", "is-connected");
      if (self.reconnectButton) self.reconnectButton.hidden = true;
      self.input.disabled = false;
      self.button.disabled = false;
      // A dock opened while connecting put focus on its close button (the input was disabled): now that
      // the input works, it takes focus, unless the person has moved on.
      var dock = self.root.closest(".assistant-dock");
      var active = document.activeElement;
      if (dock && !dock.hidden && active && active.matches("[data-assistant-toggle]") && dock.contains(active)) {
        self.input.focus();
      }
      self.reload();
      self.listChats();
      if (self.askPage) self.askPage();
    });
    socket.addEventListener("message", function (event) { self.handle(JSON.parse(event.data)); });
    socket.addEventListener("close", function (event) {
      if (socket === self.socket) self.lost(event.code === 4401);
    });
  };

  Conversation.prototype.lost = function (signedOut) {
    this.socket = null;
    this.input.disabled = true;
    this.button.disabled = true;
    if (!this.wasOffline) this.announce("The assistant is offline; it will reconnect on its own.");
    this.wasOffline = true;
    // The session ended: signing in again (in any tab) starts a new one, so keep trying, slowly.
    if (signedOut) this.retryDelay = 15000;
    this.scheduleReconnect(signedOut);
  };

  // The browser knows the network is gone before the socket does (that can take minutes): say so now.
  Conversation.prototype.wentOffline = function () {
    var socket = this.socket;
    if (!socket) return;
    this.lost(false);
    socket.close();
  };

  Conversation.prototype.scheduleReconnect = function (signedOut) {
    var self = this;
    var delay = this.retryDelay;
    this.retryDelay = Math.min(this.retryDelay * 2, 15000);
    this.reconnectAt = Date.now() + delay;
    if (this.reconnectButton) this.reconnectButton.hidden = false;
    var tick = function () {
      var seconds = Math.max(1, Math.ceil((self.reconnectAt - Date.now()) / 1000));
      self.setStatus((signedOut ? "Signed out — sign in again to use the assistant. Retrying" : "Offline — reconnecting") +
        " in " + seconds + " s…", signedOut ? "is-error" : "is-offline");
    };
    tick();
    clearInterval(this.countdown);
    this.countdown = setInterval(tick, 1000);
    this.reconnectTimer = setTimeout(function () { self.connect(); }, delay);
  };

  Conversation.prototype.reconnectNow = function () {
    if (this.socket && this.socket.readyState <= WebSocket.OPEN) return;
    this.connect();
  };

  Conversation.prototype.send = function (event) {
    if (this.socket && this.socket.readyState === WebSocket.OPEN) {
      this.socket.send(JSON.stringify(event));
      return true;
    }
    return false;
  };

  Conversation.prototype.setStatus = function (text, className) {
    this.status.textContent = text;
    this.status.className = "assistant-status " + (className || "");
  };

  // Little left of the person's allowance (a reply's or a load's `allowance`, in words): said above the
  // message box until a reply or a load says nothing of it.
  Conversation.prototype.showAllowance = function (words) {
    if (!this.allowanceNote) return;
    this.allowanceNote.textContent = words || "";
    this.allowanceNote.hidden = !words;
  };

  // Polite, and one message at a time: the thread itself is not a live region (it would be re-read).
  Conversation.prototype.announce = function (text) {
    if (!this.announcer || !text) return;
    var announcer = this.announcer;
    announcer.textContent = "";
    setTimeout(function () { announcer.textContent = text; }, 30);
  };

  Conversation.prototype.setActive = function (runId) {
    this.activeRun = runId;
    this.button.textContent = runId ? "Stop" : "Send";
    this.button.setAttribute("aria-label", runId ? "Stop the assistant" : "Send the message");
    this.refreshRetry();
  };

  // --- Sending ----------------------------------------------------------------------------------------

  Conversation.prototype.submit = function () {
    if (this.activeRun) {
      this.send({ type: "assistant.cancel", run_id: this.activeRun });
      return;
    }
    var text = this.input.value.trim();
    // Files waiting above the message box go with it (attachments.js); one still uploading holds the send.
    var files = this.attachmentsForSend ? this.attachmentsForSend() : [];
    if (files === null) { this.setStatus("Your files are still uploading; send once they are ready.", ""); return; }
    if (!text && !files.length) return;
    if (this.sendText(text, files)) this.input.value = "";
  };

  Conversation.prototype.sendText = function (text, files) {
    var id = requestId("send");
    var event = { type: "assistant.send", content: text, request_id: id };
    if (files && files.length) event.attachments = files;
    if (this.newChat) event.new_chat = true;
    else if (this.chatId !== null) event.chat_id = this.chatId;
    var page = this.pageForSend ? this.pageForSend() : null;
    if (page) event.page = page;
    this.mySends[id] = text;
    var sent = this.send(event);
    if (this.showSuggestions) this.showSuggestions();
    return sent;
  };

  // Retry answers the last question again (`assistant.regenerate`): the answer it had stays, as a branch beside
  // the new one (branches.js pages between them).
  Conversation.prototype.retryLast = function () {
    var users = this.thread.querySelectorAll(".assistant-message.is-user");
    var last = users[users.length - 1];
    if (!last || this.activeRun) return;
    this.send({ type: "assistant.regenerate", message_id: Number(last.dataset.messageId), request_id: requestId("again") });
  };

  Conversation.prototype.reload = function () {
    this.currentLoad = requestId("load");
    var event = { type: "assistant.load", request_id: this.currentLoad, limit: PAGE_SIZE, steps: true };
    if (this.chatId !== null) event.chat_id = this.chatId;
    if (this.newChat) return this.showEmpty();
    this.send(event);
  };

  Conversation.prototype.loadOlder = function () {
    if (!this.hasMore || this.loadingOlder || this.oldestId === undefined) return;
    this.loadingOlder = true;
    this.send({ type: "assistant.load", chat_id: this.chatId, before: this.oldestId, limit: PAGE_SIZE, steps: true,
                request_id: requestId("older") });
  };

  // --- The thread -------------------------------------------------------------------------------------

  Conversation.prototype.nearBottom = function () {
    return this.thread.scrollHeight - this.thread.scrollTop - this.thread.clientHeight < 80;
  };

  Conversation.prototype.append = function (node, stick) {
    var follow = stick || this.stick || this.nearBottom();
    var empty = this.thread.querySelector(".assistant-empty");
    if (empty) empty.remove();
    this.thread.appendChild(node);
    if (follow) this.thread.scrollTop = this.thread.scrollHeight;
    return node;
  };

  Conversation.prototype.showEmpty = function () {
    this.thread.textContent = "";
    this.thread.appendChild(el("li", "assistant-empty", EMPTY_TEXT));
    if (this.showSuggestions) this.showSuggestions();
  };

  Conversation.prototype.renderMessage = function (message) {
    this.messages[message.id] = message;
    var node = el("li", "assistant-message is-" + message.role);
    // In an agent's chat the "user" lines are the server's account of each call, not the person's words.
    if (message.role === "user" && this.agentChat && this.agentChat()) node.classList.add("is-agent-call");
    node.dataset.messageId = message.id;
    if (message.run_id) node.dataset.runId = message.run_id;
    // A reply a member wrote itself (a handoff) names it, in words, above its text.
    if (message.role === "assistant" && message.member) {
      node.appendChild(el("p", "assistant-message-member", memberLabel(message.member)));
    }
    var body = node.appendChild(el("div", "assistant-message-body"));
    if (message.role === "assistant" && typeof message.html === "string" && message.html) {
      body.innerHTML = message.html;  // sanitised by the server (an allow-list); nothing else is HTML
      body.classList.add("is-rich");
    } else {
      body.textContent = message.content;
    }
    if (message.role === "assistant") node.appendChild(this.messageActions(message));
    // A question asked from a page says which object "this" was, as the assistant saw it then.
    if (message.role === "user" && message.about) node.appendChild(el("p", "assistant-message-about", "About: " + message.about));
    // The files sent with it (attachments.js); editing a question, and paging between branches (branches.js).
    if (this.showAttachments) this.showAttachments(node, message);
    if (this.decorateMessage) this.decorateMessage(node, message);
    return node;
  };

  Conversation.prototype.messageActions = function (message) {
    var actions = el("div", "assistant-message-actions");
    var up = iconButton("up", "Good answer", { "data-feedback": "up" });
    var down = iconButton("down", "Bad answer", { "data-feedback": "down" });
    actions.appendChild(up);
    actions.appendChild(down);
    actions.appendChild(button("Copy", "assistant-icon-button", { "data-copy": "", "aria-label": "Copy the answer" }));
    this.showFeedback(actions, message.feedback);
    return actions;
  };

  Conversation.prototype.showFeedback = function (actions, feedback) {
    var score = feedback ? feedback.score : 0;
    actions.dataset.score = String(score);
    actions.querySelector('[data-feedback="up"]').setAttribute("aria-pressed", String(score === 1));
    actions.querySelector('[data-feedback="down"]').setAttribute("aria-pressed", String(score === -1));
  };

  Conversation.prototype.bubble = function (message) {
    var existing = this.thread.querySelector('.assistant-message[data-message-id="' + message.id + '"]');
    if (existing) return existing;
    return this.append(this.renderMessage(message), message.role === "user");
  };

  // Only the last answer offers "Retry", and only when nothing runs.
  Conversation.prototype.refreshRetry = function () {
    this.thread.querySelectorAll("[data-retry]").forEach(function (node) { node.remove(); });
    if (this.activeRun || (this.agentChat && this.agentChat())) return;  // nobody sends in an agent's chat
    var items = this.thread.querySelectorAll(".assistant-message.is-assistant:not(.is-draft), .assistant-message.is-error");
    var last = items[items.length - 1];
    if (!last || last.nextElementSibling && last.nextElementSibling.matches(".assistant-message.is-user")) return;
    var bar = last.querySelector(".assistant-message-actions");
    if (!bar) bar = last.appendChild(el("div", "assistant-message-actions"));
    bar.appendChild(button("Retry", "assistant-icon-button",
                           { "data-retry": "", "aria-label": "Answer again (this answer is kept as a branch)" }));
  };

  Conversation.prototype.run = function (runId, options) {
    var run = this.runs[runId];
    if (run) return run;
    var past = options && options.past;
    var node = el("li", "assistant-steps");
    node.dataset.runId = runId;
    var details = node.appendChild(el("details", "assistant-run-steps"));
    details.open = !past;
    var summary = details.appendChild(el("summary", "assistant-run-steps-summary", past ? "Steps" : "Working…"));
    var list = details.appendChild(el("div", "assistant-run-steps-list"));
    run = this.runs[runId] = { node: node, summary: summary, list: list, count: 0, rows: {}, cards: {}, draft: null, past: past };
    if (!past) {
      list.appendChild(el("span", "assistant-thinking", "Working"));
      this.append(node);
    }
    return run;
  };

  // A run's summary line counts its own steps (a member's are counted in the member's own line); it waits
  // for the person's approval when it or a member it asked does.
  Conversation.prototype.countSteps = function (run) {
    var finished = run.list.querySelectorAll(":scope > .assistant-step").length;
    var failed = run.list.querySelectorAll(":scope > .assistant-step.is-failed").length;
    var working = run.list.querySelector(":scope > .assistant-thinking");
    var waiting = !!run.list.querySelector(".assistant-confirm");
    var text = finished + (finished === 1 ? " step" : " steps") + (failed ? ", " + failed + " failed" : "");
    if (run.member) {
      var state = waiting ? "waiting for your approval" : MEMBER_STATES[run.state] || MEMBER_STATES.ended;
      run.summary.textContent = "Steps of " + run.member + ": " + state + " (" + text + ")";
      run.node.classList.toggle("is-working", !run.ended);
      run.node.classList.toggle("is-failed", run.state === "failed");
    } else if (waiting) run.summary.textContent = "Waiting for your approval (" + text + ")";
    else if (run.handedBack && !run.ended) run.summary.textContent = run.handedBack + " (" + text + ")";
    else run.summary.textContent = working ? "Working… (" + text + ")" : text;
  };

  // A run's line and those of the runs above it: a member's question is theirs to wait on too.
  Conversation.prototype.countUp = function (run) {
    for (var seen = 0; run && seen < 32; seen += 1) {
      this.countSteps(run);
      run = run.member ? this.runs[run.parentId] : null;
    }
  };

  Conversation.prototype.showStep = function (step, live) {
    var run = this.run(step.run_id);
    var tool = this.tools[step.tool_name];
    var row = run.rows[step.seq];
    // A member's streamed text was its model call's: the step that call made now stands for it.
    if (run.member && run.draft && step.kind === "model_call") { run.draft.remove(); run.draft = null; }
    // Text a member wrote to the person before calling tools was not its answer: the reply is still to come.
    var calledTools = ((step.result || {}).tool_calls || []).length > 0;
    if (run.member && step.kind === "model_call" && step.state === "finished" && calledTools) this.dropReplyDraft(step.run_id);
    if (!row) {
      row = run.rows[step.seq] = Steps.render(step, tool);
      row.dataset.stepId = step.id;
      var before = null;
      Object.keys(run.rows).forEach(function (seq) {
        if (Number(seq) > step.seq && (!before || Number(before.dataset.seq) > Number(seq))) before = run.rows[seq];
      });
      run.list.insertBefore(row, before || this.listEnd(run));
      this.adoptMembers(step.id, row);
    } else {
      Steps.render(step, tool, row);
    }
    var root = this.rootOf(step.run_id);
    this.showObjectCard(step, this.runs[root] || run);
    var waiting = step.state === "awaiting_confirmation" && !step.confirmation;
    if (waiting) {
      this.askToConfirm(step, run, row);
      // Waiting for the person: a new message may replace the question, so the input works and says Send.
      if (this.activeRun === root || this.activeRun === null) this.setActive(null);
    } else {
      if (run.cards[step.seq]) {
        var card = run.cards[step.seq];
        var hadFocus = card.contains(document.activeElement);
        card.remove();
        delete run.cards[step.seq];
        // In an agent's chat there is no composer: focus stays with the step just answered.
        if (hadFocus) (this.agentChat() ? row.querySelector("summary") : this.input).focus();
      }
      var top = this.runs[root];
      if (step.state === "awaiting_confirmation" && step.confirmation === "approved" && this.agentChat()) {
        // Approved here for the person's own agent, which runs it when it calls again: nothing works on it
        // now, so the run shows no spinner and holds nothing.
        this.handBack(run, step, root);
      } else if (live && step.state !== "finished" && this.activeRun === null && top && !top.past && !top.ended) {
        // Answered (here or in another tab) and at work again: the button stops it.
        this.setActive(root);
      } else if (run.handedBack && step.state !== "awaiting_confirmation") {
        // The agent called again and the step runs: the run works once more until its reply.
        run.handedBack = null;
        if (!run.ended && !run.list.querySelector(":scope > .assistant-thinking")) {
          run.list.appendChild(el("span", "assistant-thinking", "Working"));
        }
      }
    }
    if (Steps.isDelegation(step) && step.state === "finished") {
      // The run that asked heard back: its member is done, however its own events (if any) said it ended.
      this.heard[step.id] = DELEGATION_ENDS[(step.result || {}).status] || "ended";
      var asked = this.memberAskedIn(step.id);
      if (asked) this.finishMember(asked.id, this.heard[step.id]);
    }
    if (Steps.isPlan(step) && this.notePlanStep) this.notePlanStep(run, step);
    this.countUp(run);
    // A plan made or revised is said by the plan's own news (plans.js), not twice.
    if (live && step.kind === "tool_call" && step.state === "finished" && !Steps.isPlan(step)) {
      this.announce((run.member ? run.member + ": " : "") + Steps.text(step, tool));
    }
  };

  // A step approved in the panel for the person's own agent waits for the agent, not for this site: the run's
  // line says so in the server's words ("Approved; it runs when your agent calls it again.").
  Conversation.prototype.handBack = function (run, step, root) {
    var thinking = run.list.querySelector(":scope > .assistant-thinking");
    if (thinking) thinking.remove();
    run.handedBack = step.reason || "Approved; it runs when your agent calls it again.";
    if (this.pendingCard && !this.pendingCard.card.isConnected) this.pendingCard = null;
    if (this.activeRun === root) this.setActive(null);
  };

  // Where a run's next step goes: before its "Working" mark and a member's streaming draft, if any.
  Conversation.prototype.listEnd = function (run) {
    return run.list.querySelector(":scope > .assistant-member-draft") ||
      run.list.querySelector(":scope > .assistant-thinking");
  };

  // The top run of `runId`'s tree (itself for a top run).
  // A tool's card of the object its step acted on or showed, under the steps of the run the person asked (a
  // member's too), where it stays in sight when they fold away.
  Conversation.prototype.showObjectCard = function (step, top) {
    if (typeof step.card !== "string" || !step.card) return;
    if (!top.objectCards) top.objectCards = top.node.appendChild(el("div", "assistant-object-cards"));
    if (top.objectCards.querySelector(':scope > [data-step-id="' + step.id + '"]')) return;
    var card = el("section", "assistant-object-card");
    card.dataset.stepId = step.id;
    card.setAttribute("aria-label", "Card: " + Steps.text(step, this.tools[step.tool_name]));
    card.innerHTML = step.card;  // sanitised by the server (an allow-list), as a reply's html is
    top.objectCards.appendChild(card);
  };

  Conversation.prototype.rootOf = function (runId) {
    var run = this.runs[runId];
    return run && run.member && run.rootId ? run.rootId : runId;
  };

  Conversation.prototype.memberAskedIn = function (stepId) {
    var self = this;
    var id = Object.keys(this.runs).filter(function (key) { return self.runs[key].askedIn === stepId; })[0];
    return id === undefined ? null : this.runs[id];
  };

  // --- Members: the runs another run handed work to, nested under the step that asked each ---------------

  // The nested block of a member's run, made the first time the run is heard of. `info` is an event about
  // it (run_id, member, parent_run_id, root_run_id, asked_in) or its Run payload (id, …).
  Conversation.prototype.memberRun = function (info, options) {
    var runId = info.run_id !== undefined ? info.run_id : info.id;
    var run = this.runs[runId];
    if (run) return run;
    var past = !!(options && options.past);
    var node = el("details", "assistant-member");
    node.dataset.runId = runId;
    node.dataset.askedIn = info.asked_in;
    node.open = !past;
    var summary = node.appendChild(el("summary", "assistant-member-summary"));
    var list = node.appendChild(el("div", "assistant-run-steps-list assistant-member-list"));
    run = this.runs[runId] = {
      id: runId, node: node, summary: summary, list: list, count: 0, rows: {}, cards: {}, draft: null, past: past,
      member: info.member, parentId: info.parent_run_id, rootId: info.root_run_id || info.parent_run_id,
      askedIn: info.asked_in, state: "working", ended: false,
    };
    if (!past) list.appendChild(el("span", "assistant-thinking", "Working"));
    this.placeMember(run);
    this.countUp(run);
    return run;
  };

  // Right under the parent's step that asked it; at the end of the parent's steps until that step is drawn.
  Conversation.prototype.placeMember = function (run) {
    var parent = this.runs[run.parentId] || this.runs[run.rootId] || this.run(run.rootId);
    var asking = run.askedIn !== undefined && run.askedIn !== null &&
      parent.list.querySelector('.assistant-step[data-step-id="' + run.askedIn + '"]');
    if (asking) asking.parentNode.insertBefore(run.node, asking.nextSibling);
    else parent.list.insertBefore(run.node, parent.list.querySelector(":scope > .assistant-thinking"));
  };

  // A step just drawn may be the one a member placed before it was asked for.
  Conversation.prototype.adoptMembers = function (stepId, row) {
    var self = this;
    Object.keys(this.runs).forEach(function (key) {
      var run = self.runs[key];
      if (run.member && run.askedIn === stepId && row.nextSibling !== run.node) {
        row.parentNode.insertBefore(run.node, row.nextSibling);
      }
    });
  };

  // A member's Run payload with its steps (from `members` or `runs`).
  Conversation.prototype.showMember = function (payload, past) {
    var self = this;
    var run = this.memberRun(payload, { past: past });
    (payload.steps || []).forEach(function (step) { self.showStep(step, false); });
    if (payload.plan && this.showPlan) this.showPlan(payload.plan, false);
    if (MEMBER_ENDS[payload.status]) this.finishMember(run.id, MEMBER_ENDS[payload.status]);
    return run;
  };

  // A member's streamed text, written for the run that asked it: a draft inside its block, never the chat's reply
  // (a member that answers the person itself streams into the reply instead: `streamReply`).
  Conversation.prototype.memberDraft = function (event) {
    var run = this.runs[event.run_id];
    if (!run.draft) {
      run.draft = run.list.insertBefore(el("p", "assistant-member-draft", ""),
                                        run.list.querySelector(":scope > .assistant-thinking"));
    }
    run.draft.textContent += event.delta;
  };

  // The reply as it streams, in its top run's draft: the top run's own model's text, or that of the member whose
  // answer is to be the reply (`answers_person`), named as its reply will be; a run a plain request made a member's
  // (`routed_to`) is named for that member. A draft holds one writer's text.
  Conversation.prototype.streamReply = function (event) {
    var writer = this.runs[event.run_id];
    var run = this.run(this.rootOf(event.run_id));
    if (run.draft && run.draftBy !== event.run_id) { run.draft.remove(); run.draft = null; }
    if (!run.draft) {
      run.draft = this.append(el("li", "assistant-message is-assistant is-draft"));
      run.draftBy = event.run_id;
      var named = writer && writer.member ? writer.member : event.routed_to;
      if (named) run.draft.appendChild(el("p", "assistant-message-member", memberLabel(named)));
      run.draftBody = run.draft.appendChild(el("div", "assistant-message-body"));
    }
    var follow = this.nearBottom();
    run.draftBody.textContent += event.delta;  // a draft is plain text until the reply replaces it
    if (follow) this.thread.scrollTop = this.thread.scrollHeight;
  };

  // A member's text streamed as the reply that will not be it (it went on to call tools, or could not finish):
  // it leaves the chat, so nothing it wrote there stands beside the reply that comes instead.
  Conversation.prototype.dropReplyDraft = function (writerId) {
    var top = this.runs[this.rootOf(writerId)];
    if (top && top.draft && top.draftBy === writerId) { top.draft.remove(); top.draft = null; }
  };

  Conversation.prototype.finishMember = function (runId, state) {
    var run = this.runs[runId];
    if (!run || !run.member) return;
    var thinking = run.list.querySelector(":scope > .assistant-thinking");
    if (thinking) thinking.remove();
    if (run.draft) { run.draft.remove(); run.draft = null; }
    // The gravest word on it stands (its own end, its status, the asking step's outcome come in any order):
    // a member that answered but whose last action failed is one that could not finish.
    var heard = this.heard[run.askedIn];
    [state, heard].forEach(function (said) {
      if (said && (!run.ended || MEMBER_RANK[said] >= MEMBER_RANK[run.state])) run.state = said;
      run.ended = true;
    });
    if (run.state === "failed" || run.state === "stopped") this.dropReplyDraft(run.id);
    this.countUp(run);
  };

  Conversation.prototype.askToConfirm = function (step, run, row) {
    var tool = this.tools[step.tool_name];
    if (run.cards[step.seq]) {
      // assistant.confirm follows the step with the tool's description: the sentence may get better.
      run.cards[step.seq].querySelector("[data-confirm-summary]").textContent = Steps.question(step, tool);
      return;
    }
    var self = this;
    var card = el("div", "assistant-confirm");
    card.setAttribute("role", "group");
    // A member's question says which member asks: the person approves it, not the assistant they spoke to.
    var asker = run.member ? run.member + " asks: " : "";
    card.setAttribute("aria-label", "Approval needed for step " + step.seq + (run.member ? " of " + run.member : "") +
      ": " + Steps.humanise(step.tool_name, 0));
    card.dataset.stepId = step.id;
    var line = card.appendChild(el("p", "assistant-confirm-summary"));
    if (asker) line.appendChild(el("span", "assistant-confirm-asker", asker));
    var sentence = line.appendChild(el("span", null, Steps.question(step, tool)));
    sentence.setAttribute("data-confirm-summary", "");
    var why = this.containmentNotice(step, card);
    var details = card.appendChild(el("details", "assistant-confirm-details"));
    details.appendChild(el("summary", null, "Details"));
    details.appendChild(el("p", "assistant-confirm-tool", "Tool: " + step.tool_name));
    details.appendChild(el("pre", null, JSON.stringify(step.arguments, null, 2)));
    var buttons = card.appendChild(el("div", "assistant-confirm-buttons"));
    var approve = button("Approve", "assistant-button assistant-button-primary", { "data-confirm": "approve" });
    var deny = button("Deny", "assistant-button", { "data-confirm": "deny" });
    [approve, deny].forEach(function (choice) {
      var approving = choice === approve;
      choice.addEventListener("click", function () {
        // The answer names the card it answers: it can never approve a question this tab did not show.
        if (!self.send({ type: "assistant.confirm", run_id: step.run_id, step_id: step.id, approve: approving,
                         request_id: requestId("confirm") })) return;
        card.setAttribute("aria-busy", "true");
        card.classList.add("is-busy");
        approve.disabled = deny.disabled = true;
        choice.textContent = approving ? "Approving…" : "Declining…";
        self.pendingCard = { card: card, approve: approve, deny: deny };
        self.setActive(self.rootOf(step.run_id));
      });
      buttons.appendChild(choice);
    });
    // A plan may be answered with what to change instead (plans.js): the model revises it and asks again.
    if (Steps.isPlan(step) && this.planCommentForm) {
      card.classList.add("is-plan");
      card.appendChild(this.planCommentForm(step, card, approve, deny));
    } else if (this.argumentsForm && !Steps.isDelegation(step) && !(this.agentChat && this.agentChat())) {
      // Its values may be corrected before approving (approvals.js); not an agent's call, which its agent runs.
      var edit = this.argumentsForm(step, card, approve, deny);
      if (edit) card.appendChild(edit);
    }
    run.cards[step.seq] = card;
    row.parentNode.insertBefore(card, row.nextSibling);
    // A past run may still wait (several of the person's agent's calls can): its steps open to show the card.
    var folded = card.closest("details.assistant-run-steps");
    if (folded) folded.open = true;
    if (visible(card)) {
      approve.focus();
      card.scrollIntoView({ block: "nearest" });
    }
    this.announce("Approval needed: " + asker + Steps.question(step, tool) + (why ? " " + why : ""));
  };

  // A card asked because the run read text someone else wrote (containment, docs/security.md) says so, and
  // shows the whole of what would be written, each argument open and uncut: the person approves the text
  // itself, not a sentence about it. Returns the why, or "" for an ordinary card.
  Conversation.prototype.containmentNotice = function (step, card) {
    var containment = step.containment;
    if (!containment || !containment.why) return "";
    card.classList.add("is-contained");
    var notice = card.appendChild(el("p", "assistant-confirm-why", containment.why));
    notice.setAttribute("role", "note");
    notice.setAttribute("data-confirm-why", "");
    var heading = card.appendChild(el("p", "assistant-confirm-written", "What will be written:"));
    heading.id = "assistant-written-" + step.id;
    var written = card.appendChild(el("dl", "assistant-confirm-arguments"));
    written.setAttribute("aria-labelledby", heading.id);
    written.setAttribute("data-confirm-arguments", "");
    var values = step.arguments || {};
    Object.keys(values).forEach(function (name) {
      var value = values[name];
      written.appendChild(el("dt", null, name));
      written.appendChild(el("dd", null, typeof value === "string" ? value : JSON.stringify(value)));
    });
    card.setAttribute("aria-label", card.getAttribute("aria-label") + ". " + containment.why);
    return containment.why;
  };

  // The card as it was before its answer was refused (`refused`: the error); values that did not fit say why,
  // on the card (then true: nothing more to say elsewhere).
  Conversation.prototype.restoreCard = function (refused) {
    var pending = this.pendingCard;
    this.pendingCard = null;
    if (!pending || !pending.card.isConnected) return false;
    pending.card.removeAttribute("aria-busy");
    pending.card.classList.remove("is-busy");
    pending.approve.disabled = pending.deny.disabled = false;
    pending.approve.textContent = "Approve";
    pending.deny.textContent = "Deny";
    if (pending.comment) { pending.comment.disabled = false; pending.comment.textContent = "Send changes"; }
    if (pending.changed) { pending.changed.disabled = false; pending.changed.textContent = "Approve with changes"; }
    this.setActive(null);
    if (refused && refused.code === "invalid_arguments" && pending.fields && this.showArgumentProblems) {
      this.showArgumentProblems(pending, refused.fields, refused.message);
      return true;
    }
    return false;
  };

  Conversation.prototype.finishRun = function (runId, node) {
    var run = this.runs[runId];
    var self = this;
    if (run) {
      var thinking = run.list.querySelector(":scope > .assistant-thinking");
      if (thinking) thinking.remove();
      if (run.draft) { run.draft.remove(); run.draft = null; }
      run.ended = true;
      // The tree ended with it: a member whose end was not heard (a lost event) is no longer at work.
      Object.keys(this.runs).forEach(function (key) {
        var member = self.runs[key];
        if (member.member && member.rootId === runId && !member.ended) self.finishMember(member.id, "ended");
      });
      this.countSteps(run);
    }
    if (node) this.append(node);
    if (this.activeRun === runId) this.setActive(null);
    this.refreshRetry();
    // What the run did may have changed the page's object (renamed, archived, deleted): ask again.
    if (run && !run.member && this.askPage) this.askPage();
  };

  Conversation.prototype.reportChange = function (event) {
    var step = event.step;
    if (step.took_effect !== true || step.state !== "finished" || reportedChanges[step.id]) return;
    if (Steps.isDelegation(step)) return;  // what its member changed was reported by the member's own steps
    reportedChanges[step.id] = true;
    document.body.dispatchEvent(new CustomEvent("assistant:changed", {
      bubbles: true,
      detail: { run_id: event.run_id, chat_id: event.chat_id, tools: [step.tool_name],
                models: Array.isArray(step.changes) ? step.changes.slice() : [] },
    }));
  };

  // --- The count of events: a missing number is an event lost on the way -------------------------------

  Conversation.prototype.restartCount = function () {
    var sequence = this.sequence;
    clearTimeout(sequence.timer);
    sequence.last = sequence.highest = sequence.timer = null;
    sequence.waiting = {};
  };

  // A load's answer holds every event numbered up to its `event_seq`.
  Conversation.prototype.countFrom = function (number) {
    var sequence = this.sequence;
    if (typeof number !== "number") return;  // the server could not say: keep counting as before
    if (sequence.last === null || number > sequence.last) sequence.last = number;
    if (sequence.highest === null || number > sequence.highest) sequence.highest = number;
    this.countForward();
  };

  Conversation.prototype.count = function (number) {
    var sequence = this.sequence;
    if (sequence.last === null) {  // nothing loaded yet: count from here
      sequence.last = sequence.highest = number;
      return;
    }
    if (number <= sequence.last) {
      // Counted already (or covered by a load) — unless the count began again at 1: Redis lost it (a
      // restart, or a day without events). Start afresh, and reload: what happened meanwhile may be lost.
      if (number !== 1) return;
      this.sequence.restarts += 1;
      this.restartCount();
      sequence.last = sequence.highest = 1;
      this.catchUp();
      return;
    }
    if (number > sequence.highest) sequence.highest = number;
    if (number === sequence.last + 1) sequence.last = number;
    else sequence.waiting[number] = Date.now();
    this.countForward();
  };

  Conversation.prototype.countForward = function () {
    var sequence = this.sequence;
    var self = this;
    Object.keys(sequence.waiting).forEach(function (number) {
      if (Number(number) <= sequence.last) delete sequence.waiting[number];
    });
    while (sequence.waiting[sequence.last + 1] !== undefined) {
      delete sequence.waiting[sequence.last + 1];
      sequence.last += 1;
    }
    var since = Object.keys(sequence.waiting).map(function (number) { return sequence.waiting[number]; });
    clearTimeout(sequence.timer);
    sequence.timer = null;
    if (!since.length) return;
    // The oldest number still waiting for its predecessors decides when the gap counts as a loss.
    var wait = Math.max(0, Math.min.apply(null, since) + GAP_WAIT_MS - Date.now());
    sequence.timer = setTimeout(function () {
      sequence.timer = null;
      if (!Object.keys(sequence.waiting).length) return;
      if (Math.min.apply(null, Object.keys(sequence.waiting).map(function (n) { return sequence.waiting[n]; })) +
          GAP_WAIT_MS > Date.now()) return self.countForward();
      sequence.gaps += 1;
      self.catchUp();
    }, wait);
  };

  // Events were lost: the server's rows are the truth. The reload covers every number seen so far.
  Conversation.prototype.catchUp = function () {
    var sequence = this.sequence;
    clearTimeout(sequence.timer);
    sequence.timer = null;
    sequence.waiting = {};
    if (sequence.highest !== null && (sequence.last === null || sequence.highest > sequence.last)) {
      sequence.last = sequence.highest;
    }
    this.reload();
    if (this.listChats) this.listChats();
  };

  // --- Events from the server ---------------------------------------------------------------------------

  Conversation.prototype.handle = function (event) {
    if (typeof event.event_seq === "number" && event.type !== "assistant.messages_loaded") this.count(event.event_seq);
    // What changed the person's data is news for the page whichever chat it happened in.
    if (event.type === "assistant.step" && event.step) this.reportChange(event);
    switch (event.type) {
      case "assistant.messages_loaded":
        if (requestKind(event) === "older") return this.prependPage(event);
        if (event.request_id !== this.currentLoad) return undefined;  // an answer for a chat no longer shown
        this.countFrom(event.event_seq);
        return this.load(event);
      case "assistant.chats_listed": return this.showChats(event);
      case "assistant.chat_updated": return this.chatUpdated(event.chat || this.chats[event.chat_id]);
      case "assistant.chat_deleted": return this.chatDeleted(event.chat_id);
      case "assistant.feedback_saved": return this.feedbackSaved(event);
      case "assistant.sent": return this.sent(event);
      case "assistant.error": return this.error(event);
      case "assistant.page_context": return this.showPageContext ? this.showPageContext(event) : undefined;
      case "assistant.resync":  // events were lost or withheld: redraw this chat from the server's rows
        return this.catchUp();
      case "assistant.thread_changed":  // another branch is read now (here or in another tab)
        return this.threadChanged ? this.threadChanged(event) : undefined;
      default:
        break;
    }
    if (event.chat_id === undefined || event.chat_id !== this.chatId) return undefined;  // another chat's
    // An event about a member's run names the run that asked it: it belongs nested in that run's steps, and
    // its end is the member's alone (the run that asked it goes on, and says so in its own step).
    var member = typeof event.member === "string" && event.parent_run_id !== undefined && event.parent_run_id !== null;
    if (member) this.memberRun(event);
    switch (event.type) {
      case "assistant.step": return this.showStep(event.step, true);
      case "assistant.plan": return this.showPlan ? this.showPlan(event.plan, true) : undefined;
      case "assistant.confirm":
        if (event.tool && event.tool.name) this.tools[event.tool.name] = event.tool;
        return this.showStep(event.step, true);
      case "assistant.token":
        // A member whose answer is to be the reply (a handoff) writes to the person: its text streams as the reply.
        if (member && !event.answers_person) return this.memberDraft(event);
        return this.streamReply(event);
      case "assistant.replied": {
        this.finishRun(event.run_id, this.renderMessage(event.message));
        this.showAllowance(event.allowance);
        var who = event.message.member ? memberLabel(event.message.member) : "The assistant replied";
        return this.announce(who + ": " + event.message.content.slice(0, 300));
      }
      case "assistant.reply_failed": {
        if (member) {
          this.finishMember(event.run_id, "failed");
          return this.announce(event.member + " could not finish: " + event.error);
        }
        var failed = el("li", "assistant-message is-error");
        failed.appendChild(el("div", "assistant-message-body", event.error));
        this.finishRun(event.run_id, failed);
        return this.announce("The assistant could not answer: " + event.error);
      }
      case "assistant.cancelled":
        if (member) return this.finishMember(event.run_id, "stopped");
        this.finishRun(event.run_id, el("li", "assistant-note", (event.run && event.run.error) || "Stopped."));
        return this.announce("Stopped.");
      case "assistant.thread_failed":
        // The chat is gone (deleted in another tab, say): show the person's current one instead.
        this.chatId = null;
        return this.reload();
      default:
        return undefined;
    }
  };

  Conversation.prototype.sent = function (event) {
    if (event.run) this.noteAgentRuns(event.chat_id, [event.run]);
    if (event.chat) this.chatUpdated(event.chat, true);
    var mine = this.mySends[event.request_id] !== undefined;
    delete this.mySends[event.request_id];
    if (mine && event.message && (event.message.attachments || []).length && this.attachmentsSent) this.attachmentsSent();
    if (event.chat_id !== this.chatId) {
      // Another tab's message in another chat stays there; this tab's own send (or a first chat) is followed.
      // A call of the person's own agent is news in the list only: it never takes them from where they are.
      var agents = Conversation.helpers.isAgentChat(event.chat);
      if (agents || (!mine && (this.chatId !== null || this.newChat))) return;
      this.chatId = event.chat_id;
      this.newChat = false;
      this.thread.textContent = "";
      this.runs = {};
      this.hasMore = false;
      this.showTitle(event.chat);
      this.markCurrentChat();
      this.showComposer();
    }
    // An edit, or a question answered again: the thread is cut where the new branch starts (branches.js).
    if (this.followBranch && !this.followBranch(event)) return;
    this.bubble(event.message);
    this.run(event.run_id);
    // The agent's calls are not the person's to stop from a composer they do not have here.
    if (!this.agentChat()) this.setActive(event.run_id);
  };

  Conversation.prototype.error = function (event) {
    var kind = requestKind(event);
    if (event.code === "unknown_type") {
      // A server without this part of the protocol: hide the control instead of offering what cannot work.
      if (kind === "page") { if (this.pageBox) this.pageBox.hidden = true; this.page = null; return undefined; }
      if (kind === "chats" || kind === "rename" || kind === "delete") return this.disableChats();
      if (kind === "feedback") {
        this.root.classList.add("assistant-no-feedback");
        this.thread.querySelectorAll(".assistant-feedback-form").forEach(function (node) { node.remove(); });
        return this.announce("Feedback is not available here.");
      }
    }
    if (kind === "feedback" && this.pendingFeedback[event.request_id]) {
      var refused = this.pendingFeedback[event.request_id];
      if (refused.actions.isConnected) this.showFeedback(refused.actions, refused.previous);
    }
    delete this.pendingFeedback[event.request_id];
    // A page cursor the server no longer knows (the chat was deleted meanwhile): start again from the top.
    if (kind === "chats" && event.code === "not_found") { this.chatsBefore = null; this.listChats(); return undefined; }
    if (kind === "older") { this.loadingOlder = false; this.hasMore = false; this.showOlderButton(); }
    if (kind === "confirm") {
      // Values the card's form sent that do not fit: said on the card, beside each field (approvals.js).
      if (this.restoreCard(event)) return undefined;
    }
    if (kind === "edit" && this.editRefused) this.editRefused(event);
    if (kind === "branch") this.branchLoading = false;
    if (kind === "send" && this.mySends[event.request_id] !== undefined) {
      // Refused (still working, too fast, too long): the text comes back rather than being lost.
      if (!this.input.value.trim()) this.input.value = this.mySends[event.request_id];
      delete this.mySends[event.request_id];
    }
    // A card answered elsewhere (another tab) or gone: redraw what the run is waiting on now.
    if (event.code === "stale_confirmation") this.reload();
    this.setStatus(event.message, "is-error");
    this.announce(event.message);
    return undefined;
  };

  Conversation.prototype.renderHistory = function (messages, runs) {
    var fragment = document.createDocumentFragment();
    var self = this;
    var placed = {};
    // The member runs of each top run, parents before the members they asked (ids grow with time).
    var trees = {};
    Object.keys(runs).map(Number).sort(function (a, b) { return a - b; }).forEach(function (id) {
      var root = runs[id].root_run_id;
      if (runs[id].parent_run_id && root) (trees[root] = trees[root] || []).push(runs[id]);
    });
    var placeRun = function (runId) {
      if (!runId || placed[runId] || !runs[runId] || self.runs[runId]) return;
      placed[runId] = true;
      var run = self.run(runId, { past: true });
      fragment.appendChild(run.node);
      (runs[runId].steps || []).forEach(function (step) { self.showStep(step, false); });
      (trees[runId] || []).forEach(function (member) { self.showMember(member, true); });
      if (runs[runId].plan && self.showPlan) self.showPlan(runs[runId].plan, false);
      self.countSteps(run);
    };
    messages.forEach(function (message) {
      if (self.thread.querySelector('.assistant-message[data-message-id="' + message.id + '"]')) return;
      if (message.role === "assistant") placeRun(message.run_id);
      fragment.appendChild(self.renderMessage(message));
      if (message.role === "user") {
        placeRun(message.run_id);
        // A run that answered it again, on this branch: the server names the question each run answers here.
        Object.keys(runs).forEach(function (id) { if (runs[id].question_id === message.id) placeRun(Number(id)); });
      }
    });
    return fragment;
  };

  Conversation.prototype.load = function (state) {
    this.thread.textContent = "";
    this.runs = {};
    this.heard = {};
    this.messages = {};
    this.chatId = state.chat ? state.chat.id : null;
    this.newChat = false;
    if (state.chat) {
      this.chats[state.chat.id] = Object.assign({}, this.chats[state.chat.id] || {}, state.chat);
      this.noteAgentRuns(state.chat.id, [state.active_run].concat(state.runs || []));
    }
    this.showTitle(state.chat);
    this.markCurrentChat();
    this.showComposer();
    // Little left of the allowance is said again after a reload, as the last reply said it.
    if ("allowance" in state) this.showAllowance(state.allowance);
    // The tool a waiting card would run, as its `assistant.confirm` said it (its form of values needs it).
    if (state.pending_tool && state.pending_tool.name) this.tools[state.pending_tool.name] = state.pending_tool;
    var active = state.active_run;
    var runs = {};
    (state.runs || []).forEach(function (run) {
      // The active run and its members are drawn from `steps` and `members`, as they are now.
      if (!active || (run.id !== active.id && run.root_run_id !== active.id)) runs[run.id] = run;
    });
    if (!state.messages.length) this.showEmpty();
    else this.thread.appendChild(this.renderHistory(state.messages, runs));
    if (this.showSuggestions) this.showSuggestions();
    this.oldestId = state.messages.length ? state.messages[0].id : undefined;
    this.hasMore = state.has_more === true;
    this.loadingOlder = false;
    this.showOlderButton();
    this.setActive(null);
    if (active) {
      var self = this;
      this.run(active.id);
      if (!this.agentChat()) this.setActive(active.id);
      (state.steps || []).forEach(function (step) { self.showStep(step, false); });
      // A member waiting for the person's answer frees the input as its top run's own question does.
      (state.members || []).forEach(function (member) { self.showMember(member, false); });
      if (state.plan && this.showPlan) this.showPlan(state.plan, false);
      // A run waiting for the person's answer does not hold the input: a new message may replace it.
      if (active.status === "awaiting_confirmation") this.setActive(null);
    }
    this.refreshRetry();
    this.stick = true;
    this.thread.scrollTop = this.thread.scrollHeight;
    if (this.focusBranch) this.focusBranch();  // a branch the person turned to: the focus back on its switcher
  };

  // A page of older history: prepended, and the person's view stays where it was.
  Conversation.prototype.prependPage = function (page) {
    this.loadingOlder = false;
    if (!page.chat || page.chat.id !== this.chatId) return;
    var runs = {};
    (page.runs || []).forEach(function (run) { runs[run.id] = run; });
    var height = this.thread.scrollHeight;
    var top = this.thread.scrollTop;
    var older = this.thread.querySelector(".assistant-older");
    var fragment = this.renderHistory(page.messages, runs);
    this.thread.insertBefore(fragment, older ? older.nextSibling : this.thread.firstChild);
    if (page.messages.length) this.oldestId = page.messages[0].id;
    this.hasMore = page.has_more === true && page.messages.length > 0;
    this.showOlderButton();
    this.thread.scrollTop = top + (this.thread.scrollHeight - height);
  };

  Conversation.prototype.showOlderButton = function () {
    var older = this.thread.querySelector(".assistant-older");
    if (!this.hasMore) { if (older) older.remove(); return; }
    if (older) return;
    older = el("li", "assistant-older");
    older.appendChild(button("Show older messages", "assistant-button", { "data-assistant-older": "" }));
    this.thread.insertBefore(older, this.thread.firstChild);
  };

  // --- Answers: feedback, copy, retry ---------------------------------------------------------------------

  Conversation.prototype.onThreadClick = function (event) {
    var target = event.target.closest("button");
    if (!target || !this.thread.contains(target)) return;
    var item = target.closest(".assistant-message");
    if (target.hasAttribute("data-assistant-older")) return this.loadOlder();
    if (target.hasAttribute("data-retry")) return this.retryLast();
    if (this.onBranchClick && this.onBranchClick(target, item)) return undefined;
    if (target.hasAttribute("data-plan-step-link") && this.showPlanStep) return this.showPlanStep(target);
    if (target.hasAttribute("data-copy") && item) return this.copy(item, target);
    if (target.hasAttribute("data-feedback") && item) return this.thumb(item, target.getAttribute("data-feedback"));
    return undefined;
  };

  Conversation.prototype.thumb = function (item, which) {
    var message = this.messages[item.dataset.messageId];
    if (!message || !message.run_id) return;
    var actions = item.querySelector(".assistant-message-actions");
    var wanted = which === "up" ? 1 : -1;
    var score = Number(actions.dataset.score) === wanted ? 0 : wanted;
    var id = requestId("feedback");
    if (!this.send({ type: "assistant.feedback", run_id: message.run_id, score: score, request_id: id })) return;
    // Shown at once; a refusal puts back what the server holds.
    this.pendingFeedback[id] = { message: message, actions: actions, previous: message.feedback || null };
    this.showFeedback(actions, score ? { score: score, comment: "" } : null);
    var form = item.querySelector(".assistant-feedback-form");
    if (form) form.remove();
    if (score !== 0) item.appendChild(this.feedbackForm(message, score)).scrollIntoView({ block: "nearest" });
  };

  Conversation.prototype.feedbackForm = function (message, score) {
    var form = el("form", "assistant-feedback-form");
    var id = "assistant-feedback-" + message.id + "-" + tabId;
    var label = form.appendChild(el("label", null, score > 0 ? "What was good? (optional)" : "What went wrong? (optional)"));
    label.htmlFor = id;
    var text = form.appendChild(el("textarea"));
    text.id = id;
    text.rows = 2;
    text.maxLength = 2000;
    text.setAttribute("data-feedback-comment", "");
    var send = form.appendChild(el("button", "assistant-button", "Send feedback"));
    send.type = "submit";
    send.setAttribute("data-feedback-send", "");
    form.dataset.score = String(score);
    return form;
  };

  Conversation.prototype.sendFeedbackComment = function (form) {
    var item = form.closest(".assistant-message");
    var message = this.messages[item.dataset.messageId];
    var comment = form.querySelector("[data-feedback-comment]").value.trim();
    if (!this.send({ type: "assistant.feedback", run_id: message.run_id, score: Number(form.dataset.score),
                     comment: comment, request_id: requestId("feedback") })) return;
    var thanks = el("p", "assistant-note", "Thank you for your feedback.");
    form.replaceWith(thanks);
    this.announce("Thank you for your feedback.");
  };

  Conversation.prototype.feedbackSaved = function (event) {
    var self = this;
    Object.keys(this.pendingFeedback).forEach(function (id) {
      if (self.pendingFeedback[id].message.run_id === event.run_id) delete self.pendingFeedback[id];
    });
    var item = this.thread.querySelector('.assistant-message[data-message-id="' + event.message_id + '"]');
    if (this.messages[event.message_id]) this.messages[event.message_id].feedback = event.feedback;
    var actions = item && item.querySelector(".assistant-message-actions");
    if (actions && actions.querySelector("[data-feedback]")) this.showFeedback(actions, event.feedback);
  };

  Conversation.prototype.copy = function (item, target) {
    var message = this.messages[item.dataset.messageId];
    var text = message ? message.content : item.querySelector(".assistant-message-body").textContent;
    var self = this;
    var done = function () {
      target.textContent = "Copied";
      self.announce("Answer copied.");
      setTimeout(function () { target.textContent = "Copy"; }, 2000);
    };
    var fallback = function () {
      var area = el("textarea");
      area.value = text;
      area.setAttribute("readonly", "");
      area.style.position = "fixed";
      area.style.opacity = "0";
      document.body.appendChild(area);
      area.select();
      var ok = false;
      try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
      area.remove();
      target.focus();
      if (ok) done(); else self.announce("Copying is not allowed here; select the answer's text instead.");
    };
    if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).then(done, fallback);
    else fallback();
  };

  Conversation.helpers = { el: el, button: button, iconButton: iconButton, requestId: requestId };
  window.AssistantConversation = Conversation;

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-assistant-conversation]").forEach(function (root) {
      if ("WebSocket" in window) root.assistantConversation = new Conversation(root);
    });
  });
})();
