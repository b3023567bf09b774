// The page the panel is open on: what the assistant sees of it ("About: project “Home”"), sent with the next
// message unless the person dismisses it, and a few suggestions of what can be done there. Part of the
// conversation client (conversation.js): these are its methods, over the same socket (docs/protocol.md,
// "assistant.page"). A suggestion is sent as it is when clicked: it is a request the person can read before
// choosing it, and the step it leads to is shown (and asked about, if it changes much) like any other.
(function () {
  "use strict";

  var Conversation = window.AssistantConversation;
  if (!Conversation) return;
  var el = Conversation.helpers.el;
  var requestId = Conversation.helpers.requestId;

  Conversation.prototype.setUpPage = function () {
    var self = this;
    this.pageBox = this.root.querySelector("[data-assistant-page-context]");
    this.aboutLine = this.root.querySelector("[data-assistant-about]");
    this.aboutText = this.root.querySelector("[data-assistant-about-text]");
    this.aboutDismiss = this.root.querySelector("[data-assistant-about-dismiss]");
    this.suggestionList = this.root.querySelector("[data-assistant-suggestions]");
    // The dock is about the page behind it; the full assistant page is about nothing else.
    this.page = this.root.dataset.surface === "dock" ? window.location.pathname : null;
    this.pageDismissed = false;
    this.sentFromPage = false;  // once something was asked here, the suggestions make way for the thread
    if (!this.pageBox) return;
    this.aboutDismiss.addEventListener("click", function () {
      self.pageDismissed = true;
      self.aboutLine.hidden = true;
      self.announce("The page will not be sent with your next message.");
      self.input.focus();
    });
    this.suggestionList.addEventListener("click", function (event) {
      var choice = event.target.closest("[data-suggestion]");
      if (!choice || self.activeRun) return;
      if (self.sendText(choice.dataset.suggestion)) self.input.focus();
    });
  };

  Conversation.prototype.askPage = function () {
    if (!this.pageBox) return;
    var event = { type: "assistant.page", page: this.page, request_id: requestId("page") };
    if (this.chatId !== null && !this.newChat) event.chat_id = this.chatId;
    this.send(event);
  };

  // What goes with a message: the page, unless dismissed (for this one message only).
  Conversation.prototype.pageForSend = function () {
    var page = this.pageDismissed ? null : this.page;
    this.pageDismissed = false;
    this.sentFromPage = true;
    return page;
  };

  Conversation.prototype.showPageContext = function (event) {
    if (!this.pageBox) return;
    var about = event.about;
    this.aboutText.textContent = about ? "About: " + about.text : "";
    this.aboutLine.hidden = !about || this.pageDismissed;
    this.suggestions = event.suggestions || [];
    this.showSuggestions();
  };

  // Shown in an empty chat, and on a page with an object until something is asked from it.
  Conversation.prototype.showSuggestions = function () {
    if (!this.pageBox) return;
    var empty = !!this.thread.querySelector(".assistant-empty");
    var onObject = !this.aboutText.textContent ? false : !this.sentFromPage;
    var list = this.suggestionList;
    list.textContent = "";
    var offered = (empty || onObject) ? (this.suggestions || []) : [];
    offered.forEach(function (suggestion) {
      var item = el("li");
      var choice = el("button", "assistant-suggestion", suggestion.text);
      choice.type = "button";
      choice.dataset.suggestion = suggestion.text;
      if (suggestion.source === "recent") choice.title = "Asked recently";
      choice.setAttribute("aria-label", "Ask: " + suggestion.text);
      item.appendChild(choice);
      list.appendChild(item);
    });
    list.hidden = offered.length === 0;
    this.pageBox.hidden = list.hidden && this.aboutLine.hidden;
  };
})();
