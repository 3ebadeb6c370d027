/* A form built from a typed event's JSON Schema (GET api/v1/runs/<id>/waiting), as
   Pydantic writes it: string -> text, number/integer -> number, boolean -> checkbox,
   enum -> select, format date / date-time -> date / datetime-local, a nested object
   ($ref into $defs, or inline) -> fieldset; required fields marked, descriptions as
   help text. Anything else (lists, unions) is a small JSON box of its own.

   schemaForm(schema, box) draws it into *box* and returns
     read()          -> { value, problems }: the payload, and what the browser found
                        wrong ([{ loc, msg }], empty when it may be sent);
     showErrors(list)   the server's field errors (or read()'s), next to their fields;
                        those it cannot place are returned.
   Every field's control has the id "event-field-<loc joined by dots>". */

import { el } from "./dom.js";

const UNSET = Symbol("unset");

export function schemaForm(schema, box) {
  const fields = []; // { loc, kind, control, error, required, schema }
  box.replaceChildren(...objectFields(schema, schema, [], fields));

  function read() {
    const problems = [];
    const value = {};
    for (const field of fields) {
      field.error.textContent = "";
      const got = readField(field, problems);
      if (got !== UNSET) place(value, field.loc, got);
    }
    return { value, problems };
  }

  function showErrors(errors) {
    for (const field of fields) field.error.textContent = "";
    const unplaced = [];
    for (const error of errors) {
      const key = (error.loc || []).join(".");
      const field = fields.find((f) => f.loc.join(".") === key) ||
        fields.find((f) => key.startsWith(f.loc.join(".") + "."));
      if (field) field.error.textContent = error.msg;
      else unplaced.push(error);
    }
    return unplaced;
  }
  return { read, showErrors };
}

/* The schema a $ref points to (only local ones: "#/$defs/Name"), else *node*; what
   stands beside the $ref (a field's default, description, title) wins. */
