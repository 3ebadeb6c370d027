/* Live updates: one EventSource per tab on api/v1/live, which sends the server's change
   version now and whenever the database changes. A new version refreshes the page at
   once; while the stream is up the page does not poll. If the stream fails (a proxy
   that buffers, the server's cap on live clients, a restart), the page polls again and
   the stream is retried with backoff: 1 s, doubling up to 30 s. A hidden tab closes
   its stream (browsers allow few connections per host, and a hidden page draws
   nothing), and opens it again when shown. */

const FIRST_RETRY_MS = 1000;
const LONGEST_RETRY_MS = 30000;

/* A live stream for this tab. `onVersion()` is called when the version differs from
   the last seen (and for the first one after `open`: a change may have been missed
   while closed); `onState(up)` when the stream comes up or goes down. Returns
   { open, close }. */
export function liveStream(onVersion, onState) {
  const state = { source: null, timer: 0, wait: FIRST_RETRY_MS, version: null, up: null,
    wanted: false };

  function setUp(up) {
    if (state.up === up) return;
    state.up = up;
    onState(up);
  }

  function connect() {
    clearTimeout(state.timer);
    if (!state.wanted || state.source) return;
    const source = new EventSource("api/v1/live");
    state.source = source;
    source.onmessage = (message) => {
      let version = null;
      try {
        version = JSON.parse(message.data).version;
      } catch (ignored) {
        return; // not ours (a proxy's page): the next failure falls back to polling
      }
      state.wait = FIRST_RETRY_MS;
      setUp(true);
      if (version !== state.version) {
        state.version = version;
        onVersion();
      }
    };
    source.onerror = () => {
      // Closed by us, and retried by us: the browser's own retry would not back off.
      source.close();
      if (state.source === source) state.source = null;
      setUp(false);
      if (!state.wanted) return;
      state.timer = setTimeout(connect, state.wait);
      state.wait = Math.min(state.wait * 2, LONGEST_RETRY_MS);
    };
  }

  function open() {
    if (state.wanted) return; // open already, or waiting to retry: keep the backoff
    state.wanted = true;
    connect();
  }

  function close() {
    state.wanted = false;
    clearTimeout(state.timer);
    if (state.source) state.source.close();
    state.source = null;
    state.version = null;
    setUp(false);
  }

  return { open, close };
}
