// Golden payloads for core/codec made by Node's zlib and @msgpack/msgpack,
// the libraries a JavaScript agent publishes with. See gen_python.py for the
// file naming; the expected JSON of NAME is SUBJECT.expected.json.
//
// Two things only a JavaScript producer does, and the Go decoder must accept:
//   - object keys that look like array indices ("0", "17") enumerate before
//     all others, so a compacted object {"_kc":1, "0":...} is written with the
//     marker LAST, in JSON and in MessagePack alike;
//   - @msgpack/msgpack writes object keys as strings, so compacted keys are
//     decimal strings, not integers; Dates become timestamp extensions.
//
// Run (installs the library into a temporary directory, not the repo):
//
//   d=$(mktemp -d) && npm install --prefix "$d" --no-save @msgpack/msgpack@3.1.3 &&
//   MSGPACK_PREFIX="$d" node core/codec/testdata/gen/gen_node.mjs
//
// The output is deterministic, so rerunning it must leave git clean.

import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import zlib from "node:zlib";

if (!process.env.MSGPACK_PREFIX) {
  console.error("set MSGPACK_PREFIX to the npm --prefix where @msgpack/msgpack@3.1.3 is installed");
  process.exit(2);
}
const require = createRequire(join(process.env.MSGPACK_PREFIX, "node_modules", "x.js"));
const { encode } = require("@msgpack/msgpack");

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "..", "golden");
const dict = JSON.parse(readFileSync(join(here, "..", "dictionary.json"), "utf8"));
const dictVersion = Math.max(...Object.keys(dict.versions).map(Number));
const index = new Map(dict.names.slice(0, dict.versions[String(dictVersion)]).map((n, i) => [n, i]));

const devices = [["boiler-1", "dev-001"], ["boiler-2", "dev-002"], ["chiller-A", "dev-003"],
  ["pump-7", "dev-004"], ["meter-main", "dev-005"]];
const metrics = [["temperature", "°C"], ["pressure", "bar"], ["flow", "m³/h"], ["power", "kW"],
  ["energy", "kWh"], ["vibration", "mm/s"], ["humidity", "%"], ["speed", "rpm"],
  ["current", "A"], ["status", ""]];
const codes = ["TIMEOUT", "CONNECTION_REFUSED", "DEVICE_BUSY", "BAD_DATA"];
const t0 = Date.UTC(2025, 2, 14, 9, 26, 53);
const iso = (ms) => new Date(t0 + ms).toISOString();

// The same batch as gen_python.py builds (values k/8, exact in binary).
function batch(n = 50, protocol = "modbus") {
  const messages = [];
  let k = 0;
  for (const [deviceName, deviceId] of devices) {
    const readings = [];
    for (const [metric, unit] of metrics) {
      if (k >= n) break;
      const r = { deviceName, deviceId, metric, value: ((k * 37) % 1000) / 8 - 20, unit, timestamp: iso(k * 250), quality: "GOOD" };
      if (metric === "status") r.value = k % 3;
      if (k % 7 === 3) {
        r.value = null;
        r.quality = "BAD";
        r.qualityCode = codes[k % codes.length];
      } else if (k % 5 === 0) {
        Object.assign(r, {
          anomaly_score: (k % 8) / 8,
          anomaly_threshold: 0.75,
          baseline_samples: 240 + k,
          detection_methods: k % 2 ? ["zscore", "mad"] : ["rate"],
          predicted_next: ((k * 41) % 1000) / 8 - 20,
          trend: ["rising", "falling", "stable"][k % 3],
          trend_strength: (k % 4) / 4,
          forecast_confidence: 0.875,
          time_to_threshold: { threshold: 85.5, estimated_seconds: 1800 + k, confidence: 0.625 },
        });
      }
      if (protocol === "opcua") {
        r.protocol = "opcua";
        r.nodeType = "Variable";
      }
      readings.push(r);
      k++;
    }
    messages.push({ readings });
  }
  return { timestamp: iso(0), protocol, msgId: "v2_Kx7Qm2Za_104729", messages };
}

