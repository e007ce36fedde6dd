import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

test("the SDK's copy of the contract is the host's, word for word", () => {
  const ours = readFileSync(new URL("../../wit/plugin.wit", import.meta.url), "utf8");
  const contract = readFileSync(new URL("../../../wit/plugin.wit", import.meta.url), "utf8");
  assert.ok(ours === contract, "sdk/typescript/wit/plugin.wit differs from sdk/wit/plugin.wit: copy it over");
});
