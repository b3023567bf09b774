// Changing your mind (docs/protocol.md, "Branches"): edit one of your messages and send it again, or answer a
// question again (Retry); either starts a branch beside the one you had, which is kept. A message with branches
// shows where it is among them (‹ 1 / 2 ›) and pages between them (`assistant.branch`), and says what each other
// branch did: turning away from a branch never undoes what it changed. Part of the conversation client
// (conversation.js): these are its methods.
(function () {
  "use strict";

  var Conversation = window.AssistantConversation;
  var el = Conversation.helpers.el;
  var button = Conversation.helpers.button;
  var requestId = Conversation.helpers.requestId;
  var KEEPS = "Sending starts a new branch here. This branch is kept as it is, and what it did stays done.";

  // The edit button of the person's messages, and the switcher of a message with branches: both in the message's
  // row of actions (an answer's has its thumbs and Copy), and under it what the other branches did.
  Conversation.prototype.decorateMessage = function (node, message) {
    var bar = node.querySelector(".assistant-message-actions");
    if (message.role === "user" && !(this.agentChat && this.agentChat())) {
      bar = node.appendChild(el("div", "assistant-message-actions assistant-message-edit"));
      bar.appendChild(button("Edit", "assistant-icon-button",
                             { "data-edit": "", "aria-label": "Edit this message and send it again" }));
    }
    var branch = message.branch;
    if (!branch || branch.count < 2 || !Array.isArray(branch.ids)) return;
    var switcher = this.branchSwitcher(message, branch);
    if (bar) bar.insertBefore(switcher, bar.firstChild);
    else node.appendChild(switcher);
    this.branchNotes(message, branch).forEach(function (note) { node.appendChild(note); });
  };

  function branchWord(message) {
    return message.role === "user" ? "version" : "answer";
  }

  function capitalised(text) {
    return text.charAt(0).toUpperCase() + text.slice(1);
  }

  // ‹ 2 / 2 ›: the message's place among its siblings, and a button to each neighbour.
  Conversation.prototype.branchSwitcher = function (message, branch) {
    var which = branchWord(message);
    var box = el("div", "assistant-branch");
    box.setAttribute("role", "group");
    box.setAttribute("aria-label", "Branches of this " + (message.role === "user" ? "message" : "answer"));
    var previous = box.appendChild(button("‹", "assistant-icon-button",
                                          { "data-branch": String(branch.ids[branch.position - 2] || ""),
                                            "aria-label": "Previous " + which }));
    var place = box.appendChild(el("span", "assistant-branch-place", branch.position + " / " + branch.count));
    place.setAttribute("aria-label", capitalised(which) + " " + branch.position + " of " + branch.count);
    var next = box.appendChild(button("›", "assistant-icon-button",
                                      { "data-branch": String(branch.ids[branch.position] || ""),
                                        "aria-label": "Next " + which }));
    previous.disabled = branch.position <= 1;
    next.disabled = branch.position >= branch.count;
    return box;
  };

  // What the branches not read now changed: said plainly, since reading this one undid none of it.
  Conversation.prototype.branchNotes = function (message, branch) {
    var which = capitalised(branchWord(message));
    return Object.keys(branch.did || {}).map(function (id) {
      var number = branch.ids.indexOf(Number(id)) + 1;
      var effects = branch.did[id] || [];
      if (!number || !effects.length) return null;
      var note = el("p", "assistant-branch-did", which + " " + number + " of " + branch.count + " did: " +
                    effects.join(" ") + " Reading this one does not undo it.");
      note.setAttribute("role", "note");
      return note;
    }).filter(Boolean);
  };

  // A click on a message's Edit, an editor's buttons, or a branch switcher; true when it was one of them.
  Conversation.prototype.onBranchClick = function (target, item) {
    if (target.hasAttribute("data-edit") && item) { this.openEditor(item); return true; }
    if (target.hasAttribute("data-edit-cancel") && item) { this.closeEditor(item, true); return true; }
    if (target.hasAttribute("data-branch")) {
      var id = Number(target.getAttribute("data-branch"));
      if (id && !target.disabled) this.readBranch(id);
      return true;
    }
    return false;
  };

  Conversation.prototype.openEditor = function (item) {
    if (item.querySelector(".assistant-edit-form")) return;
    var message = this.messages[item.dataset.messageId];
    if (!message) return;
    var form = el("form", "assistant-edit-form");
    var id = "assistant-edit-" + message.id;
    var label = form.appendChild(el("label", null, "Edit your message"));
    label.htmlFor = id;
    var text = form.appendChild(el("textarea"));
    text.id = id;
    text.rows = Math.min(8, Math.max(2, message.content.split("\n").length));
    text.value = message.content;
    text.setAttribute("data-edit-text", "");
    var hint = form.appendChild(el("p", "assistant-edit-hint", KEEPS));
    hint.id = id + "-hint";
    if (this.showKeptFiles) this.showKeptFiles(form, message, hint);
    text.setAttribute("aria-describedby", hint.id);
    var buttons = form.appendChild(el("div", "assistant-edit-buttons"));
    var send = buttons.appendChild(el("button", "assistant-button", "Send"));
    send.type = "submit";
    send.setAttribute("data-edit-send", "");
    buttons.appendChild(button("Cancel", "assistant-button", { "data-edit-cancel": "" }));
    item.classList.add("is-editing");
    item.appendChild(form);
    var self = this;
    form.addEventListener("submit", function (event) { event.preventDefault(); self.sendEdit(item, form); });
    text.addEventListener("keydown", function (event) {
      if (event.key === "Escape") { event.preventDefault(); self.closeEditor(item, true); }
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) { event.preventDefault(); self.sendEdit(item, form); }
    });
    text.focus();
    text.setSelectionRange(text.value.length, text.value.length);
  };

  Conversation.prototype.closeEditor = function (item, refocus) {
    var form = item.querySelector(".assistant-edit-form");
    if (form) form.remove();
    item.classList.remove("is-editing");
    var edit = item.querySelector("[data-edit]");
    if (refocus && edit) edit.focus();
  };

  Conversation.prototype.sendEdit = function (item, form) {
    var text = form.querySelector("[data-edit-text]").value.trim();
    var files = this.keptFiles ? this.keptFiles(form) : [];
    if (!text && !files.length) return;
    if (this.activeRun) {
      this.setStatus("The assistant is still working: wait for it, or stop it, before editing.", "is-error");
      return;
    }
    var id = requestId("edit");
    var event = { type: "assistant.send", content: text, chat_id: this.chatId,
                  edit_of: Number(item.dataset.messageId), request_id: id };
    if (files.length) event.attachments = files;
    var page = this.pageForSend ? this.pageForSend() : null;
    if (page) event.page = page;
    this.pendingEdits = this.pendingEdits || {};
    this.pendingEdits[id] = form;
    var send = form.querySelector("[data-edit-send]");
    if (!this.send(event)) { delete this.pendingEdits[id]; return; }
    send.disabled = true;
    send.textContent = "Sending…";
  };

  // An edit the server refused (still working, too fast): the editor keeps the text and says why.
  Conversation.prototype.editRefused = function (event) {
    var form = this.pendingEdits && this.pendingEdits[event.request_id];
    if (!form) return false;
    delete this.pendingEdits[event.request_id];
    var send = form.querySelector("[data-edit-send]");
    if (send) { send.disabled = false; send.textContent = "Send"; }
    return false;  // the status line says why, as for any refused send
  };

  // `assistant.sent` that starts a branch: the thread is cut right after the message the new one follows (an
  // edit), or after the question answered again, and goes on from there. False when the thread must come from
  // the server instead (the message it follows is not drawn here): then it is loaded again.
  Conversation.prototype.followBranch = function (event) {
    var message = event.message;
    var shown = this.thread.querySelectorAll(".assistant-message[data-message-id]");
    var last = shown.length ? Number(shown[shown.length - 1].dataset.messageId) : null;
    var cutAfter;
    if (event.answers_again) cutAfter = message.id;
    else if ((message.parent_id || null) !== last) cutAfter = message.parent_id || null;
    else return true;  // it follows what is shown: nothing to cut
    if (this.pendingEdits) delete this.pendingEdits[event.request_id];
    var from = cutAfter === null ? this.thread.firstChild
      : this.thread.querySelector('.assistant-message[data-message-id="' + cutAfter + '"]');
    if (cutAfter !== null && !from) { this.reload(); return false; }
    if (cutAfter !== null) from = from.nextSibling;
    var self = this;
    while (from) {
      var next = from.nextSibling;
      if (!from.classList.contains("assistant-older")) {
        Object.keys(this.runs).forEach(function (runId) { if (self.runs[runId].node === from || from.contains(self.runs[runId].node)) delete self.runs[runId]; });
        from.remove();
      }
      from = next;
    }
    // The editor that sent it went with the branch it was on: the composer takes the focus.
    if (!document.activeElement || document.activeElement === document.body) this.input.focus();
    return true;
  };

  Conversation.prototype.readBranch = function (messageId) {
    if (this.activeRun) {
      this.setStatus("The assistant is still working: wait for it, or stop it, before reading another branch.", "is-error");
      return;
    }
    this.currentLoad = requestId("branch");
    this.branchLoading = true;
    // Where the focus goes back to once the branch is drawn: the same message's switcher, now the chosen one's.
    this.focusAfterLoad = messageId;
    this.send({ type: "assistant.branch", message_id: messageId, request_id: this.currentLoad, limit: 50 });
  };

  // After a branch is drawn: the focus on its switcher, and its place said.
  Conversation.prototype.focusBranch = function () {
    var wanted = this.focusAfterLoad;
    this.focusAfterLoad = null;
    this.branchLoading = false;
    if (!wanted) return;
    var item = this.thread.querySelector('.assistant-message[data-message-id="' + wanted + '"]');
    var place = item && item.querySelector(".assistant-branch-place");
    if (!place) return;
    var buttons = item.querySelectorAll(".assistant-branch [data-branch]");
    var usable = Array.prototype.filter.call(buttons, function (node) { return !node.disabled; });
    if (usable.length) usable[0].focus();
    item.scrollIntoView({ block: "nearest" });
    this.announce("Showing " + place.getAttribute("aria-label").toLowerCase() + ".");
  };

  Conversation.prototype.threadChanged = function (event) {
    if (event.chat_id !== this.chatId) return;
    if (this.branchLoading) return;  // this tab's own choice, being drawn now
    var shown = this.thread.querySelectorAll(".assistant-message[data-message-id]");
    var last = shown.length ? Number(shown[shown.length - 1].dataset.messageId) : null;
    if (last !== event.leaf_id) this.reload();
  };
})();
