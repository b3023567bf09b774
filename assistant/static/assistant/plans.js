// A run's plan as a checklist above its steps (docs/protocol.md, "Plans"): each step's number, its words, the
// member suggested for it, its status in words, and buttons to the tool steps that carried it out. Part of
// the conversation client (conversation.js): these are its methods. Each `assistant.plan` event, and each
// load, carries the newest revision whole, so the checklist is redrawn from it. What a revision changed is
// read from the planning steps (the run's `assistant_plan` calls): each one's arguments are the steps it
// asked for, still to do, and its result names the revision it wrote; a revision is the steps it kept,
// then those.
(function () {
  "use strict";

  var Conversation = window.AssistantConversation;
  var el = Conversation.helpers.el;
  var button = Conversation.helpers.button;

  var APPROVALS = { waiting: "Waiting for your approval.", approved: "You approved this plan.",
                    denied: "You declined this plan.", commented: "You asked for changes" };
  var WORDS = { pending: "to do", in_progress: "in progress", done: "done", failed: "failed", skipped: "skipped" };
  var ICONS = { pending: "○", in_progress: "◐", done: "✓", failed: "✕", skipped: "⊘" };
  // A plan's news is gathered this long, then said once: one phrase for several steps ending together.
  var ANNOUNCE_AFTER_MS = 600;
  var FLASH_MS = 2000;

  function statusText(step) {
    var words = WORDS[step.status] || String(step.status || "");
    if ((step.status === "failed" || step.status === "skipped") && step.why) words += ": " + step.why;
    return words;
  }

  function plural(count, noun) {
    return count + " " + noun + (count === 1 ? "" : "s");
  }

  function stepsOf(plan) {
    return Array.isArray(plan && plan.steps) ? plan.steps.filter(function (step) { return step && typeof step === "object"; }) : [];
  }

  // "2 of 4 done, 1 failed": what became of the plan so far.
  function progress(steps) {
    var count = { pending: 0, in_progress: 0, done: 0, failed: 0, skipped: 0 };
    steps.forEach(function (step) { if (count[step.status] !== undefined) count[step.status] += 1; });
    var text = count.done + " of " + steps.length + " done";
    if (count.in_progress) text += ", " + count.in_progress + " in progress";
    if (count.failed) text += ", " + count.failed + " failed";
    if (count.skipped) text += ", " + count.skipped + " skipped";
    return text;
  }

  function newer(plan, than) {
    if (plan.revision !== than.revision) return plan.revision > than.revision;
    var a = Date.parse(plan.updated_at), b = Date.parse(than.updated_at);
    return isNaN(a) || isNaN(b) || a >= b;  // a later event of the same moment is the later write
  }

  function take(list, text) {
    var at = list.indexOf(text);
    return at >= 0 ? list.splice(at, 1) : null;
  }

  // What revision `steps` changed against the one before: `asked` is what its planning step asked for (the
  // steps after those it kept), `before` what the previous one's asked for. Of the steps the previous one
  // still had to do, which this one dropped, and which of its own are new.
  function changes(before, asked, steps) {
    if (steps.length < asked.length) return null;
    var kept = steps.slice(0, steps.length - asked.length);
    var fresh = steps.slice(steps.length - asked.length);
    var open = before.slice();
    kept.forEach(function (step) { take(open, step.do); });
    var unmatched = open.slice();
    var added = fresh.filter(function (step) { return !take(unmatched, step.do); });
    var remaining = fresh.map(function (step) { return step.do; });
    var dropped = open.filter(function (text) { return !take(remaining, text); });
    return { added: added, dropped: dropped, fresh: fresh.length };
  }

  // --- State: each run's newest plan, and what each of its planning steps asked for ------------------

  // `asked`: planning step id -> the words of the steps it asked for; `stepOf`: revision -> its planning step.
  Conversation.prototype.planState = function (run) {
    if (!run.plan) run.plan = { payload: null, node: null, asked: {}, stepOf: {} };
    return run.plan;
  };

  // A planning step (`assistant_plan`), as it is drawn: what it asked for, and which revision it wrote.
  Conversation.prototype.notePlanStep = function (run, step) {
    var state = this.planState(run);
    var asked = (step.arguments || {}).steps;
    if (Array.isArray(asked)) {
      state.asked[step.id] = asked.map(function (item) { return String((item && item.do) || "").trim(); });
    }
    var revision = (step.result || {}).revision;
    if (typeof revision === "number") state.stepOf[revision] = step.id;
    var shown = state.payload;
    if (shown && (shown.revision === revision || shown.revision === revision + 1 || shown.made_in === step.id)) {
      this.drawPlan(run);
    }
  };

  // A plan payload (an assistant.plan event's, or a load's): the run's checklist shows it if it is newer
  // than what it shows. `live`: it just happened (say so, and follow the thread down).
  Conversation.prototype.showPlan = function (plan, live) {
    if (!plan || typeof plan !== "object" || plan.run_id === undefined || plan.run_id === null) return;
    var run = this.runs[plan.run_id];
    if (!run) {
      if (!live) return;
      run = this.run(plan.run_id);
    }
    var state = this.planState(run);
    var previous = state.payload;
    if (plan.made_in) state.stepOf[plan.revision] = plan.made_in;
    if (previous && !newer(plan, previous)) return;  // an older write that arrived late
    state.payload = plan;
    var follow = live && this.nearBottom();
    this.drawPlan(run);
    if (follow) this.thread.scrollTop = this.thread.scrollHeight;
    if (live) this.planNews(run, previous, plan);
  };

  Conversation.prototype.drawPlan = function (run) {
    var state = run.plan;
    var plan = state.payload;
    var node = state.node;
    if (!node) {
      node = state.node = el("div", "assistant-plan");
      node.setAttribute("role", "group");
      node.setAttribute("aria-label", run.member ? "Plan of " + run.member : "Plan");
      // Above the run's steps: inside a member's nested block, or before a top run's block of steps (so a past
      // run's plan stays in view while its steps are folded).
      if (run.member) run.node.insertBefore(node, run.list);
      else run.node.insertBefore(node, run.node.firstChild);
    }
    // Drawn anew from the payload; a button that had focus gets it back in the new drawing.
    var focused = node.contains(document.activeElement) ? document.activeElement.getAttribute("data-plan-focus") : null;
    node.textContent = "";
    node.dataset.runId = plan.run_id;
    node.dataset.revision = plan.revision;
    var steps = stepsOf(plan);
    var head = node.appendChild(el("p", "assistant-plan-head"));
    head.appendChild(el("span", "assistant-plan-title", "Plan"));
    head.appendChild(document.createTextNode(" "));
    head.appendChild(el("span", "assistant-plan-progress", steps.length ? progress(steps) : "nothing to do"));
    if (APPROVALS[plan.approval]) {
      var answer = APPROVALS[plan.approval];
      if (plan.approval === "commented") answer += plan.comment ? ": " + plan.comment : ".";
      node.appendChild(el("p", "assistant-plan-approval is-" + plan.approval, answer));
    }
    if (plan.revision > 1) this.drawRevision(node, state, plan);
    if (steps.length) {
      var list = node.appendChild(el("ol", "assistant-plan-steps"));
      steps.forEach(function (step, index) { list.appendChild(planStep(step, index)); });
    }
    if (focused) {
      var again = node.querySelector('[data-plan-focus="' + focused + '"]');
      if (again) again.focus();
    }
  };

  Conversation.prototype.drawRevision = function (node, state, plan) {
    var revised = node.appendChild(el("p", "assistant-plan-revised"));
    revised.appendChild(el("strong", null, "Plan revised (revision " + plan.revision + ")"));
    revised.appendChild(document.createTextNode(plan.reason ? ": " + plan.reason : "."));
    var asked = state.asked[state.stepOf[plan.revision]], before = state.asked[state.stepOf[plan.revision - 1]];
    var diff = asked && before ? changes(before, asked, stepsOf(plan)) : null;
    if (!diff) return;  // the planning steps are not shown here: only why it changed
    var list = el("ul", "assistant-plan-changes");
    diff.added.forEach(function (step) { list.appendChild(el("li", "is-added", "Added: step " + step.n + ", " + step.do)); });
    diff.dropped.forEach(function (text) { list.appendChild(el("li", "is-dropped", "Dropped: " + text)); });
    if (!list.childNodes.length && diff.fresh) list.appendChild(el("li", null, "The steps still to do are the same."));
    if (list.childNodes.length) node.appendChild(list);
  };

  function planStep(step, index) {
    var status = WORDS[step.status] ? step.status : "pending";
    var item = el("li", "assistant-plan-step is-" + status.replace("_", "-"));
    if (typeof step.n === "number" && step.n > 0) item.value = step.n;
    item.dataset.planStep = step.n;
    item.dataset.status = status;
    item.appendChild(el("span", "assistant-plan-icon", ICONS[status])).setAttribute("aria-hidden", "true");
    var line = item.appendChild(el("span", "assistant-plan-line"));
    line.appendChild(el("span", "assistant-plan-do", step.do));
    line.appendChild(document.createTextNode(" "));
    line.appendChild(el("span", "assistant-plan-status", statusText(step)));
    var ids = Array.isArray(step.step_ids) ? step.step_ids : [];
    if (step.member || ids.length) {
      var more = item.appendChild(el("span", "assistant-plan-more"));
      if (step.member) {
        var who = more.appendChild(el("span", "assistant-plan-member", "Member: " + step.member));
        if (step.member_note) who.appendChild(el("span", "assistant-plan-note", " — " + step.member_note));
      }
      ids.forEach(function (id, k) {
        var label = "Show step" + (ids.length > 1 ? " " + (k + 1) : "");
        var link = more.appendChild(button(label, "assistant-plan-link", {
          "data-plan-step-link": String(id), "data-plan-focus": index + ":" + id,
          "aria-label": label + " that carried out plan step " + step.n,
        }));
        link.title = "Go to the step that carried this out";
      });
    }
    return item;
  }

  // The part of a plan's approval card that answers it with what to change instead of Approve or Deny
  // (assistant.confirm with approve false and a comment): the model is told, revises, and asks again.
  Conversation.prototype.planCommentForm = function (step, card, approve, deny) {
    var self = this;
    var details = el("details", "assistant-confirm-comment");
    details.appendChild(el("summary", null, "Ask for changes instead"));
    var form = details.appendChild(el("form"));
    var id = "assistant-plan-comment-" + step.id + "-" + this.root.dataset.surface;
    var label = form.appendChild(el("label", null, "What should change in this plan?"));
    label.htmlFor = id;
    var text = form.appendChild(el("textarea"));
    text.id = id;
    text.rows = 2;
    text.maxLength = 2000;
    text.setAttribute("data-plan-comment", "");
    var send = form.appendChild(el("button", "assistant-button", "Send changes"));
    send.type = "submit";
    details.addEventListener("toggle", function () { if (details.open) text.focus(); });
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var comment = text.value.trim();
      if (!comment) { text.focus(); return; }
      if (!self.send({ type: "assistant.confirm", run_id: step.run_id, step_id: step.id, approve: false, comment: comment,
                       request_id: Conversation.helpers.requestId("confirm") })) return;
      card.setAttribute("aria-busy", "true");
      card.classList.add("is-busy");
      approve.disabled = deny.disabled = send.disabled = true;
      send.textContent = "Sending…";
      self.pendingCard = { card: card, approve: approve, deny: deny, comment: send };
      self.setActive(self.rootOf(step.run_id));
    });
    return details;
  };

  // --- Going to a step, and saying what changed ----------------------------------------------------

  // A plan step's button: the tool or delegation step that carried it out, unfolded, in view and focused.
  Conversation.prototype.showPlanStep = function (link) {
    var id = link.getAttribute("data-plan-step-link");
    var target = this.thread.querySelector('.assistant-step[data-step-id="' + id + '"]');
    if (!target) return this.announce("That step is not shown here; older messages may hold it.");
    for (var node = target.parentElement; node && node !== this.thread; node = node.parentElement) {
      if (node.tagName === "DETAILS") node.open = true;
    }
    target.open = true;
    var summary = target.querySelector(":scope > summary") || target;
    target.scrollIntoView({ block: "center" });
    summary.focus({ preventScroll: true });
    target.classList.add("is-target");
    clearTimeout(target.flashTimer);
    target.flashTimer = setTimeout(function () { target.classList.remove("is-target"); }, FLASH_MS);
    return undefined;
  };

  // What a screen reader hears of a plan: that one was made or revised, and each step that ended, gathered
  // over a moment and said once, politely, in a region of its own (the step's own news has the other one).
  Conversation.prototype.planNews = function (run, previous, plan) {
    var steps = stepsOf(plan);
    var whose = run.member ? run.member + "’s plan" : "The plan";
    var news = [];
    if (!previous || plan.revision > previous.revision) {
      if (plan.revision > 1) news.push("Plan revised (revision " + plan.revision + ")" + (plan.reason ? ": " + plan.reason : "."));
      else news.push((run.member ? run.member + " made a plan of " : "The assistant made a plan of ") + plural(steps.length, "step") + ".");
    } else {
      var was = {};
      stepsOf(previous).forEach(function (step, index) { was[index] = step.status; });
      var ended = steps.filter(function (step, index) {
        return step.status !== was[index] && step.status !== "pending" && step.status !== "in_progress";
      });
      if (!ended.length) return;
      news.push(whose + ": " + ended.map(function (step) { return "step " + step.n + " " + statusText(step); }).join("; ") +
        ". " + progress(steps) + ".");
    }
    var self = this;
    this.planPending = (this.planPending || []).concat(news);
    clearTimeout(this.planTimer);
    this.planTimer = setTimeout(function () {
      var text = self.planPending.join(" ");
      self.planPending = [];
      var region = self.root.querySelector("[data-assistant-plan-announce]");
      if (!region) return self.announce(text);
      region.textContent = "";
      setTimeout(function () { region.textContent = text; }, 30);
      return undefined;
    }, ANNOUNCE_AFTER_MS);
  };
})();
