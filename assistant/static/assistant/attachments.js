// Files for the assistant (docs/protocol.md, "Attachments"): pick them with the paperclip, drop them on the
// conversation or paste them into the message box. Each is uploaded at once (POST to the attachments URL, the
// site's CSRF token with it) and waits above the message box as a chip until the message is sent with its id;
// a refused file says why there, in words, and nothing of it is kept. A message's files show under it: a picture
// as a small image, anything else as its name and size, each opening for its person alone. Part of the
// conversation client (conversation.js): these are its methods.
(function () {
  "use strict";

  var Conversation = window.AssistantConversation;
  var el = Conversation.helpers.el;
  var button = Conversation.helpers.button;

  function sizeWords(size) {
    if (size < 1024) return size + (size === 1 ? " byte" : " bytes");
    if (size < 1024 * 1024) return Math.round(size / 1024) + " KB";
    return (size / (1024 * 1024)).toFixed(1) + " MB";
  }

  Conversation.prototype.setUpAttachments = function () {
    var root = this.root;
    this.uploadUrl = root.dataset.assistantUploadUrl;
    this.tray = root.querySelector("[data-assistant-attachments]");
    this.fileInput = root.querySelector("[data-assistant-file]");
    var attach = root.querySelector("[data-assistant-attach]");
    if (!this.uploadUrl || !this.tray || !this.fileInput || !attach) return;
    this.waiting = [];  // {chip, id (once uploaded), name, failed}
    var self = this;
    attach.addEventListener("click", function () { self.fileInput.click(); });
    this.fileInput.addEventListener("change", function () {
      self.addFiles(self.fileInput.files);
      self.fileInput.value = "";
    });
    this.input.addEventListener("paste", function (event) {
      var files = event.clipboardData && event.clipboardData.files;
      if (files && files.length) { event.preventDefault(); self.addFiles(files); }
    });
    var main = root.querySelector(".assistant-main") || root;
    main.addEventListener("dragover", function (event) {
      if (!event.dataTransfer || Array.prototype.indexOf.call(event.dataTransfer.types, "Files") < 0) return;
      event.preventDefault();
      main.classList.add("is-dropping");
    });
    main.addEventListener("dragleave", function (event) {
      if (!main.contains(event.relatedTarget)) main.classList.remove("is-dropping");
    });
    main.addEventListener("drop", function (event) {
      main.classList.remove("is-dropping");
      if (!event.dataTransfer || !event.dataTransfer.files.length) return;
      event.preventDefault();
      self.addFiles(event.dataTransfer.files);
    });
    this.tray.addEventListener("click", function (event) {
      var remove = event.target.closest("[data-attachment-remove]");
      if (remove) self.dropWaiting(remove.closest(".assistant-attachment-chip"));
    });
  };

  Conversation.prototype.addFiles = function (files) {
    var self = this;
    Array.prototype.forEach.call(files, function (file) { self.upload(file); });
  };

  Conversation.prototype.upload = function (file) {
    var entry = { name: file.name, id: null, failed: false };
    entry.chip = this.chip(file.name, sizeWords(file.size), "Uploading…");
    this.tray.appendChild(entry.chip);
    this.tray.hidden = false;
    this.waiting.push(entry);
    var body = new FormData();
    body.append("file", file);
    var self = this;
    fetch(this.uploadUrl, { method: "POST", body: body, credentials: "same-origin",
                            headers: { "X-CSRFToken": this.root.dataset.assistantCsrf || "" } })
      .then(function (response) {
        return response.json().catch(function () { return {}; }).then(function (data) {
          return { ok: response.ok, data: data, status: response.status };
        });
      })
      .then(function (answer) {
        if (!answer.ok || !answer.data.attachment) {
          var why = answer.data.message || "This file could not be attached (" + answer.status + ").";
          return self.uploadFailed(entry, why);
        }
        entry.id = answer.data.attachment.id;
        entry.chip.querySelector(".assistant-attachment-state").textContent = "";
        entry.chip.classList.remove("is-uploading");
        self.announce("Attached " + file.name + ".");
        return undefined;
      }, function () {
        self.uploadFailed(entry, "This file could not be uploaded: the connection failed.");
      });
  };

  Conversation.prototype.uploadFailed = function (entry, why) {
    entry.failed = true;
    entry.chip.classList.remove("is-uploading");
    entry.chip.classList.add("is-failed");
    entry.chip.querySelector(".assistant-attachment-state").textContent = why;
    entry.chip.setAttribute("role", "alert");
    this.announce(why);
  };

  // A file waiting to be sent: its name, size, where its upload stands, and a button to take it off.
  Conversation.prototype.chip = function (name, size, state) {
    var chip = el("div", "assistant-attachment-chip is-uploading");
    chip.appendChild(el("span", "assistant-attachment-name", name));
    chip.appendChild(el("span", "assistant-attachment-size", size));
    chip.appendChild(el("span", "assistant-attachment-state", state));
    chip.appendChild(button("×", "assistant-icon-button", { "data-attachment-remove": "",
                                                            "aria-label": "Remove " + name }));
    return chip;
  };

  Conversation.prototype.dropWaiting = function (chip) {
    this.waiting = this.waiting.filter(function (entry) { return entry.chip !== chip; });
    if (chip) chip.remove();
    this.tray.hidden = !this.waiting.length;
    this.input.focus();
  };

  // The ids to send with the next message; null while a file is still uploading (the send waits for it).
  Conversation.prototype.attachmentsForSend = function () {
    if (!this.waiting) return [];
    if (this.waiting.some(function (entry) { return !entry.failed && entry.id === null; })) return null;
    return this.waiting.filter(function (entry) { return entry.id !== null; }).map(function (entry) { return entry.id; });
  };

  // The message went with its files: the tray empties (a refusal puts nothing back: the files stay uploaded
  // and can be sent again from the same chips).
  Conversation.prototype.attachmentsSent = function () {
    if (!this.waiting) return;
    this.waiting.forEach(function (entry) { entry.chip.remove(); });
    this.waiting = [];
    this.tray.hidden = true;
  };

  // In the editor of a message sent with files: those still kept go again with the edit (the server copies
  // them to the new message), each with a button to leave it out.
  Conversation.prototype.showKeptFiles = function (form, message, before) {
    var files = (message.attachments || []).filter(function (file) { return !!file.url; });
    if (!files.length) return;
    var tray = el("div", "assistant-edit-files");
    tray.setAttribute("role", "group");
    tray.setAttribute("aria-label", "Files that go with the edit");
    var self = this;
    files.forEach(function (file) {
      var chip = tray.appendChild(self.chip(file.name, sizeWords(file.size), ""));
      chip.classList.remove("is-uploading");
      chip.setAttribute("data-edit-file", String(file.id));
    });
    tray.addEventListener("click", function (event) {
      var remove = event.target.closest("[data-attachment-remove]");
      if (!remove) return;
      remove.closest("[data-edit-file]").remove();
      form.querySelector("[data-edit-text]").focus();
    });
    form.insertBefore(tray, before);
  };

  // The ids of the files the editor still holds.
  Conversation.prototype.keptFiles = function (form) {
    return Array.prototype.map.call(form.querySelectorAll("[data-edit-file]"), function (chip) {
      return Number(chip.getAttribute("data-edit-file"));
    });
  };

  // Under a message: the files sent with it.
  Conversation.prototype.showAttachments = function (node, message) {
    var files = message.attachments || [];
    if (!files.length) return;
    var list = el("ul", "assistant-message-attachments");
    list.setAttribute("aria-label", "Attached files");
    files.forEach(function (file) {
      var item = list.appendChild(el("li", "assistant-message-attachment"));
      var words = file.name + " (" + sizeWords(file.size) + ")";
      if (!file.url) {
        item.appendChild(el("span", "assistant-attachment-gone", words + " — deleted"));
        return;
      }
      var link = item.appendChild(el("a", null));
      link.href = file.url;
      link.target = "_blank";
      link.rel = "noopener";
      if (/^image\//.test(file.content_type)) {
        var picture = link.appendChild(el("img", "assistant-attachment-picture"));
        picture.src = file.url;
        picture.alt = file.name;
        picture.loading = "lazy";
      } else {
        link.textContent = words;
      }
    });
    node.insertBefore(list, node.querySelector(".assistant-message-actions"));
  };
})();
