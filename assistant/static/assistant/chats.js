// The person's conversations: the list (a drawer in the dock, a side column on the page), new chat,
// switching without a reload, rename and delete (asked in the page). Part of the conversation client
// (conversation.js): these are its methods, over the same socket.
(function () {
  "use strict";

  var Conversation = window.AssistantConversation;
  var el = Conversation.helpers.el;
  var button = Conversation.helpers.button;
  var iconButton = Conversation.helpers.iconButton;
  var requestId = Conversation.helpers.requestId;
  // The panel's own channel (docs/protocol.md). A chat of any other channel the person sees is the record of
  // what their own agent did as them with one of their access tokens (the server refuses sends into it, as
  // `agent_chat`), whichever optional app made it. Its title is made as "<token name> (your agent)"; the list
  // shows the name with a badge that says the same in words.
  var PANEL_CHANNEL = "panel";
  var AGENT_TITLE_SUFFIX = " (your agent)";

  function isAgentChat(chat) {
    return !!chat && !!chat.channel && chat.channel !== PANEL_CHANNEL;
  }
  Conversation.helpers.isAgentChat = isAgentChat;

  // The agent's name as its chat's title gave it, while the person has not renamed the chat.
  function agentNameFromTitle(title) {
    title = String(title || "");
    return title.slice(-AGENT_TITLE_SUFFIX.length) === AGENT_TITLE_SUFFIX ? title.slice(0, -AGENT_TITLE_SUFFIX.length) : "";
  }

  function relativeTime(iso) {
    if (!iso) return "";
    var then = new Date(iso);
    var seconds = Math.round((then.getTime() - Date.now()) / 1000);
    var units = [["year", 31536000], ["month", 2592000], ["week", 604800], ["day", 86400], ["hour", 3600], ["minute", 60]];
    if (Math.abs(seconds) < 60) return "just now";
    for (var i = 0; i < units.length; i++) {
      if (Math.abs(seconds) >= units[i][1]) {
        var value = Math.round(seconds / units[i][1]);
        if (window.Intl && Intl.RelativeTimeFormat) return new Intl.RelativeTimeFormat(undefined, { numeric: "auto" }).format(value, units[i][0]);
        return Math.abs(value) + " " + units[i][0] + (Math.abs(value) === 1 ? "" : "s") + " ago";
      }
    }
    return then.toLocaleString();
  }

  Conversation.prototype.setUpChats = function () {
    var self = this;
    var newChat = this.root.querySelector("[data-assistant-new-chat]");
    if (newChat) newChat.addEventListener("click", function () { self.startNewChat(); });
    if (this.chatsToggle && this.chatsPanel) {
      this.chatsToggle.addEventListener("click", function () { self.toggleChats(self.chatsPanel.hidden); });
    }
    if (this.chatsMore) {
      this.chatsMore.addEventListener("click", function () {
        var rows = self.chatList.querySelectorAll("[data-chat-id]");
        var last = rows[rows.length - 1];
        if (last) self.listChats(last.dataset.chatId);
      });
    }
    if (this.chatList) this.chatList.addEventListener("click", function (event) { self.onChatClick(event); });
    this.agentNote = this.root.querySelector("[data-assistant-agent-note]");
    this.agentNoteText = this.root.querySelector("[data-assistant-agent-note-text]");
    this.agentNewChat = this.root.querySelector("[data-assistant-agent-new-chat]");
    this.agentNames = {};  // chat id -> the name of the token its agent called with (from its runs' `client`)
    if (this.agentNewChat) this.agentNewChat.addEventListener("click", function () { self.startNewChat(); });
    this.root.addEventListener("keydown", function (event) {
      // Esc inside the dock's chat list closes the list, not the dock.
      if (event.key === "Escape" && self.chatsPanel && !self.chatsPanel.hidden && self.root.dataset.surface === "dock" &&
          self.chatsPanel.contains(document.activeElement) && !event.defaultPrevented) {
        event.preventDefault();
        self.toggleChats(false);
      }
    });
  };

  Conversation.prototype.toggleChats = function (open) {
    if (!this.chatsPanel) return;
    this.chatsPanel.hidden = !open;
    this.chatsToggle.setAttribute("aria-expanded", String(open));
    if (open) {
      this.listChats();
      var current = this.chatsPanel.querySelector(".is-current .assistant-chat-open") || this.chatsPanel.querySelector("button");
      if (current) current.focus();
    } else if (this.chatsPanel.contains(document.activeElement) || document.activeElement === document.body) {
      this.chatsToggle.focus();
    }
  };

  Conversation.prototype.listChats = function (before) {
    if (!this.chatList || this.root.classList.contains("assistant-no-chats")) return;
    var event = { type: "assistant.chats", limit: 30, request_id: requestId("chats") };
    if (before) event.before = Number(before);
    this.chatsBefore = before || null;
    this.send(event);
  };

  Conversation.prototype.disableChats = function () {
    this.root.classList.add("assistant-no-chats");
    if (this.chatsPanel) this.chatsPanel.hidden = true;
    if (this.chatsToggle) this.chatsToggle.hidden = true;
  };

  Conversation.prototype.showChats = function (event) {
    if (!this.chatList) return;
    var self = this;
    if (!this.chatsBefore) this.chatList.textContent = "";
    (event.chats || []).forEach(function (chat) { self.chatUpdated(chat, false, true); });
    if (!this.chatList.children.length) this.chatList.appendChild(el("li", "assistant-chat-none", "No conversations yet."));
    if (this.chatsMore) this.chatsMore.hidden = event.has_more !== true;
    this.markCurrentChat();
  };

  Conversation.prototype.chatRow = function (chat) {
    var row = el("li", "assistant-chat-row");
    row.dataset.chatId = chat.id;
    var open = row.appendChild(button("", "assistant-chat-open"));
    if (isAgentChat(chat)) {
      // Said in words, not by an icon alone: the badge is part of the button's name for a screen reader.
      row.classList.add("is-agent");
      var line = open.appendChild(el("span", "assistant-chat-name-line"));
      line.appendChild(el("span", "assistant-chat-name", agentNameFromTitle(chat.title) || chat.title || "Untitled chat"));
      line.appendChild(el("span", "assistant-visually-hidden", ", "));
      line.appendChild(el("span", "assistant-badge assistant-chat-badge", "Your agent"));
    } else {
      open.appendChild(el("span", "assistant-chat-name", chat.title || "Untitled chat"));
    }
    var time = open.appendChild(el("time", "assistant-chat-time"));
    var when = chat.last_activity || chat.updated_at;
    time.setAttribute("datetime", when || "");
    time.dataset.time = when || "";
    time.textContent = relativeTime(when);
    if (when) time.title = new Date(when).toLocaleString();
    var name = chat.title || "Untitled chat";
    row.appendChild(iconButton("rename", "Rename “" + name + "”", { "data-chat-rename": "" }));
    row.appendChild(iconButton("trash", "Delete “" + name + "”", { "data-chat-delete": "" }));
    return row;
  };

  // A chat was created, renamed or became active: its row is drawn anew (at the top when it is news).
  Conversation.prototype.chatUpdated = function (chat, toTop, append) {
    if (!chat) return;
    this.chats[chat.id] = Object.assign({}, this.chats[chat.id] || {}, chat);
    chat = this.chats[chat.id];
    if (chat.id === this.chatId) this.showTitle(chat);
    if (!this.chatList) return;
    var none = this.chatList.querySelector(".assistant-chat-none");
    if (none) none.remove();
    var existing = this.chatList.querySelector('[data-chat-id="' + chat.id + '"]');
    if (existing && existing.querySelector(".assistant-chat-rename-form")) return;  // being renamed: leave it
    var row = this.chatRow(chat);
    // A row redrawn under the person's focus (their agent's call moved its chat to the top, say) keeps it on
    // the same control: news in the list never takes the person elsewhere.
    var focused = existing && existing.contains(document.activeElement) ? document.activeElement : null;
    var control = focused && (focused.classList.contains("assistant-chat-open") ? ".assistant-chat-open" :
      focused.hasAttribute("data-chat-rename") ? "[data-chat-rename]" : focused.hasAttribute("data-chat-delete") ? "[data-chat-delete]" : null);
    if (existing && !toTop) existing.replaceWith(row);
    else {
      if (existing) existing.remove();
      if (append) this.chatList.appendChild(row);
      else this.chatList.insertBefore(row, this.chatList.firstChild);
    }
    if (control && row.querySelector(control)) row.querySelector(control).focus();
    this.markCurrentChat();
    if (chat.id === this.chatId) this.showComposer();
  };

  Conversation.prototype.chatDeleted = function (chatId) {
    delete this.chats[chatId];
    var row = this.chatList && this.chatList.querySelector('[data-chat-id="' + chatId + '"]');
    var hadFocus = row && row.contains(document.activeElement);
    if (row) row.remove();
    if (chatId === this.chatId) this.startNewChat(!hadFocus);
    if (hadFocus && this.chatsToggle) (this.chatList.querySelector("button") || this.chatsToggle).focus();
    this.announce("Conversation deleted.");
  };

  Conversation.prototype.markCurrentChat = function () {
    var self = this;
    if (!this.chatList) return;
    this.chatList.querySelectorAll("[data-chat-id]").forEach(function (row) {
      var current = Number(row.dataset.chatId) === self.chatId;
      row.classList.toggle("is-current", current);
      var open = row.querySelector(".assistant-chat-open");
      if (open) { if (current) open.setAttribute("aria-current", "true"); else open.removeAttribute("aria-current"); }
    });
  };

  // Whether the chat shown is one of the person's own agent (never a new chat about to start).
  Conversation.prototype.agentChat = function () {
    return !this.newChat && this.chatId !== null && isAgentChat(this.chats[this.chatId]);
  };

  // The composer for a chat the person talks in; in a chat of their agent, a note in its place that says
  // whose record it is, with a way to a chat of their own (the server refuses a message there anyway).
  Conversation.prototype.showComposer = function () {
    var agent = this.agentChat();
    this.root.classList.toggle("is-agent-chat", agent);
    this.form.hidden = agent;
    if (!this.agentNote) return;
    this.agentNote.hidden = !agent;
    if (!agent) return;
    var chat = this.chats[this.chatId];
    var name = this.agentNames[this.chatId] || agentNameFromTitle(chat.title);
    this.agentNoteText.textContent = "This chat shows what " + (name ? "your agent “" + name + "”" : "your agent") +
      " did as you. Start a new chat to talk to the assistant.";
  };

  // A run of an agent's chat names the token it called with: the note says that name, whatever the title.
  Conversation.prototype.noteAgentRuns = function (chatId, runs) {
    var self = this;
    (runs || []).forEach(function (run) {
      if (run && run.channel && run.channel !== PANEL_CHANNEL && run.client) self.agentNames[chatId] = run.client;
    });
  };

  // Where focus goes in a chat just shown: the composer, or in an agent's chat the way out of it.
  Conversation.prototype.focusComposer = function () {
    if (this.agentChat() && this.agentNewChat) this.agentNewChat.focus();
    else this.input.focus();
  };

  Conversation.prototype.showTitle = function (chat) {
    if (this.title) this.title.textContent = chat ? (chat.title || "Untitled chat") : "New chat";
  };

  Conversation.prototype.refreshTimes = function () {
    this.root.querySelectorAll("time[data-time]").forEach(function (node) { node.textContent = relativeTime(node.dataset.time); });
  };

  Conversation.prototype.startNewChat = function (focus) {
    this.chatId = null;
    this.newChat = true;
    this.runs = {};
    this.messages = {};
    this.hasMore = false;
    this.currentLoad = null;
    this.showEmpty();
    this.showTitle(null);
    this.setActive(null);
    this.markCurrentChat();
    this.showComposer();
    if (this.root.dataset.surface === "dock" && this.chatsPanel && !this.chatsPanel.hidden) this.toggleChats(false);
    if (focus !== false) this.input.focus();
  };

  Conversation.prototype.openChat = function (chatId) {
    if (this.root.dataset.surface === "dock") this.toggleChats(false);
    if (chatId !== this.chatId || this.newChat) {
      this.chatId = chatId;
      this.newChat = false;
      this.showTitle(this.chats[chatId]);
      this.markCurrentChat();
      this.showComposer();
      this.thread.textContent = "";
      this.thread.appendChild(el("li", "assistant-empty", "Loading…"));
      this.reload();
    }
    this.focusComposer();
  };

  Conversation.prototype.onChatClick = function (event) {
    var target = event.target.closest("button");
    var row = event.target.closest("[data-chat-id]");
    if (!target || !row) return;
    var chatId = Number(row.dataset.chatId);
    if (target.classList.contains("assistant-chat-open")) return this.openChat(chatId);
    if (target.hasAttribute("data-chat-rename")) return this.renameChat(row, chatId);
    if (target.hasAttribute("data-chat-delete")) return this.askDelete(row, chatId);
    return undefined;
  };

  Conversation.prototype.renameChat = function (row, chatId) {
    var self = this;
    var chat = this.chats[chatId] || {};
    var form = el("form", "assistant-chat-rename-form");
    var input = form.appendChild(el("input"));
    input.type = "text";
    input.value = chat.title || "";
    input.maxLength = 200;
    input.required = true;
    input.setAttribute("aria-label", "New title for “" + (chat.title || "Untitled chat") + "”");
    form.appendChild(button("Save", "assistant-button assistant-button-small")).type = "submit";
    var cancel = form.appendChild(button("Cancel", "assistant-button assistant-button-small"));
    var restore = function () { self.chatUpdated(chat); var again = self.chatList.querySelector('[data-chat-id="' + chatId + '"] [data-chat-rename]'); if (again) again.focus(); };
    cancel.addEventListener("click", function () { form.remove(); restore(); });
    input.addEventListener("keydown", function (event) {
      if (event.key === "Escape") { event.preventDefault(); event.stopPropagation(); form.remove(); restore(); }
    });
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var title = input.value.trim();
      if (!title) { input.focus(); return; }
      self.send({ type: "assistant.chat_rename", chat_id: chatId, title: title, request_id: requestId("rename") });
      form.remove();
      self.chatUpdated(Object.assign({}, chat, { title: title }));
      var again = self.chatList.querySelector('[data-chat-id="' + chatId + '"] [data-chat-rename]');
      if (again) again.focus();
    });
    row.textContent = "";
    row.appendChild(form);
    input.focus();
    input.select();
  };

  Conversation.prototype.askDelete = function (row, chatId) {
    var self = this;
    var chat = this.chats[chatId] || {};
    var box = el("div", "assistant-chat-confirm");
    box.setAttribute("role", "group");
    box.setAttribute("aria-label", "Delete this conversation?");
    box.appendChild(el("p", null, "Delete “" + (chat.title || "Untitled chat") + "”? It leaves your list; staff keep its record."));
    var yes = box.appendChild(button("Delete", "assistant-button assistant-button-small assistant-button-danger", { "data-chat-delete-confirm": "" }));
    var no = box.appendChild(button("Cancel", "assistant-button assistant-button-small"));
    yes.addEventListener("click", function () {
      yes.disabled = no.disabled = true;
      self.send({ type: "assistant.chat_delete", chat_id: chatId, request_id: requestId("delete") });
    });
    no.addEventListener("click", function () { self.chatUpdated(chat); var again = self.chatList.querySelector('[data-chat-id="' + chatId + '"] [data-chat-delete]'); if (again) again.focus(); });
    box.addEventListener("keydown", function (event) {
      if (event.key === "Escape") { event.preventDefault(); event.stopPropagation(); no.click(); }
    });
    row.textContent = "";
    row.appendChild(box);
    no.focus();
  };
})();
