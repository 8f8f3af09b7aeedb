#!/usr/bin/python3
"""Golden payloads for core/codec made by Python's msgpack and zlib.

They pin down that the Go decoder reads what another implementation writes,
byte for byte, in every layer combination. Each payload NAME in ../golden/ has
SUBJECT.expected.json beside it, SUBJECT being NAME up to the first dot
without "_kc": the decoded value as JSON (the Go test compares canonical
forms, so formatting here does not matter). The file name says the layers:
.json/.msgpack, then .zlib/.raw for the deflate wrapper, and _kc for key
compaction.

Run (Debian's interpreter, which has python3-msgpack; the python3 on PATH
may be another one without it):

    apt-get install -y python3-msgpack
    cd core/codec/testdata/gen && /usr/bin/python3 gen_python.py

The output is deterministic, so rerunning it must leave git clean.
"""

import datetime
import json
import math
import os
import zlib

import msgpack

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "golden")
with open(os.path.join(HERE, "..", "dictionary.json")) as f:
    DICT = json.load(f)
DICT_VERSION = max(int(v) for v in DICT["versions"])
INDEX = {n: i for i, n in enumerate(DICT["names"][: DICT["versions"][str(DICT_VERSION)]])}

DEVICES = [("boiler-1", "dev-001"), ("boiler-2", "dev-002"), ("chiller-A", "dev-003"),
           ("pump-7", "dev-004"), ("meter-main", "dev-005")]
METRICS = [("temperature", "°C"), ("pressure", "bar"), ("flow", "m³/h"), ("power", "kW"),
           ("energy", "kWh"), ("vibration", "mm/s"), ("humidity", "%"), ("speed", "rpm"),
           ("current", "A"), ("status", "")]
CODES = ["TIMEOUT", "CONNECTION_REFUSED", "DEVICE_BUSY", "BAD_DATA"]


def iso(ms):
    t = datetime.datetime(2025, 3, 14, 9, 26, 53, tzinfo=datetime.timezone.utc)
    t += datetime.timedelta(milliseconds=ms)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000)


def batch(n=50, protocol="modbus"):
    """A custom-format agent batch: one message per device, 10 readings each.

    Values are k/8 so that they are exact in binary and print the same in
    every language; every 7th read failed; every 5th carries the anomaly
    enrichment fields."""
    messages = []
    k = 0
    for dev_name, dev_id in DEVICES:
        readings = []
        for metric, unit in METRICS:
            if k >= n:
                break
            r = {
                "deviceName": dev_name,
                "deviceId": dev_id,
                "metric": metric,
                "value": ((k * 37) % 1000) / 8 - 20,
                "unit": unit,
                "timestamp": iso(k * 250),
                "quality": "GOOD",
            }
            if metric == "status":
                r["value"] = k % 3  # an integer reading
            if k % 7 == 3:
                r["value"] = None
                r["quality"] = "BAD"
                r["qualityCode"] = CODES[k % len(CODES)]
            elif k % 5 == 0:
                r.update({
                    "anomaly_score": (k % 8) / 8,
                    "anomaly_threshold": 0.75,
                    "baseline_samples": 240 + k,
                    "detection_methods": ["zscore", "mad"] if k % 2 else ["rate"],
                    "predicted_next": ((k * 41) % 1000) / 8 - 20,
                    "trend": ["rising", "falling", "stable"][k % 3],
                    "trend_strength": (k % 4) / 4,
                    "forecast_confidence": 0.875,
                    "time_to_threshold": {"threshold": 85.5, "estimated_seconds": 1800 + k, "confidence": 0.625},
                })
            if protocol == "opcua":
                r["protocol"] = "opcua"
                r["nodeType"] = "Variable"
            readings.append(r)
            k += 1
        messages.append({"readings": readings})
    return {"timestamp": iso(0), "protocol": protocol, "msgId": "v2_Kx7Qm2Za_104729", "messages": messages}


def tags_payload():
    return {"timestamp": 1741944413589, "node": "PLC-Line3", "group": "line3",
            "tags": [{"name": "temp", "value": 21.5}, {"name": "running", "value": True},
                     {"name": "count", "value": 123456789012}, {"name": "pressure", "error": "TIMEOUT"}]}


def ml_payload():
    return {"timestamp": 1741944413589, "node": "PLC-Line3", "group": "line3", "schema": "service.ml.v1",
            "features": [
                {"name": "temp", "value": 21.5, "dtype": "float", "quality": "GOOD",
                 "anomaly_score": 0.125, "trend": "stable", "time_to_threshold": None},
                {"name": "flag", "value": False, "dtype": "bool", "quality": "GOOD"},
                {"name": "level", "value": None, "dtype": "error", "quality": "BAD", "error": "BAD_DATA"},
            ]}


def heartbeat():
    return {"endpoint": "modbus-line3", "timestamp": iso(0), "state": "CONNECTED",
            "stats": {"messagesReceived": 1234567, "messagesPublished": 4321, "bytesReceived": 9876543210,
                      "bytesPublished": 123456789, "reconnectAttempts": 0, "lastPublishTime": iso(1000),
                      "lastHeartbeatTime": iso(2000), "lastConnectedTime": None}}


def compact_key(k):
    if k in INDEX:
        return INDEX[k]
    if k[:1] and k[0] in "0123456789~":
        return "~" + k  # a literal key that would read as an index
    return k


