// How a run's steps read to a person: one line in words, and the details behind it (arguments, a preview
// of the result, the duration, why it did not take effect). Shared by the conversation; no dependencies.
(function () {
  "use strict";

  var FAILED = ["invalid", "denied", "not_found", "error", "unknown", "escalated", "refused"];
  // The assistant's own planning tool (docs/protocol.md, "Plans"): its step reads as a plan made or revised.
  var PLAN_TOOL = "assistant_plan";
  var PREVIEW_CHARS = 400;
  var EXCERPT_CHARS = 160;

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  // "tracker_task_list" -> {noun: "task", verb: "list"}: a tool's name is <app>_<model>_<action> by
  // convention; anything else is read as plain words.
  function parts(name) {
    var words = String(name || "").split(/[_\-.]+/).filter(Boolean);
    if (words.length >= 3) words = words.slice(1);
    if (words.length < 2) return { noun: words.join(" "), verb: "" };
    return { noun: words.slice(0, -1).join(" "), verb: words[words.length - 1].toLowerCase() };
  }

  function plural(noun, count) {
    if (count === 1) return noun;
    if (/(s|x|ch|sh)$/.test(noun)) return noun + "es";
    if (/[^aeiou]y$/.test(noun)) return noun.slice(0, -1) + "ies";
    return noun + "s";
  }

  function capitalise(text) {
    return text ? text.charAt(0).toUpperCase() + text.slice(1) : text;
  }

  // [what it will do, what it is doing, what it did]
  var VERBS = {
    list: ["Read %ps", "Reading %ps", "Read %ps"], search: ["Search %ps", "Searching %ps", "Searched %ps"],
    detail: ["Open a %n", "Opening a %n", "Opened a %n"], get: ["Open a %n", "Opening a %n", "Opened a %n"],
    stats: ["Count the %n's figures", "Counting the %n's figures", "Counted the %n's figures"],
    create: ["Create a %n", "Creating a %n", "Created a %n"], add: ["Add a %n", "Adding a %n", "Added a %n"],
    update: ["Update a %n", "Updating a %n", "Updated a %n"], edit: ["Edit a %n", "Editing a %n", "Edited a %n"],
    delete: ["Delete a %n", "Deleting a %n", "Deleted a %n"], remove: ["Remove a %n", "Removing a %n", "Removed a %n"],
    complete: ["Complete a %n", "Completing a %n", "Completed a %n"],
    archive: ["Archive a %n", "Archiving a %n", "Archived a %n"],
  };
  var WILL = 0, DOING = 1, DID = 2;

  // The tool's name in words, e.g. for tracker_task_create: "Create a task", "Creating a task", "Created a task".
  function humanise(name, tense) {
    if (name === PLAN_TOOL) return ["Make a plan", "Making a plan", "Made a plan"][tense];
    // A delegation tool names the member it asks (`ask_<member>`): its name is kept as it is.
    var asking = /^ask_(.+)$/.exec(String(name || ""));
    if (asking) return ["Ask ", "Asking ", "Asked "][tense] + asking[1];
    var p = parts(name);
    var pattern = VERBS[p.verb];
    if (!pattern) return capitalise((p.noun + " " + p.verb).trim()) || "A tool";
    return pattern[tense].replace("%ps", plural(p.noun, 2)).replace("%n", p.noun);
  }

  function firstSentence(text) {
    var match = /^(.*?[.!?])(\s|$)/.exec(String(text || "").trim());
    return match ? match[1] : String(text || "").trim();
  }

  // The server's own words on what was done ("Task “Buy milk” created."), when the view said any.
  function resultMessage(result) {
    var data = (result && result.data) || {};
    var messages = Array.isArray(data.messages) ? data.messages : [];
    for (var i = 0; i < messages.length; i++) {
      if (messages[i] && typeof messages[i].text === "string" && messages[i].text) return messages[i].text;
    }
    return "";
  }

  function excerpt(value) {
    var line = String(value || "").replace(/\s+/g, " ").trim();
    return line.length > EXCERPT_CHARS ? line.slice(0, EXCERPT_CHARS - 1) + "…" : line;
  }

  // A step that handed work to a member (an `ask_<member>` call): its member works in a run of its own.
  function isDelegation(step) {
    return step.kind === "tool_call" && /^ask_./.test(String(step.tool_name || ""));
  }

  function memberOf(step) {
    var result = step.result || {};
    return typeof result.member === "string" && result.member ? result.member : String(step.tool_name).slice(4);
  }

  // A member that answered in its asker's place (a handoff): its answer is the reply, shown once, as the reply.
  // (Said of the asking run's reply: with a member handing over in turn, the one that wrote it is named on it.)
  function answerIsTheReply(step) {
    var result = step.result || {};
    return result.hands_over === true && result.status === "answered";
  }

  // A delegation in words: what the member was asked while it works, then how it answered.
  function delegationText(step) {
    var result = step.result || {};
    var member = memberOf(step);
    var reason = excerpt(result.reason || step.reason);
    if (step.state !== "finished") return "Asked " + member + ": " + excerpt((step.arguments || {}).task);
    if (answerIsTheReply(step)) {
      var writer = typeof result.written_by === "string" ? result.written_by : "";
      return writer && writer !== member ? member + " handed it to " + writer + ", whose answer is the reply"
        : member + "'s answer is the reply";
    }
    switch (result.status) {
      case "answered": return member + " answered" + (result.answer ? ": " + excerpt(result.answer) : "");
      case "escalated": {
        // The server's reason names the member already ("The member “x” could not finish: …").
        var named = /^The member “[^”]*” (.*)$/.exec(reason);
        return named ? member + " " + named[1] : member + " could not finish" + (reason ? ": " + reason : "");
      }
      case "member_stopped": return "Stopped before " + member + " answered";
      case "refused":
      case "invalid": return "Could not ask " + member + (reason ? ": " + reason : "");
      default: return member + ": " + (reason || "no answer");
    }
  }

  // A step that wrote the run's plan (a new revision of it), or failed to.
  function isPlan(step) {
    return step.kind === "tool_call" && step.tool_name === PLAN_TOOL;
  }

  // A plan may wait for the person's answer on its planning step: Approve, Deny, or changes asked for instead.
  function planText(step) {
    var result = step.result || {};
    var revising = !!(step.arguments && step.arguments.reason);
    if (step.state === "awaiting_confirmation") {
      if (step.confirmation === "approved") return "You approved the plan";
      if (step.confirmation === "denied") return /^You asked for changes/.test(step.reason || "") ? "You asked for changes to the plan" : "You declined the plan";
      return "Waiting for your approval of the plan";
    }
    if (step.state !== "finished") return revising ? "Revising the plan…" : "Making a plan…";
    switch (result.status) {
      case "planned": {
        if (result.revision > 1) return "Revised the plan (revision " + result.revision + ")" + (result.approved ? ", approved" : "");
        var count = Array.isArray(result.steps) ? result.steps.length : 0;
        return "Planned " + count + " " + plural("step", count) + (result.approved ? ", approved" : "");
      }
      case "declined": return "You declined the plan: nothing of it was done";
      case "commented": return "You asked for changes to the plan" + (result.comment ? ": " + excerpt(result.comment) : "");
      default: {
        var reason = excerpt(result.reason || step.reason);
        return "Could not make the plan" + (reason ? ": " + reason : "");
      }
    }
  }

  function readText(step) {
    var data = (step.result || {}).data;
    var p = parts(step.tool_name);
    if (data && Array.isArray(data.results)) {
      var count = typeof data.returned === "number" ? data.returned : data.results.length;
      if (count === 0) return "Found no " + plural(p.noun, 0);
      return "Read " + (data.truncated ? "the first " : "") + count + " " + plural(p.noun, count);
    }
    return humanise(step.tool_name, DID);
  }

  function isFailed(step) {
    var status = (step.result || {}).status;
    return step.kind === "tool_call" && step.state === "finished" && FAILED.indexOf(status) >= 0;
  }

  // What the approval card and the step say will happen: the server's sentence when it gave one, else
  // the first sentence of the tool's description, else its name in words.
  function question(step, tool) {
    if (step.summary) return step.summary;
    if (tool && tool.description) return firstSentence(tool.description).replace(/\.$/, "") + "?";
    return humanise(step.tool_name, WILL) + "?";
  }

  // One line, in words, for any step.
  function text(step, tool) {
    var result = step.result || {};
    if (step.kind === "notice") return step.reason || "Note";
    if (step.kind === "model_call") {
      if (result.interrupted) return "The model was interrupted: " + (step.reason || "stopped");
      if (step.arguments && step.arguments.purpose === "summarise") return "Summarised the earlier conversation";
      var calls = (result.tool_calls || []).map(function (call) {
        var words = humanise(call.name, WILL);
        return /^ask_./.test(String(call.name || "")) ? words.charAt(0).toLowerCase() + words.slice(1) : words.toLowerCase();
      });
      return calls.length ? "Decided on: " + calls.join(", ") : "Wrote the answer";
    }
    if (isDelegation(step)) return delegationText(step);
    if (isPlan(step)) return planText(step);
    var what = step.summary || humanise(step.tool_name, WILL);
    if (step.state === "awaiting_confirmation") {
      if (step.confirmation === "approved") return "Approved: " + what;
      if (step.confirmation === "denied") return "Declined: " + what;
      return "Waiting for your approval";  // the card right under it says what, in full
    }
    if (step.state === "started") return (step.summary || humanise(step.tool_name, DOING)) + "…";
    var status = result.status || "";
    if (step.took_effect) return resultMessage(result) || (step.summary ? "Done: " + step.summary : humanise(step.tool_name, DID));
    if (status === "declined") return "Not done, declined: " + what;
    if (status === "not_run") return "Not done, the run ended first: " + what;
    if (status === "data") return readText(step);
    if (isFailed(step)) return "Failed: " + what;
    if (step.took_effect === null) return "Outcome unknown: " + what;
    return "No change: " + what;
  }

  function className(step) {
    var names = ["assistant-step"];
    var status = (step.result || {}).status;
    if (step.kind === "notice") names.push("is-notice");
    else if (step.kind === "model_call") names.push("is-model");
    if (step.state === "started" || (step.state === "awaiting_confirmation" && !step.confirmation)) names.push("is-running");
    if (step.state === "awaiting_confirmation" && step.confirmation) names.push("is-running");
    if (isDelegation(step)) names.push("is-delegation");
    if (isPlan(step)) names.push("is-plan");
    if (isFailed(step)) names.push("is-failed");
    else if (status === "declined" || status === "not_run" || status === "member_stopped" || status === "commented") names.push("is-declined");
    if (step.took_effect === true) names.push("is-done");
    if (status === "data") names.push("is-read");
    return names.join(" ");
  }

  function icon(step) {
    if (isFailed(step)) return "✕";
    var status = (step.result || {}).status;
    if (status === "declined" || status === "not_run" || status === "member_stopped" || status === "commented") return "⊘";
    if (step.took_effect === true) return "✓";
    if (step.state !== "finished") return "…";
    if (isPlan(step)) return "☰";
    if (step.kind === "model_call") return "✎";
    if (step.kind === "notice") return "ℹ";
    return "•";
  }

  function pretty(value) {
    var json;
    try { json = JSON.stringify(value, null, 2); } catch (e) { json = String(value); }
    return json === undefined ? "" : json;
  }

  function preview(value) {
    var json = pretty(value);
    return json.length > PREVIEW_CHARS ? json.slice(0, PREVIEW_CHARS) + "\n… (" + (json.length - PREVIEW_CHARS) + " more characters)" : json;
  }

  function duration(ms) {
    if (ms === null || ms === undefined) return "";
    return ms < 1000 ? ms + " ms" : (ms / 1000).toFixed(ms < 10000 ? 1 : 0) + " s";
  }

  function field(list, label, value, pre) {
    list.appendChild(el("dt", null, label));
    var dd = el("dd");
    dd.appendChild(pre ? el("pre", null, value) : document.createTextNode(value));
    list.appendChild(dd);
  }

  // A step as <details>: the line is the summary, the body what a curious person wants to check.
  function render(step, tool, node) {
    var details = node || el("details");
    var wasOpen = details.open;
    details.className = className(step);
    details.textContent = "";
    details.dataset.seq = step.seq;
    var summary = el("summary");
    summary.appendChild(el("span", "assistant-step-icon", icon(step))).setAttribute("aria-hidden", "true");
    summary.appendChild(el("span", "assistant-step-text", text(step, tool)));
    details.appendChild(summary);
    var body = el("dl", "assistant-step-body");
    if (isDelegation(step)) {
      var result = step.result || {};
      field(body, "Member", memberOf(step));
      field(body, "Task", String((step.arguments || {}).task || ""));
      if ((step.arguments || {}).context) field(body, "Context", String(step.arguments.context));
      // A request handed over without a model call says why it went to this member (the server's words).
      if (typeof result.routed === "string" && result.routed) field(body, "Why this member", result.routed);
      if (answerIsTheReply(step)) field(body, "Answer", "The reply, word for word (not repeated here)");
      else if (typeof result.answer === "string" && result.answer) field(body, "Answer", result.answer);
      if (Array.isArray(result.problems)) {
        field(body, "What failed", result.problems.map(function (problem) {
          return (problem.tool || "") + ": " + (problem.status || "") + (problem.reason ? " — " + problem.reason : "");
        }).join("\n"), true);
      }
      var why = result.reason || step.reason;
      if (why) field(body, "Why", why);
      var used = result.used;
      if (used && typeof used === "object") {
        var counted = function (count, noun) { count = count || 0; return count + " " + plural(noun, count); };
        field(body, "Used", counted(used.model_calls, "model call") + ", " + counted(used.tool_calls, "tool call") +
          ", " + counted(used.tokens, "token"));
      }
    } else if (isPlan(step)) {
      var planned = (step.arguments || {}).steps;
      if (Array.isArray(planned) && planned.length) {
        // As the model asked; a revision numbers them after the steps it keeps (the plan shows that).
        field(body, (step.result || {}).revision > 1 ? "Steps still to do" : "Steps", planned.map(function (item) {
          item = item || {};
          return "• " + String(item.do || "") + (item.tool ? " (" + item.tool + ")" : "");
        }).join("\n"), true);
      }
      if ((step.arguments || {}).reason) field(body, "Why revised", String(step.arguments.reason));
      if (step.result && step.result.comment) field(body, "Your comment", String(step.result.comment));
      if (step.result && step.result.revision) field(body, "Revision", String(step.result.revision));
      if (step.result && step.result.status === "invalid") field(body, "Why not", String(step.result.reason || step.reason || ""));
    } else if (step.kind === "tool_call") {
      field(body, "Tool", step.tool_name);
      field(body, "Arguments", pretty(step.arguments || {}), true);
      if (step.result) field(body, "Result", preview(step.result.data !== undefined ? step.result.data : step.result), true);
    } else if (step.kind === "model_call") {
      if (step.result && step.result.model) field(body, "Model", step.result.model);
      var usage = step.usage || {};
      if (usage.prompt_tokens || usage.completion_tokens) {
        field(body, "Tokens", (usage.prompt_tokens || 0) + " in, " + (usage.completion_tokens || 0) + " out");
      }
    }
    if (step.duration_ms !== null && step.duration_ms !== undefined) field(body, "Took", duration(step.duration_ms));
    var reason = step.reason || (step.result && step.result.reason) || "";
    if (step.kind === "tool_call" && !isDelegation(step) && !isPlan(step) && step.took_effect !== true && reason) {
      // A step still waiting has not failed to take effect: its reason says where it stands (an approval that
      // waits for the person's own agent to call again, say).
      field(body, step.state === "awaiting_confirmation" ? "Where it stands" : "Why it did not take effect", reason);
    }
    if (!body.childNodes.length) field(body, "Details", "Nothing more to show.");
    details.appendChild(body);
    details.open = wasOpen;
    return details;
  }

  window.AssistantSteps = {
    text: text, render: render, question: question, humanise: humanise, isFailed: isFailed,
    isDelegation: isDelegation, isPlan: isPlan, memberOf: memberOf, resultMessage: resultMessage, el: el,
  };
})();
