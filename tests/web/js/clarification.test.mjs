// Unit tests of the overlay's pure parts (node --test; run by tests/web/test_js_units.py).
import assert from "node:assert/strict";
import { test } from "node:test";

import { activeBundle, countRunes, MAX_RUNES } from "../../../src/kandev/web/static/js/clarification.js";

const row = (id, index, total, extra = {}) => ({
  id, turn_id: "t2", created_at: `2026-01-01T00:00:0${index}Z`,
  metadata: { pending_id: "p", question_id: `q${index}`, question_index: index, question_total: total, ...extra },
});
const waiting = { state: "WAITING_FOR_INPUT", current_turn_id: "t2" };

test("runes are code points: an emoji or a CJK Extension B character counts once", () => {
  assert.equal(countRunes("😀".repeat(MAX_RUNES)), 2000);
  assert.equal("😀".repeat(MAX_RUNES).length, 4000); // what maxlength would count
  assert.equal(countRunes("𠀀a"), 2);
  assert.equal(countRunes("e\u0301"), 2); // a combining mark is its own code point, as on the server
});

test("the arrival gate waits for every question of the bundle", () => {
  assert.deepEqual(activeBundle([row("a", 0, 2)], waiting), []);
  const both = activeBundle([row("b", 1, 2), row("a", 0, 2)], waiting);
  assert.deepEqual(both.map((r) => r.id), ["a", "b"]); // in question order
});

test("only the current turn's pending bundle, and only while the session can take input", () => {
  const old = { ...row("o", 0, 1), turn_id: "t1" };
  assert.deepEqual(activeBundle([old], waiting), []);
  assert.deepEqual(activeBundle([row("a", 0, 1)], { ...waiting, state: "IDLE" }), []);
  const answered = row("a", 0, 1, { status: "answered" });
  assert.deepEqual(activeBundle([answered], waiting), []);
  assert.equal(activeBundle([row("a", 0, 1, { status: "pending" })], waiting).length, 1);
});

test("the newest pending bundle wins", () => {
  const first = row("a", 0, 1);
  const second = { ...row("b", 1, 1), metadata: { ...row("b", 0, 1).metadata, pending_id: "p2" } };
  assert.deepEqual(activeBundle([first, second], waiting).map((r) => r.id), ["b"]);
});
