// The person's own page. The token lives in the `token` variable below and nowhere else: never
// a URL, cookie or Web Storage; it leaves the page only as an Authorization header on calls to
// this origin. Everything shown that came from a cell is text (textContent), never HTML.
import { hex, leafHash, ProofError, sha256, unhex, verifyInclusion } from "../explorer/merkle.js";
import { b64decode, checkSignatures, parseCheckpoint, parseNote, parseVkey } from "../explorer/note.js";
import { code, el, facts, readReceipt, status } from "../explorer/views.js";

const PAGE = 20;
const LOG_PAGE = 1000;
const LOG_PAGES = 3; // at most 3,000 receipts per list before the page asks for more
const KINDS = ["memory", "said", "did", "end"];
const KIND_WORDS = { memory: "Remembered", said: "Said", did: "Did", end: "Session ended" };
const OPERATION_WORDS = {
  REMEMBER: "Remembered",
  FORGET: "Forgotten: its key was destroyed",
  RECALL: "Read",
  STATUS: "Status asked",
  SHARE: "Shared",
  REVOKE: "Sharing stopped",
};
// Bidirectional and invisible formatting characters: shown as a visible marker, so content
// cannot reorder or hide the text around it.
const CONTROLS = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]/g;

const root = new URL("..", document.baseURI).href;
let token = null;
const state = { holderId: null, sessionId: null, holderWide: false, recall: null };
const $ = (id) => document.getElementById(id);

class CallError extends Error {
  constructor(code, status) {
    super(code);
    this.code = code;
    this.status = status;
  }
}

async function request(path, { method = "GET", body, auth = true } = {}) {
  const headers = { Accept: "application/json" };
  if (auth) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(root + path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store",
    credentials: "omit",
    referrerPolicy: "no-referrer",
  });
  if (!response.ok) {
    let codeText = `HTTP ${response.status}`;
    try {
      codeText = (await response.json()).error || codeText;
    } catch {}
    throw new CallError(codeText, response.status);
  }
  return response;
}

async function tool(method, params = {}) {
  const response = await request("", { method: "POST", body: { method, params } });
  return { result: await response.json(), next: response.headers.get("Saihm-Recall-Next") };
}

const publicJson = async (path) => (await request(path, { auth: false })).json();

// -- words for people ---------------------------------------------------------------------------

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