def compact(v, top=True, int_keys=True):
    """Key compaction as docs/codec.md specifies it: dictionary names become
    their index (an integer key in MessagePack, its decimal string in JSON),
    literal keys starting with a digit or '~' get a '~' prefix, and the
    marker goes first."""
    if isinstance(v, dict):
        out = {"_kc": DICT_VERSION} if top else {}
        for k, x in v.items():
            key = compact_key(k)
            if not int_keys and isinstance(key, int):
                key = str(key)
            out[key] = compact(x, False, int_keys)
        return out
    if isinstance(v, list):
        return [compact(x, False, int_keys) for x in v]
    return v


def compact_json(v):
    return compact(v, int_keys=False)


def raw_deflate(b, level=-1):
    c = zlib.compressobj(level, zlib.DEFLATED, -15)
    return c.compress(b) + c.flush()


def pack(v, **kw):
    return msgpack.packb(v, use_bin_type=True, **kw)


def js(v, **kw):
    return json.dumps(v, ensure_ascii=False, **kw).encode()


def write(name, payload, expected):
    """Writes payload as NAME and its expected value as SUBJECT.expected.json,
    SUBJECT being NAME up to the first dot without a "_kc" suffix, so that
    all layer combinations of one value share one expected file."""
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(payload)
    subject = name.split(".")[0].removesuffix("_kc")
    with open(os.path.join(OUT, subject + ".expected.json"), "w") as f:
        json.dump(expected, f, ensure_ascii=False, indent=1, sort_keys=True)
        f.write("\n")


def types_payload():
    """Every MessagePack type the decoder maps, with its expected JSON."""
    long_str = "é" * 150  # 300 bytes: str16
    v = {
        "uint64_max": 2**64 - 1,
        "int64_min": -(2**63),
        "ints": [0, 127, 128, 255, 256, 65535, 65536, 2**32, -1, -32, -33, -128, -129, -32768, -32769, -(2**31) - 1],
        "floats": [0.1, -2.5, 1e300, 5e-324],
        "nan": math.nan,
        "inf": -math.inf,
        "bin": b"\x00\x01\xfe\xff",
        "empty_bin": b"",
        "when": msgpack.Timestamp(1741944413, 589000000),
        "when32": msgpack.Timestamp(1741944413, 0),
        "when96": msgpack.Timestamp(-1, 5),
        "unicode": "Grüße 🌡️ \u2028 \"q\" \\ \t",
        "long": long_str,
        "array16": list(range(20)),
        "map16": {"k%02d" % i: i for i in range(20)},
        "int_keys": {1: "one", -5: "minus five", 300: "big"},
        "nested": [[[[[[[[[["deep"]]]]]]]]]],
        "empty": {"a": [], "m": {}},
        "bools": [True, False, None],
    }
    expected = dict(v)
    expected.update({
        "nan": None,
        "inf": None,
        "bin": "AAH+/w==",
        "empty_bin": "",
        "when": "2025-03-14T09:26:53.589Z",
        "when32": "2025-03-14T09:26:53Z",
        "when96": "1969-12-31T23:59:59.000000005Z",
        "int_keys": {"1": "one", "-5": "minus five", "300": "big"},
    })
    return pack(v, datetime=False), expected


def main():
    os.makedirs(OUT, exist_ok=True)
    b = batch()
    j = js(b, indent=2)  # pretty, with leading whitespace to skip
    m = pack(b)
    write("py_batch50.json", b"\n  " + j, b)
    write("py_batch50.json.zlib", zlib.compress(js(b)), b)
    write("py_batch50.json.raw", raw_deflate(js(b)), b)
    write("py_batch50.msgpack", m, b)
    write("py_batch50.msgpack.zlib", zlib.compress(m, 9), b)
    write("py_batch50.msgpack.raw", raw_deflate(m, 1), b)
    write("py_batch50_kc.msgpack", pack(compact(b)), b)
    write("py_batch50_kc.msgpack.zlib", zlib.compress(pack(compact(b))), b)
    write("py_batch50_kc.json", js(compact_json(b)), b)
    write("py_batch50_kc.json.raw", raw_deflate(js(compact_json(b))), b)

    o = batch(20, "opcua")
    write("py_opcua20.msgpack.zlib", zlib.compress(pack(o)), o)

    t = tags_payload()
    write("py_tags.msgpack.raw", raw_deflate(pack(t)), t)
    write("py_tags_kc.msgpack", pack(compact(t)), t)

    ml = ml_payload()
    write("py_ml.json.zlib", zlib.compress(js(ml), 9), ml)
    write("py_ml_kc.json", js(compact_json(ml)), ml)

    hb = heartbeat()
    write("py_heartbeat.json", js(hb), hb)
    write("py_heartbeat_kc.msgpack.zlib", zlib.compress(pack(compact(hb))), hb)

    # Literal keys that need the '~' escape in compacted JSON, next to
    # dictionary names; "~" itself and a digit-led key.
    esc = {"value": 1, "7seg": "a", "~tilde": "b", "plain": {"0": "zero", "unit": "V"}}
    write("py_escape_kc.json", js(compact_json(esc)), esc)
    write("py_escape_kc.msgpack", pack(compact(esc)), esc)

    tp, te = types_payload()
    write("py_types.msgpack", tp, te)
    write("py_types.msgpack.zlib", zlib.compress(tp), te)

    # float32 encoding (use_single_float): values exact in 32 bits.
    f32 = {"f32": [0.5, -1.25, 1024.0, 3.140625]}
    write("py_float32.msgpack", pack(f32, use_single_float=True), f32)

    # A top-level array (a batch of envelopes).
    arr = [heartbeat(), tags_payload()]
    write("py_array.msgpack.raw", raw_deflate(pack(arr)), arr)
    write("py_array.json", js(arr), arr)


if __name__ == "__main__":
    main()
