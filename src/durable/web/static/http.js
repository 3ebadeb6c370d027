/* Talking to the JSON API: relative URLs (the app may be mounted under any prefix),
   the session cookie, the CSRF header on POSTs, and conditional GETs for polling. */

/* What GET api/v1/session said; filled in once at start. Until then nothing is
   writable, so no action is offered before the CSRF token is known. */
export const session = { csrf: "", read_only: true };

export class ApiError extends Error {
  constructor(status, detail, errors) {
    super(detail);
    this.status = status;
    this.errors = errors || []; // a typed event's payload: [{ loc, msg }] per field
  }
}

/* The JSON body of a successful response; else an ApiError carrying the problem's
   detail (the API answers errors as application/problem+json). */
export async function readJSON(response) {
  if (response.ok) return response.status === 204 ? null : response.json();
  let detail = `${response.status} ${response.statusText}`;
  let errors = [];
  try {
    const problem = await response.json();
    detail = problem.detail || problem.title || detail;
    if (Array.isArray(problem.errors)) errors = problem.errors;
  } catch (ignored) {
    // not problem+json (a proxy's error page): the status line says enough
  }
  if (response.status === 401) {
    detail = "You are not signed in: open the URL that `durable ui` printed (it holds the token).";
  }
  throw new ApiError(response.status, detail, errors);
}

export async function getJSON(url) {
  const response = await fetch(url, {
    credentials: "same-origin", cache: "no-store", headers: { Accept: "application/json" },
  });
  return readJSON(response);
}

/* A GET that sends If-None-Match when the server gave an ETag for this URL before,
   and reports whether the answer changed. Each page makes its own, so a page that was
   just opened always draws from a full answer. */
export function conditionalGet() {
  const cache = new Map();
  return async (url) => {
    const cached = cache.get(url);
    const headers = { Accept: "application/json" };
    if (cached) headers["If-None-Match"] = cached.etag;
    // no-store: the browser's cache stays out of it, so a 304 reaches this code as is
    const response = await fetch(url, { headers, credentials: "same-origin", cache: "no-store" });
    if (response.status === 304 && cached) return { data: cached.data, changed: false };
    const data = await readJSON(response);
    const etag = response.headers.get("ETag");
    cache.delete(url);
    if (etag) cache.set(url, { etag, data });
    if (cache.size > 50) cache.delete(cache.keys().next().value); // filters change URLs
    return { data, changed: true };
  };
}

/* POST a JSON body with the session's CSRF token; the browser adds Origin itself. */
export async function post(url, body) {
  const response = await fetch(url, {
    method: "POST",
    credentials: "same-origin",
    cache: "no-store",
    headers: {
      "Content-Type": "application/json",
      Accept: "application/json",
      "X-CSRF-Token": session.csrf,
    },
    body: JSON.stringify(body),
  });
  return readJSON(response);
}