function resolve(root, node) {
  let seen = 0;
  while (node && typeof node.$ref === "string" && seen++ < 32) {
    const { $ref, ...beside } = node;
    const path = $ref.replace(/^#\//, "").split("/");
    const target = path.reduce(
      (at, part) => (at ? at[part.replace(/~1/g, "/").replace(/~0/g, "~")] : at), root);
    node = { ...(target || {}), ...beside };
  }
  return node || {};
}

/* anyOf [X, {type: null}] (Optional[X]) -> X and that null is allowed. */
function unwrap(root, node) {
  node = resolve(root, node);
  const options = node.anyOf || node.oneOf;
  if (Array.isArray(options)) {
    const real = options.filter((option) => resolve(root, option).type !== "null");
    if (real.length === 1) {
      const inner = resolve(root, real[0]);
      return { node: { ...inner, title: node.title || inner.title,
        description: node.description || inner.description, default: node.default },
      nullable: real.length < options.length };
    }
  }
  return { node, nullable: false };
}

function objectFields(root, node, loc, fields) {
  const required = new Set(node.required || []);
  return Object.entries(node.properties || {}).map(([name, property]) =>
    fieldFor(root, property, [...loc, name], required.has(name), fields));
}

function kindOf(node) {
  if (Array.isArray(node.enum)) return "enum";
  if (node.type === "boolean") return "boolean";
  if (node.type === "integer" || node.type === "number") return node.type;
  if (node.type === "string" && node.format === "date") return "date";
  if (node.type === "string" && node.format === "date-time") return "datetime";
  if (node.type === "string") return "string";
  if (node.type === "object" && node.properties) return "object";
  return "json";
}

function fieldFor(root, property, loc, required, fields) {
  const { node } = unwrap(root, property);
  const kind = kindOf(node);
  const id = "event-field-" + loc.join(".");
  const label = node.title || loc[loc.length - 1];
  const help = node.description ? el("small", node.description, { class: "help" }) : null;
  if (kind === "object") {
    const set = el("fieldset", null, { id, class: "schema-object" });
    set.append(el("legend", label + (required ? " *" : "")));
    if (help) set.append(help);
    set.append(...objectFields(root, node, loc, fields));
    return set;
  }
  const control = controlFor(node, kind, id, required);
  const error = el("span", null, { class: "field-error", role: "alert", "data-loc": loc.join(".") });
  fields.push({ loc, kind, control, error, required });
  const wrap = el("div", null, { class: "schema-field" + (kind === "boolean" ? " check" : "") });
  const title = el("label", null, { for: id });
  title.append(label, required ? el("span", " *", { class: "required", title: "required" }) : "");
  if (kind === "boolean") wrap.append(control, title);
  else wrap.append(title, control);
  if (help) {
    help.id = "event-help-" + loc.join(".");
    control.setAttribute("aria-describedby", help.id);
    wrap.append(help);
  }
  wrap.append(error);
  return wrap;
}

function controlFor(node, kind, id, required) {
  let control;
  if (kind === "enum") {
    control = el("select", null, { id });
    if (!required || node.default === undefined) control.append(el("option", "—", { value: "" }));
    node.enum.forEach((option, index) => {
      control.append(el("option", String(option), { value: String(index) }));
    });
    if (node.default !== undefined) {
      control.value = String(node.enum.findIndex((v) => v === node.default));
    }
    control.enumValues = node.enum;
  } else if (kind === "boolean") {
    control = el("input", null, { id, type: "checkbox" });
    control.checked = node.default === true;
  } else if (kind === "integer" || kind === "number") {
    control = el("input", null, { id, type: "number", step: kind === "integer" ? "1" : "any" });
    if (node.minimum !== undefined) control.min = String(node.minimum);
    if (node.maximum !== undefined) control.max = String(node.maximum);
    control.bounds = node;
  } else if (kind === "date" || kind === "datetime") {
    control = el("input", null, { id, type: kind === "date" ? "date" : "datetime-local" });
  } else if (kind === "string") {
    control = el("input", null, { id, type: "text" });
    if (node.minLength !== undefined) control.minLength = node.minLength;
    if (node.maxLength !== undefined) control.maxLength = node.maxLength;
    if (node.pattern) control.pattern = node.pattern;
  } else {
    control = el("textarea", null, { id, rows: "2", spellcheck: "false", class: "mono",
      placeholder: "JSON" });
  }
  if (required && kind !== "boolean") control.required = true;
  if (node.default !== undefined && node.default !== null && kind !== "enum" &&
      kind !== "boolean") {
    control.value = kind === "json" ? JSON.stringify(node.default) : String(node.default);
  }
  return control;
}

/* The field's value, UNSET when left empty (and allowed to be), pushing problems. */
function readField(field, problems) {
  const { control, kind, required, loc } = field;
  const fail = (msg) => {
    field.error.textContent = msg;
    problems.push({ loc, msg });
    return UNSET;
  };
  if (kind === "boolean") return control.checked;
  const text = control.value.trim();
  if (text === "") return required ? fail("Field required") : UNSET;
  if (!control.checkValidity()) return fail(control.validationMessage);
  if (kind === "enum") return control.enumValues[Number(text)];
  if (kind === "integer" || kind === "number") {
    const number = Number(text);
    if (!Number.isFinite(number)) return fail("Enter a number");
    if (kind === "integer" && !Number.isInteger(number)) return fail("Enter a whole number");
    const b = control.bounds;
    if (b.exclusiveMinimum !== undefined && !(number > b.exclusiveMinimum)) {
      return fail(`Must be greater than ${b.exclusiveMinimum}`);
    }
    if (b.exclusiveMaximum !== undefined && !(number < b.exclusiveMaximum)) {
      return fail(`Must be less than ${b.exclusiveMaximum}`);
    }
    return number;
  }
  if (kind === "json") {
    try {
      return JSON.parse(text);
    } catch (error) {
      return fail(`Not valid JSON (${error.message})`);
    }
  }
  return text; // text, date ("2026-03-01"), date-time ("2026-03-01T10:00")
}

function place(value, loc, got) {
  let at = value;
  for (const key of loc.slice(0, -1)) at = at[key] ??= {};
  at[loc[loc.length - 1]] = got;
}
