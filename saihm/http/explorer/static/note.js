// C2SP signed notes and tlog-checkpoints (docs/formats.md section 2), parsed and checked in the
// browser. Parsers throw NoteError on anything malformed; they never skip a line.

export class NoteError extends Error {}

const EM_DASH = "\u2014 ";
const enc = new TextEncoder();

export function b64decode(text) {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0) {
    throw new NoteError("not canonical base64");
  }
  const bytes = Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
  if (b64encode(bytes) !== text) throw new NoteError("not canonical base64");
  return bytes;
}

export function b64encode(bytes) {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s);
}

function u64(bytes, at) {
  let v = 0n;
  for (let i = 0; i < 8; i++) v = (v << 8n) | BigInt(bytes[at + i]);
  return v;
}

// A signed note: {text, signatures: [{name, keyId (hex), signature (bytes), line}]}.
export function parseNote(note) {
  if (!note.endsWith("\n")) throw new NoteError("a note ends with a newline");
  const split = note.lastIndexOf("\n\n");
  if (split < 0) throw new NoteError("a note has a blank line before its signatures");
  const text = note.slice(0, split + 1);
  const lines = note.slice(split + 2, -1).split("\n");
  if (lines.length > 100) throw new NoteError("more than 100 signatures");
  const signatures = lines.map((line) => {
    if (!line.startsWith(EM_DASH)) throw new NoteError("a signature line starts with an em dash");
    const rest = line.slice(EM_DASH.length);
    const space = rest.lastIndexOf(" ");
    const name = rest.slice(0, space);
    if (space <= 0 || /[\s+]/u.test(name)) throw new NoteError("a bad key name");
    const blob = b64decode(rest.slice(space + 1));
    if (blob.length < 5) throw new NoteError("a signature shorter than 5 bytes");
    const keyId = Array.from(blob.slice(0, 4), (b) => b.toString(16).padStart(2, "0")).join("");
    return { name, keyId, signature: blob.slice(4), line };
  });
  return { text, signatures };
}

// A checkpoint body: {origin, size (BigInt), root (32 bytes), extensions}.
export function parseCheckpoint(text) {
  const lines = text.slice(0, -1).split("\n");
  if (lines.length < 3 || !lines[0]) throw new NoteError("a checkpoint has three lines");
  if (!/^(0|[1-9][0-9]*)$/.test(lines[1])) throw new NoteError("a bad tree size line");
  const root = b64decode(lines[2]);
  if (root.length !== 32) throw new NoteError("the root hash is not 32 bytes");
  return { origin: lines[0], size: BigInt(lines[1]), root, extensions: lines.slice(3) };
}

// A verifier key "<name>+<hex key ID>+<base64(type || key)>": {name, keyId, type, key}.
export async function parseVkey(vkey) {
  const first = vkey.indexOf("+");
  const second = vkey.indexOf("+", first + 1);
  const parts = [vkey.slice(0, first), vkey.slice(first + 1, second), vkey.slice(second + 1)];
  if (first <= 0 || second < 0 || !/^[0-9a-f]{8}$/.test(parts[1])) {
    throw new NoteError("a bad verifier key");
  }
  const blob = b64decode(parts[2]);
  if (blob.length < 2) throw new NoteError("a bad verifier key");
  const input = new Uint8Array([...enc.encode(parts[0]), 0x0a, ...blob]);
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", input));
  const computed = Array.from(digest.slice(0, 4), (b) => b.toString(16).padStart(2, "0")).join("");
  if (computed !== parts[1]) throw new NoteError("a verifier key's ID does not match its key");
  return { name: parts[0], keyId: parts[1], type: blob[0], key: blob.slice(1) };
}

const TYPE_NAMES = {
  0x01: "Ed25519",
  0x04: "Ed25519 cosignature (tlog-cosignature/v1)",
  0x06: "ML-DSA-44 (subtree/v1)",
};

export function typeName(type) {
  return TYPE_NAMES[type] || `type 0x${type.toString(16).padStart(2, "0")}`;
}

let ed25519Support = null;

// Whether this browser's WebCrypto verifies Ed25519 (feature-detected once).
export async function hasEd25519() {
  if (ed25519Support === null) {
    try {
      await crypto.subtle.importKey("raw", new Uint8Array(32), { name: "Ed25519" }, false, [
        "verify",
      ]);
      ed25519Support = true;
    } catch {
      ed25519Support = false;
    }
  }
  return ed25519Support;
}

async function ed25519Verify(key, signature, message) {
  const k = await crypto.subtle.importKey("raw", key, { name: "Ed25519" }, false, ["verify"]);
  return crypto.subtle.verify({ name: "Ed25519" }, k, signature, message);
}

// One result per signature line: {name, keyId, kind, status, detail}; status is "verified",
// "failed", "not-checked" or "unknown-key". A line whose (name, key ID) match no known key is
// listed but says so; the note is not rejected for it (c2sp.org/signed-note).
export async function checkSignatures(parsed, vkeys) {
  const ed = await hasEd25519();
  const out = [];
  for (const sig of parsed.signatures) {
    const key = vkeys.find((k) => k.name === sig.name && k.keyId === sig.keyId);
    const row = { name: sig.name, keyId: sig.keyId, kind: "no published key", status: "unknown-key" };
    if (!key) {
      row.detail = "No key this page knows has this name and key ID; it was not checked.";
      if (sig.signature.length === 72) {
        row.kind = "probably a tlog-cosignature (timestamp and Ed25519)";
        row.timestamp = u64(sig.signature, 0);
      } else if (sig.signature.length === 8 + 2420) {
        row.kind = "probably ML-DSA-44 (timestamp and subtree/v1 signature)";
        row.timestamp = u64(sig.signature, 0);
      }
      out.push(row);
      continue;
    }
    row.kind = typeName(key.type);
    if (key.type === 0x06) {
      row.timestamp = sig.signature.length >= 8 ? u64(sig.signature, 0) : null;
      row.status = "not-checked";
      row.detail =
        "Browsers have no ML-DSA; run `saihm verify URL` to check this line offline.";
    } else if (key.type !== 0x01 && key.type !== 0x04) {
      row.status = "not-checked";
      row.detail = "This page does not know how to check this signature type.";
    } else if (!ed) {
      row.status = "not-checked";
      row.detail =
        "This browser's WebCrypto has no Ed25519, so the line was not checked here; " +
        "run `saihm verify URL`, or use a browser with Ed25519 (recent Chromium or Firefox).";
    } else {
      let signature = sig.signature;
      let message = enc.encode(parsed.text);
      if (key.type === 0x04) {
        if (signature.length !== 72) {
          out.push({ ...row, status: "failed", detail: "A cosignature is 72 bytes." });
          continue;
        }
        row.timestamp = u64(signature, 0);
        message = enc.encode(`cosignature/v1\ntime ${row.timestamp}\n${parsed.text}`);
        signature = signature.slice(8);
      }
      const good = signature.length === 64 && (await ed25519Verify(key.key, signature, message));
      row.status = good ? "verified" : "failed";
      row.detail = good
        ? "Ed25519 signature verified in this browser (WebCrypto)."
        : "The Ed25519 signature does NOT verify over this note.";
    }
    out.push(row);
  }
  return out;
}