function date(seconds) {
  const d = new Date(Number(seconds) * 1000);
  if (Number.isNaN(d.getTime())) return String(seconds);
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()}, ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())} UTC`;
}

function day(seconds) {
  const d = new Date(Number(seconds) * 1000);
  if (Number.isNaN(d.getTime())) return String(seconds);
  return `${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()}`;
}

const dayKey = (seconds) => new Date(Number(seconds) * 1000).toISOString().slice(0, 10);
const isoSeconds = (iso) => Date.parse(iso) / 1000;

// Text as nodes: control characters become a visible [U+XXXX] marker.
function safeText(text) {
  const out = [];
  let last = 0;
  for (const match of String(text).matchAll(CONTROLS)) {
    if (match.index > last) out.push(document.createTextNode(text.slice(last, match.index)));
    const point = match[0].codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
    out.push(el("span", { class: "control", title: "an invisible formatting character", text: `[U+${point}]` }));
    last = match.index + match[0].length;
  }
  if (last < String(text).length) out.push(document.createTextNode(String(text).slice(last)));
  return out;
}

const short = (id) => `${id.slice(0, 8)}…`;

function idOnDemand(label, id) {
  return el("details", { class: "ids" }, el("summary", { text: label }), code(id));
}

function problem(node, err) {
  status(node, "fail", `That did not work: ${err.message}.`);
}

// -- signing in -------------------------------------------------------------------------------

async function signIn(event) {
  event.preventDefault();
  const input = $("token");
  const candidate = input.value.trim();
  input.value = ""; // not kept in the page's DOM either
  const out = $("signin-result");
  if (!candidate) {
    status(out, "fail", "Paste a token first.");
    return;
  }
  token = candidate;
  document.body.dataset.ready = "starting";
  try {
    const { result } = await tool("saihm_status");
    state.holderId = result.agentIdHashHex;
    state.sessionId = result.sessionId;
    // Whether the person's actions are open to this token: a holder-wide grant, not a
    // session token or a consumer grant (the server decides; 403 otherwise).
    try {
      await request("me/v1/grants");
      state.holderWide = true;
    } catch (err) {
      if (err.status !== 403) throw err;
      state.holderWide = false;
    }
  } catch (err) {
    token = null;
    status(out, "fail", err.status === 401
      ? "This token was refused: it is not valid, has expired or was revoked."
      : `Could not sign in: ${err.message}.`);
    document.body.dataset.ready = "failed";
    return;
  }
  status(out, "pass", [
    state.holderWide
      ? "Signed in with a grant over all your sessions: you see every memory it covers, and can manage who may read them. "
      : "Signed in with a session token: you see this session's memories only. ",
    el("button", { type: "button", class: "plain", id: "signout", onclick: signOut, text: "Sign out" }),
    idOnDemand("Your holder id", state.holderId),
  ]);
  $("main").hidden = false;
  $("views-nav").hidden = false;
  await Promise.all([
    recall(false).catch((err) => problem($("memory-list"), err)),
    loadSharing().catch((err) => problem($("sharing-body"), err)),
    loadPending().catch((err) => problem($("pending-body"), err)),
    loadActivity().catch((err) => problem($("activity-body"), err)),
  ]);
  document.body.dataset.ready = "yes";
}

function signOut() {
  token = null;
  state.holderId = state.sessionId = null;
  $("main").hidden = true;
  $("views-nav").hidden = true;
  for (const id of ["memory-list", "sharing-body", "pending-body", "activity-body"]) $(id).replaceChildren();
  status($("signin-result"), "not-checked", "Signed out: this page no longer holds a token.");
  document.body.dataset.ready = "signed-out";
}

// -- memories ---------------------------------------------------------------------------------

function recallParams() {
  const form = $("recall-form");
  const query = $("query").value.trim();
  const kinds = [...form.querySelectorAll("input[name=kind]:checked")].map((box) => box.value);
  const namespaces = $("namespaces").value.split(",").map((n) => n.trim()).filter(Boolean);
  return { query, kinds, namespaces };
}

async function recall(more) {
  const list = $("memory-list");
  const button = $("memory-more");
  if (!more) {
    const wanted = recallParams();
    if (!wanted.kinds.length) {
      status(list, "fail", "Choose at least one kind.");
      button.hidden = true;
      return;
    }
    state.recall = { ...wanted, items: [], next: null };
  }
  const r = state.recall;
  const params = { limit: PAGE };
  if (r.query) params.query = r.query;
  if (r.kinds.length !== KINDS.length) params.kinds = r.kinds;
  if (r.namespaces.length) params.namespaces = r.namespaces;
  if (more && r.next) params.cursor = r.next;
  button.disabled = true;
  try {
    const { result, next } = await tool("saihm_recall", params);
    r.items.push(...result);
    r.next = next;
  } finally {
    button.disabled = false;
  }
  renderMemories();
  button.hidden = r.next === null;
}

function renderMemories() {
  const r = state.recall;
  const list = $("memory-list");
  list.className = "";
  delete list.dataset.result;
  if (!r.items.length) {
    list.replaceChildren(el("p", { text: r.query ? "Nothing matches." : "No memories or records here." }));
    return;
  }
  if (r.query) {
    list.replaceChildren(el("p", { class: "note", text: `${r.items.length} found for “${r.query}”, best match first (the same ranking as recall).` }),
      ...r.items.map((item) => memoryCard(item, true)));
    return;
  }
  const groups = new Map();
  for (const item of r.items) {
    const key = `${item.sessionId} ${dayKey(item.timestamp)}`;
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(item);
  }
  const sections = [...groups.values()].map((items) => {
    const first = items[0];
    const who = first.sessionId === state.sessionId ? "This session" : `Session ${short(first.sessionId)}`;
    return el("section", { class: "group", "data-session": first.sessionId, "data-day": dayKey(first.timestamp) },
      el("h3", { text: `${who}, ${day(first.timestamp)}` }),
      ...items.map((item) => memoryCard(item, false)));
  });
  list.replaceChildren(el("p", { class: "note", text: `${r.items.length} shown, by session and day.` }), ...sections);
}

function memoryCard(item, withSession) {
  const history = el("div", { class: "history-out" });
  const out = el("div", { class: "forget-out" });
  const meta = [KIND_WORDS[item.kind] || item.kind, `in ${item.namespace}`, date(item.timestamp)];
  if (withSession) meta.push(item.sessionId === state.sessionId ? "this session" : `session ${short(item.sessionId)}`);
  const card = el("article", { class: "memory", "data-cell-id": item.cellId, "data-kind": item.kind },
    el("p", { class: "meta", text: meta.join(" · ") }),
    el("p", { class: "content" }, ...safeText(item.plaintext)));
  const actions = el("div", { class: "actions" },
    el("button", { type: "button", class: "plain history", onclick: () => showHistory(item.cellId, history), text: "History" }),
    el("button", { type: "button", class: "danger forget", onclick: () => askForget(item, card, out), text: "Forget…" }));
  card.append(actions, out, history);
  return card;
}

async function showHistory(cellId, out) {
  out.replaceChildren(el("p", { text: "Reading…" }));
  try {
    const page = await publicJson(`log/v1/receipts?subjectId=${cellId}&limit=100`);
    const rows = page.receipts.map((entry) => {
      const r = entry.receipt;
      let words = OPERATION_WORDS[r.operation] || r.operation;
      if (r.operation === "REMEMBER" && r.detail && r.detail.supersedes) words = "Remembered, replacing an earlier version";
      return el("li", { "data-operation": r.operation },
        `${words}, ${date(r.timestamp)} `, idOnDemand(`receipt #${entry.index}`, r.receiptId));
    });
    out.replaceChildren(el("h4", { text: "History (receipts in the public log)" }),
      el("ul", { class: "history" }, ...rows),
      page.next === null ? "" : el("p", { class: "note", text: "Only the first 100 are shown." }));
  } catch (err) {
    problem(out, err);
  }
}

