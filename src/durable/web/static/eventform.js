/* The run page's event form (run.js): send an event to a run waiting for one, with
   fields built from the awaited event's JSON Schema (form.js) or a JSON box and its
   approve / reject presets. */

import { $, confirmAction, notice, rememberName, storedName } from "./dom.js";
import { schemaForm } from "./form.js";
import { getJSON, post, session } from "./http.js";

/* The form that sends an event to a run waiting for one: for a typed event, fields
   built from its JSON Schema (form.js); else the JSON box. Returns show(eventName). */
export function wireEventForm(runId, base, refreshNow) {
  const data = $("event-data");
  const sender = $("event-sender");
  let filledFor = null; // the event the name field was last filled in for
  let typed = null; // the schema form of the awaited event, when it has a schema
  sender.value = storedName();
  const fill = (value) => {
    data.value = JSON.stringify(value);
    showError("");
  };
  $("event-approve").addEventListener("click", () => fill({ approved: true }));
  $("event-reject").addEventListener("click", () => fill({ approved: false }));
  data.addEventListener("input", () => showError(""));
  // another event's name: its payload is not this schema's, so the JSON box is back
  $("event-name").addEventListener("input", () =>
    showTyped(typed !== null && $("event-name").value.trim() === filledFor));
  $("event-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const name = $("event-name").value.trim();
    if (!name) {
      showError("Name the event to send (the one the run waits for).");
      return;
    }
    let payload = null;
    if (typed && name === filledFor) {
      const { value, problems } = typed.read();
      showError(problems.length ? "Some fields need attention (marked below)." : "");
      if (problems.length) return;
      payload = value;
    } else {
      try {
        payload = data.value.trim() === "" ? null : JSON.parse(data.value);
      } catch (error) {
        showError(`The payload is not valid JSON (${error.message}). Fix it, or send {}.`);
        return;
      }
    }
    const who = sender.value.trim();
    rememberName(who);
    if (!(await confirmAction(`Send the event "${name}" to run ${runId}?`, false))) return;
    try {
      await post(`${base}/events`, { name, data: payload, sender: who || undefined,
        actor: who || undefined });
      notice(`Event "${name}" sent.`);
    } catch (error) {
      const unplaced = typed && error.errors.length ? typed.showErrors(error.errors) : [];
      showError(error.errors.length && typed
        ? ["The server refused some fields (marked below).",
          ...unplaced.map((e) => `${e.loc.join(".") || "payload"}: ${e.msg}`)].join(" ")
        : error.message);
    }
    refreshNow();
  });
  return (waitingFor) => {
    $("event-form").hidden = session.read_only || waitingFor === null;
    // prefill once per awaited event, so a poll does not undo what the user typed
    if (waitingFor !== null && waitingFor !== filledFor) {
      $("event-name").value = waitingFor;
      typed = null;
      showTyped(false);
      getJSON(`${base}/waiting`).then((waiting) => {
        if (waiting.event !== filledFor || !waiting.schema) return;
        typed = schemaForm(waiting.schema, $("event-fields"));
        showTyped(true);
      }).catch((error) => notice(error.message, "error"));
    }
    filledFor = waitingFor;
  };
}

/* A typed event's fields instead of the JSON box and its presets, or back. */
function showTyped(on) {
  $("event-fields").hidden = !on;
  $("event-json").hidden = on;
  $("event-presets").hidden = on;
}

function showError(text) {
  const box = $("event-error");
  box.textContent = text;
  box.hidden = !text;
}
