// Approve with changes (docs/protocol.md, "Approve with changes"): an approval card's values as a small form,
// prefilled with what the model asked for; the person may correct them and approve (`assistant.confirm` with
// `arguments`). The server checks them as it checks the model's: a value that does not fit comes back as
// `invalid_arguments` with each field's problem, shown beside that field, and nothing has run. Part of the
// conversation client (conversation.js): these are its methods.
(function () {
  "use strict";

  var Conversation = window.AssistantConversation;
  var el = Conversation.helpers.el;
  // Longer text, or text with line breaks, is edited in a box of its own lines.
  var SHORT_TEXT = 80;

  // The input for one value, by its schema where the tool's is known (a choice among its values), else by what
  // the model gave: a checkbox, a number, one line or several; anything else (a list, an object) as JSON text.
  function inputFor(value, schema) {
    var input;
    var choices = schema && Array.isArray(schema.enum) ? schema.enum : null;
    if (choices && choices.indexOf(value) >= 0 && choices.every(function (each) { return typeof each === "string"; })) {
      input = el("select");
      choices.forEach(function (each) {
        var option = input.appendChild(el("option", null, each));
        option.value = each;
        option.selected = each === value;
      });
    } else if (typeof value === "boolean") {
      input = el("input");
      input.type = "checkbox";
      input.checked = value;
    } else if (typeof value === "number") {
      input = el("input");
      input.type = "number";
      input.step = "any";
      input.value = String(value);
    } else if (typeof value === "string" && value.length <= SHORT_TEXT && value.indexOf("\n") < 0) {
      input = el("input");
      input.type = "text";
      input.value = value;
    } else if (typeof value === "string") {
      input = el("textarea");
      input.rows = 3;
      input.value = value;
    } else {
      input = el("textarea");
      input.rows = 2;
      input.value = JSON.stringify(value);
      input.setAttribute("data-json", "");
    }
    return input;
  }

  // The value an input holds now, or undefined (with its problem shown) when it cannot be read.
  function valueOf(field) {
    var input = field.input;
    if (input.tagName === "SELECT") return input.value;
    if (input.type === "checkbox") return input.checked;
    if (input.type === "number") return input.value === "" ? null : Number(input.value);
    if (!input.hasAttribute("data-json")) return input.value;
    try {
      return JSON.parse(input.value);
    } catch (error) {
      showProblem(field, "This must be JSON, as it was shown.");
      return undefined;
    }
  }

  function showProblem(field, text) {
    field.problem.textContent = text;
    field.problem.hidden = false;
    field.input.setAttribute("aria-invalid", "true");
  }

  function clearProblems(fields) {
    Object.keys(fields).forEach(function (name) {
      fields[name].problem.hidden = true;
      fields[name].problem.textContent = "";
      fields[name].input.removeAttribute("aria-invalid");
    });
  }

  Conversation.prototype.argumentsForm = function (step, card, approve, deny) {
    var self = this;
    var values = step.arguments || {};
    var names = Object.keys(values);
    if (!names.length) return null;
    var details = el("details", "assistant-confirm-edit");
    details.appendChild(el("summary", null, "Change values"));
    var form = details.appendChild(el("form"));
    form.noValidate = true;  // the server's checks are the ones that count, and it says each field's problem
    form.setAttribute("data-confirm-form", "");
    var fields = {};
    var send = el("button", "assistant-button assistant-button-primary", "Approve with changes");
    send.type = "submit";
    send.setAttribute("data-confirm", "approve-changed");
    // Drawn when first opened: by then the card's `assistant.confirm` has said the tool's schema, if it will.
    function draw() {
      var tool = self.tools[step.tool_name] || {};
      var properties = (tool.parameters && tool.parameters.properties) || {};
      names.forEach(function (name) {
        var id = "assistant-argument-" + step.id + "-" + name + "-" + self.root.dataset.surface;
        var schema = properties[name] || null;
        var row = form.appendChild(el("div", "assistant-confirm-field"));
        var label = row.appendChild(el("label", null, name));
        label.htmlFor = id;
        var described = [];
        if (schema && schema.description) {
          var hint = row.appendChild(el("p", "assistant-confirm-field-hint", schema.description));
          hint.id = id + "-hint";
          described.push(hint.id);
        }
        var input = row.appendChild(inputFor(values[name], schema));
        input.id = id;
        input.name = name;
        var problem = row.appendChild(el("p", "assistant-confirm-field-error"));
        problem.id = id + "-problem";
        problem.hidden = true;
        problem.setAttribute("data-field-problem", name);
        described.push(problem.id);
        input.setAttribute("aria-describedby", described.join(" "));
        fields[name] = { input: input, problem: problem };
      });
      form.appendChild(send);
    }
    details.addEventListener("toggle", function () {
      if (!details.open) return;
      if (!form.firstChild) draw();
      fields[names[0]].input.focus();
    });
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      clearProblems(fields);
      var changed = {};
      var readable = names.every(function (name) {
        var value = valueOf(fields[name]);
        if (value === undefined) { fields[name].input.focus(); return false; }
        changed[name] = value;
        return true;
      });
      if (!readable) return;
      if (!self.send({ type: "assistant.confirm", run_id: step.run_id, step_id: step.id, approve: true,
                       arguments: changed, request_id: Conversation.helpers.requestId("confirm") })) return;
      card.setAttribute("aria-busy", "true");
      card.classList.add("is-busy");
      approve.disabled = deny.disabled = send.disabled = true;
      send.textContent = "Approving…";
      self.pendingCard = { card: card, approve: approve, deny: deny, changed: send, fields: fields };
      self.setActive(self.rootOf(step.run_id));
    });
    return details;
  };

  // The server refused the values (`invalid_arguments`): each field's problem beside it, the first one focused,
  // and the card as it was (nothing ran: it still waits).
  Conversation.prototype.showArgumentProblems = function (pending, problems, message) {
    var first = null;
    Object.keys(problems || {}).forEach(function (name) {
      var field = pending.fields[name];
      if (!field) return;
      showProblem(field, String(problems[name]));
      if (!first) first = field.input;
    });
    // A problem of the values together (the form's own rule), or of none shown here: said under the form.
    var form = pending.changed.form;
    var whole = form.querySelector("[data-form-problem]");
    if (!whole) {
      whole = form.insertBefore(el("p", "assistant-confirm-field-error"), pending.changed);
      whole.setAttribute("data-form-problem", "");
      whole.setAttribute("role", "alert");
    }
    whole.textContent = first ? "" : String(message || "");
    whole.hidden = !!first;
    if (first) first.focus();
    this.announce("Not approved: " + (first ? Object.keys(problems || {}).map(function (name) {
      return name + ": " + problems[name];
    }).join("; ") : String(message || "some values do not fit.")));
  };
})();