function askForget(item, card, out) {
  const yes = el("button", { type: "button", class: "danger confirm-forget", text: "Yes, forget it for good" });
  const no = el("button", { type: "button", class: "plain", text: "Keep it" });
  no.addEventListener("click", () => out.replaceChildren());
  yes.addEventListener("click", () => forget(item, card, out));
  out.replaceChildren(el("div", { class: "status not-checked confirm", role: "alertdialog" },
    el("p", { text: "Forget this? Its key is destroyed: nobody, the operator included, can read it again, and the log keeps a receipt that it was done." }),
    el("div", { class: "actions" }, yes, no)));
  no.focus(); // the safe choice has the focus
}

async function forget(item, card, out) {
  out.replaceChildren(el("p", { text: "Forgetting…" }));
  let done;
  try {
    ({ result: done } = await tool("saihm_forget", { id: item.cellId }));
  } catch (err) {
    problem(out, err);
    return;
  }
  if (!done.success) {
    status(out, "fail", "This was already forgotten, or is not yours to forget.");
    return;
  }
  card.dataset.state = "forgotten";
  card.querySelector(".content").replaceChildren(el("em", { text: "(forgotten)" }));
  card.querySelector(".forget").remove();
  const result = el("p", { class: "status", "data-check": "erasure", role: "status", "aria-live": "polite" });
  out.replaceChildren(el("h4", { text: `Forgotten, ${date(done.epoch)}` }), result);
  await verifyErasure(done.cellId, done.destructionAnchor, result, out);
}

