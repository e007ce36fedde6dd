import assert from "node:assert/strict";
import { test } from "node:test";

import { HubAndSpoke, type JsonObject } from "../src/webhooks.js";

test("hub and spokes convert through the hub, keeping kind and metadata", () => {
  const conversion = new HubAndSpoke("example.com", "v1").spoke("v2", {
    toHub: (o) => ({ size: o["capacity"] }),
    fromHub: (hub) => ({ capacity: hub["size"] }),
  });
  const v1: JsonObject = { apiVersion: "example.com/v1", kind: "Box", metadata: { name: "b" }, size: 3 };
  const v2 = conversion.convert(v1, "example.com/v2");
  assert.deepEqual(v2, { apiVersion: "example.com/v2", kind: "Box", metadata: { name: "b" }, capacity: 3 });
  assert.deepEqual(conversion.convert(v2, "example.com/v1"), v1);
  assert.throws(() => conversion.convert(v1, "other.com/v2"), { message: "other.com/v2 is not a version of example.com" });
  assert.throws(() => conversion.convert(v1, "example.com/v3"), { message: "no conversion to v3" });
});