// Compaction with string keys, as a JavaScript agent can write it: the
// marker is inserted first but enumerates after the index-like keys.
function compact(v, top = true) {
  if (Array.isArray(v)) return v.map((x) => compact(x, false));
  if (v === null || typeof v !== "object" || v instanceof Date || v instanceof Uint8Array) return v;
  const o = top ? { _kc: dictVersion } : {};
  for (const [k, x] of Object.entries(v)) {
    let key = k;
    if (index.has(k)) key = String(index.get(k));
    else if (/^[0-9~]/.test(k)) key = "~" + k;
    o[key] = compact(x, false);
  }
  return o;
}

const pack = (v, opts) => Buffer.from(encode(v, opts));
const js = (v) => Buffer.from(JSON.stringify(v));

function write(name, payload, expected) {
  writeFileSync(join(out, name), payload);
  const subject = name.split(".")[0].replace(/_kc$/, "");
  writeFileSync(join(out, subject + ".expected.json"), JSON.stringify(expected, null, 1) + "\n");
}

mkdirSync(out, { recursive: true });

const b = batch();
write("node_batch50.json", js(b), b);
write("node_batch50.json.zlib", zlib.deflateSync(js(b)), b);
write("node_batch50.json.raw", zlib.deflateRawSync(js(b)), b);
write("node_batch50.msgpack", pack(b), b);
write("node_batch50.msgpack.zlib", zlib.deflateSync(pack(b), { level: 9 }), b);
write("node_batch50.msgpack.raw", zlib.deflateRawSync(pack(b), { level: 1 }), b);
const kc = compact(b);
if (Object.keys(kc)[Object.keys(kc).length - 1] !== "_kc") throw new Error("expected the marker to enumerate last");
write("node_batch50_kc.json", js(kc), b);
write("node_batch50_kc.json.zlib", zlib.deflateSync(js(kc)), b);
write("node_batch50_kc.msgpack", pack(kc), b);
write("node_batch50_kc.msgpack.zlib", zlib.deflateSync(pack(kc)), b);
write("node_batch50_kc.msgpack.raw", zlib.deflateRawSync(pack(kc)), b);

const o = batch(20, "opcua");
write("node_opcua20.json.raw", zlib.deflateRawSync(js(o)), o);

const hb = {
  endpoint: "modbus-line3", timestamp: iso(0), state: "CONNECTED",
  stats: { messagesReceived: 1234567, messagesPublished: 4321, bytesReceived: 9876543210, bytesPublished: 123456789,
    reconnectAttempts: 0, lastPublishTime: iso(1000), lastHeartbeatTime: iso(2000), lastConnectedTime: null },
};
write("node_heartbeat.json", js(hb), hb);
write("node_heartbeat_kc.msgpack", pack(compact(hb)), hb);

// Types only JavaScript produces this way.
const when = new Date(t0 + 589);
const types = {
  date: when, // timestamp extension
  bytes: new Uint8Array([0, 1, 254, 255]), // bin
  big: 2 ** 53 - 1, // uint64 on the wire
  negBig: -(2 ** 53 - 1), // int64 on the wire
  float: 0.1,
  integralFloat: 3.0, // JavaScript writes it as an integer
  nan: NaN, // float64 NaN on the wire, null in JSON
  emoji: "🌡️ \u2028 Grüße",
  digitKeys: { 10: "ten", 2: "two", b: "bee" },
};
const typesExpected = { ...types, date: "2025-03-14T09:26:53.589Z", bytes: "AAH+/w==", nan: null };
write("node_types.msgpack", pack(types), typesExpected);
write("node_types.msgpack.raw", zlib.deflateRawSync(pack(types)), typesExpected);
const f32 = { f32: [0.5, -1.25, 1024, 3.140625] };
write("node_float32.msgpack", pack(f32, { forceFloat32: true }), f32);