// -- proof in the browser (the explorer's Merkle and signed-note code) ------------------------

async function verifiedCheckpoint() {
  const keys = await publicJson("log/v1/keys");
  const vkeys = [];
  for (const k of keys.checkpointKeys || []) {
    try {
      vkeys.push(await parseVkey(k.vkey));
    } catch {}
  }
  const text = await (await request("log/checkpoint", { auth: false })).text();
  const parsed = parseNote(text);
  const body = parseCheckpoint(parsed.text);
  const lines = await checkSignatures(parsed, vkeys);
  const ed = lines.find((l) => l.name === body.origin && l.kind === "Ed25519");
  return { body, signed: ed ? ed.status === "verified" : false };
}

async function verifyErasure(cellId, receiptId, result, out) {
  status(result, "running", "Checking the FORGET receipt in this browser…");
  try {
    const entry = await publicJson(`log/v1/receipts/${receiptId}`);
    const r = entry.receipt;
    const leaf = b64decode(entry.cbor);
    const { fields, signedBytes } = readReceipt(leaf);
    const id = hex(await sha256(signedBytes));
    if (id !== receiptId || hex(fields.get(1)) !== id || fields.get(3) !== "FORGET" || hex(fields.get(2)) !== cellId ||
        r.operation !== "FORGET" || r.subjectId !== cellId) {
      throw new ProofError("the logged receipt is not a FORGET of this memory with this id");
    }
    const cp = await verifiedCheckpoint();
    if (!cp.signed) throw new ProofError("the checkpoint's Ed25519 signature did not verify");
    const size = cp.body.size;
    if (BigInt(entry.index) >= size) throw new ProofError("the checkpoint does not yet cover the receipt");
    const proof = await publicJson(`log/v1/proof/inclusion?index=${entry.index}&size=${size}`);
    await verifyInclusion(await leafHash(leaf), entry.index, size, proof.proof.map(unhex), cp.body.root);
    const erasures = await publicJson("log/v1/erasures");
    if (!erasures.cellIds.includes(cellId)) throw new ProofError("the memory is not on the public erasure list");
    status(result, "pass", [
      el("strong", { text: "VERIFIED in this browser: the deletion is in the log. " }),
      `The FORGET receipt (#${entry.index}, ${date(r.timestamp)}) is included in the signed log of size ${size} ` +
      `(RFC 9162 inclusion proof of ${proof.proof.length} hashes, Ed25519 checkpoint signature), ` +
      "and the memory is on the public erasure list. Not checked here: the receipt's ML-DSA-65 signature (saihm verify).",
    ]);
    out.append(el("details", {}, el("summary", { text: "The FORGET receipt" }),
      facts([["Receipt id", code(r.receiptId)], ["Memory id", code(r.subjectId)], ["Log index", String(entry.index)], ["When", date(r.timestamp)]])));
  } catch (err) {
    const why = err instanceof ProofError ? err.message : `a proof could not be read (${err.message})`;
    status(result, "fail", [el("strong", { text: "NOT VERIFIED. " }), `${why}.`]);
  }
}

// -- who may read it ----------------------------------------------------------------------------

async function allLog(query) {
  const out = [];
  let cursor = 0;
  for (let i = 0; i < LOG_PAGES && cursor !== null; i++) {
    const page = await publicJson(`log/v1/receipts?${query}&limit=${LOG_PAGE}&cursor=${cursor}`);
    out.push(...page.receipts);
    cursor = page.next;
  }
  return { receipts: out, complete: cursor === null };
}

function action(label, cls, run, out) {
  return el("button", { type: "button", class: cls, text: label, onclick: async (event) => {
    event.target.disabled = true;
    try {
      await run();
    } catch (err) {
      problem(out, err);
      event.target.disabled = false;
    }
  } });
}

async function loadSharing() {
  const box = $("sharing-body");
  const out = el("p", { class: "status", role: "status", "aria-live": "polite" });
  const { result: s } = await tool("saihm_status");
  const parts = [];
  const reload = async (message) => {
    await loadSharing();
    status($("sharing-body").querySelector(".status"), "pass", message);
  };
  const mine = s.contracts.map((c) => el("li", { "data-contract": c.contractId },
    `You share ${c.mode.toLowerCase()} with ${c.granteeIds.length} agent${c.granteeIds.length === 1 ? "" : "s"}, until ${date(c.expiresAt)}. `,
    action("Stop sharing", "danger revoke-share", async () => {
      await tool("saihm_revoke_share", { contractId: c.contractId });
      await reload("Sharing stopped.");
    }, out),
    idOnDemand("ids", `contract ${c.contractId}; with ${c.granteeIds.join(", ")}`)));
  parts.push(el("h3", { text: "What you share" }),
    mine.length ? el("ul", { class: "people" }, ...mine) : el("p", { text: "You share nothing." }));
  const theirs = s.incomingContracts.map((c) => el("li", { "data-contract": c.contractId },
    `Holder ${short(c.holderIdHex)} shares ${c.mode.toLowerCase()} with you, until ${date(c.expiresAt)}: ${c.accepted ? "accepted" : "waiting for your answer"}. `,
    c.accepted ? "" : action("Accept", "accept-contract", async () => {
      await tool("saihm_accept_contract", { contractId: c.contractId });
      await reload("Accepted.");
    }, out),
    c.accepted ? "" : action("Decline", "danger decline-contract", async () => {
      await tool("saihm_decline_contract", { contractId: c.contractId });
      await reload("Declined.");
    }, out),
    idOnDemand("ids", `contract ${c.contractId}; from ${c.holderIdHex}`)));
  parts.push(el("h3", { text: "Shared with you" }),
    theirs.length ? el("ul", { class: "people" }, ...theirs) : el("p", { text: "Nothing is shared with you." }));
  parts.push(el("h3", { text: "Agents with access across your sessions" }));
  if (!state.holderWide) {
    parts.push(el("p", { class: "note", text: "Grants are managed with a grant over all your sessions (saihm grant --sessions all); this session token cannot see or change them." }));
  } else {
    parts.push(await grantList(out, reload));
  }
  box.replaceChildren(out, ...parts);
}

async function grantList(out, reload) {
  const [granted, ungranted, named] = await Promise.all([
    allLog("operation=GRANT"), allLog("operation=UNGRANT"), request("me/v1/grants").then((r) => r.json())]);
  const gone = new Set(ungranted.receipts.map((e) => e.receipt.subjectId));
  const names = new Map(named.grants.filter((g) => g.grantId).map((g) => [g.grantId, g]));
  const now = Date.now() / 1000;
  const rows = granted.receipts
    .filter((e) => e.receipt.holderId === state.holderId && !gone.has(e.receipt.subjectId))
    .map((e) => {
      const grantId = e.receipt.subjectId;
      const detail = e.receipt.detail || {};
      const consumer = names.get(grantId);
      const who = consumer ? `“${consumer.consumer}”` : "An agent holding this grant's token";
      const what = detail.namespaces && detail.namespaces.length ? `your ${detail.namespaces.join(", ")} memories` : "all your memories";
      const mode = consumer && consumer.mode ? ` (${consumer.mode})` : "";
      const until = Number(detail.expiresAt) < now ? `expired ${date(detail.expiresAt)}` : `until ${date(detail.expiresAt)}`;
      return el("li", { "data-grant": grantId },
        `${who} may read ${what}${mode}, in every session, ${until}; granted ${date(e.receipt.timestamp)}. `,
        action("Revoke", "danger revoke-grant", async () => {
          await request("me/v1/grants/revoke", { method: "POST", body: { grantId } });
          await reload("Revoked: its token is refused from now on.");
        }, out),
        idOnDemand("id", `grant ${grantId}`));
    });
  const note = granted.complete && ungranted.complete ? "" : el("p", { class: "note", text: `Only the first ${LOG_PAGE * LOG_PAGES} grants of the log were read.` });
  return el("div", {}, rows.length ? el("ul", { class: "people grants" }, ...rows) : el("p", { text: "No grants." }), note);
}

// -- waiting for you ----------------------------------------------------------------------------

async function loadPending() {
  const box = $("pending-body");
  if (!state.holderWide) {
    box.replaceChildren(el("p", { class: "note", text: "Proposals are decided with a grant over all your sessions; this session token cannot see them." }));
    return;
  }
  const out = el("p", { class: "status", role: "status", "aria-live": "polite" });
  const { pending } = await (await request("me/v1/pending")).json();
  const reload = async (message) => {
    await loadPending();
    status($("pending-body").querySelector(".status"), "pass", message);
  };
  const rows = pending.map((p) => el("li", { "data-proposal": p.id },
    el("p", { text: `“${p.consumer}” proposes to add to ${p.namespace ?? "a namespace"}, ${date(isoSeconds(p.proposed_at))}:` }),
    el("pre", {}, ...safeText(JSON.stringify(p.record, null, 2))),
    el("div", { class: "actions" },
      action("Accept", "accept-proposal", async () => {
        await request("me/v1/pending/accept", { method: "POST", body: { id: p.id } });
        await reload("Accepted: it is now one of your memories.");
        await recall(false);
      }, out),
      action("Reject", "danger reject-proposal", async () => {
        await request("me/v1/pending/reject", { method: "POST", body: { id: p.id } });
        await reload("Rejected: it was dropped and its key destroyed.");
      }, out))));
  box.replaceChildren(out, rows.length ? el("ul", { class: "people proposals" }, ...rows) : el("p", { text: "Nothing is waiting for you." }));
}

// -- activity -----------------------------------------------------------------------------------

async function loadActivity() {
  const box = $("activity-body");
  const { receipts, complete } = await allLog(`holderId=${state.holderId}`);
  if (!receipts.length) {
    box.replaceChildren(el("p", { text: "No receipts yet." }));
    return;
  }
  const days = new Map();
  const ops = new Set();
  for (const e of receipts) {
    const key = dayKey(e.receipt.timestamp);
    if (!days.has(key)) days.set(key, { seconds: e.receipt.timestamp, counts: new Map() });
    const counts = days.get(key).counts;
    counts.set(e.receipt.operation, (counts.get(e.receipt.operation) || 0) + 1);
    ops.add(e.receipt.operation);
  }
  const columns = [...ops].sort();
  const rows = [...days.entries()].sort((a, b) => (a[0] < b[0] ? 1 : -1)).map(([key, d]) =>
    el("tr", { "data-day": key }, el("th", { scope: "row", text: day(d.seconds) }),
      ...columns.map((op) => el("td", { "data-operation": op, text: String(d.counts.get(op) || "") }))));
  box.replaceChildren(el("table", { class: "activity" },
    el("caption", { text: `Your receipts by day and operation (${receipts.length}${complete ? "" : ", the first ones only"})` }),
    el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "Day" }), ...columns.map((op) => el("th", { scope: "col", text: op })))),
    el("tbody", {}, ...rows)));
}

// -- start --------------------------------------------------------------------------------------

$("signin-form").addEventListener("submit", signIn);
$("recall-form").addEventListener("submit", (event) => {
  event.preventDefault();
  recall(false).catch((err) => problem($("memory-list"), err));
});
$("memory-more").addEventListener("click", () => recall(true).catch((err) => problem($("memory-list"), err)));
document.body.dataset.ready = "signed-out";
