// A BACnet/IP device for the adapter's integration tests, built on the
// third-party stack @bacnet-js/client (found through NODE_PATH).
//
//   node device.js --port 47808 [--address 127.0.0.1] [--device 1234]
//                  [--rpm ok|reject|error] [--bbmd] [--segment-object-list]
//
// It answers Who-Is (with a unicast I-Am to the asker), ReadProperty,
// ReadPropertyMultiple and WriteProperty for the objects below. --rpm
// reject answers ReadPropertyMultiple with a Reject unrecognized-service,
// --rpm error with an Error services/reject-unrecognized-service, as
// devices without RPM do. --bbmd also acts as a BBMD towards foreign
// devices: it accepts Register-Foreign-Device. --segment-object-list
// answers a read of the whole object-list with an Abort
// segmentation-not-supported, as a device with a list too long for one
// unsegmented answer does; its elements are still readable by array
// index. Every request is printed
// as one line "REQ <service> ..." so a test can count what arrived.
'use strict';

const Bacnet = require('@bacnet-js/client').default;

const args = { port: 47808, address: '127.0.0.1', device: 1234, rpm: 'ok', bbmd: false, 'segment-object-list': false };
for (let i = 2; i < process.argv.length; i++) {
  const k = process.argv[i].replace(/^--/, '');
  if (k === 'bbmd' || k === 'segment-object-list') { args[k] = true; continue; }
  args[k] = process.argv[++i];
}
args.port = Number(args.port);
args.device = Number(args.device);

// Application tags and enumerations, numbered as ASHRAE 135 does.
const T = { NULL: 0, BOOLEAN: 1, UNSIGNED: 2, REAL: 4, CHARSTRING: 7, BITSTRING: 8, ENUMERATED: 9, OBJECTID: 12 };
const P = {
  OBJECT_IDENTIFIER: 75, OBJECT_NAME: 77, OBJECT_TYPE: 79, OBJECT_LIST: 76, PRESENT_VALUE: 85,
  STATUS_FLAGS: 111, RELIABILITY: 103, OUT_OF_SERVICE: 81, UNITS: 117, PRIORITY_ARRAY: 87,
  RELINQUISH_DEFAULT: 104, NUMBER_OF_STATES: 74, MAX_APDU: 62, SEGMENTATION: 107, VENDOR_ID: 120,
  VENDOR_NAME: 121, MODEL_NAME: 70, EVENT_STATE: 36,
};
const OT = { AI: 0, AO: 1, AV: 2, BI: 3, BO: 4, BV: 5, DEVICE: 8, MSV: 19 };
const EC = { OBJECT: 1, PROPERTY: 2, SERVICES: 5 };
const ERR = {
  UNKNOWN_OBJECT: 31, UNKNOWN_PROPERTY: 32, WRITE_ACCESS_DENIED: 40, INVALID_DATA_TYPE: 9,
  VALUE_OUT_OF_RANGE: 37, REJECT_UNRECOGNIZED_SERVICE: 67, INVALID_ARRAY_INDEX: 42, NOT_AN_ARRAY: 50,
};
const ARRAY_ALL = 0xFFFFFFFF;
const SERVICE = { READ_PROPERTY: 12, READ_PROPERTY_MULTIPLE: 14, WRITE_PROPERTY: 15 };

// Objects: name, present value, units (engineering units enumeration),
// reliability (undefined: the object has no reliability property),
// commandable (has a priority array).
const objects = new Map();
function add(type, instance, o) {
  objects.set(`${type}:${instance}`, Object.assign({ type, instance, outOfService: false, reliability: 0, priority: null }, o));
}
add(OT.AI, 1, { name: 'zone-temp', pv: 21.5, units: 62 });                      // degC
add(OT.AV, 2, { name: 'setpoint', pv: 20, units: 98, priority: Array(16).fill(null), relinquish: 20 }); // percent
add(OT.BI, 3, { name: 'fan-status', pv: 1 });
add(OT.MSV, 4, { name: 'mode', pv: 2, states: 3, priority: Array(16).fill(null), relinquish: 2 });
add(OT.AI, 5, { name: 'broken-sensor', pv: 0, units: 62, reliability: 2 });     // over-range
add(OT.BV, 6, { name: 'maintenance', pv: 0, outOfService: true, priority: Array(16).fill(null), relinquish: 0 });
add(OT.AO, 7, { name: 'valve', pv: 35, units: 98, reliability: undefined, priority: Array(16).fill(null), relinquish: 35 });

const deviceId = { type: OT.DEVICE, instance: args.device };

function presentValue(o) {
  if (o.priority) {
    const slot = o.priority.find((v) => v !== null);
    return slot === undefined ? o.relinquish : slot;
  }
  return o.pv;
}

function pvData(o, v) {
  if (v === null) return { type: T.NULL, value: null };
  if (o.type <= OT.AV) return { type: T.REAL, value: v };
  if (o.type <= OT.BV) return { type: T.ENUMERATED, value: v };
  return { type: T.UNSIGNED, value: v };
}

function fail(errorClass, errorCode) {
  const e = new Error(`error ${errorClass}/${errorCode}`);
  e.bacnet = { errorClass, errorCode };
  return e;
}

// read returns the application data of one property, or throws fail().
function read(objectId, prop) {
  if (objectId.type === OT.DEVICE && (objectId.instance === args.device || objectId.instance === 4194303)) {
    switch (prop) {
      case P.OBJECT_IDENTIFIER: return [{ type: T.OBJECTID, value: deviceId }];
      case P.OBJECT_NAME: return [{ type: T.CHARSTRING, value: 'edgeplat-test-device' }];
      case P.OBJECT_TYPE: return [{ type: T.ENUMERATED, value: OT.DEVICE }];
      case P.OBJECT_LIST:
        return [{ type: T.OBJECTID, value: deviceId }]
          .concat([...objects.values()].map((o) => ({ type: T.OBJECTID, value: { type: o.type, instance: o.instance } })));
      case P.MAX_APDU: return [{ type: T.UNSIGNED, value: 1476 }];
      case P.SEGMENTATION: return [{ type: T.ENUMERATED, value: 3 }]; // no-segmentation
      case P.VENDOR_ID: return [{ type: T.UNSIGNED, value: 999 }];
      case P.VENDOR_NAME: return [{ type: T.CHARSTRING, value: 'edgeplat tests' }];
      case P.MODEL_NAME: return [{ type: T.CHARSTRING, value: 'device.js' }];
    }
    throw fail(EC.PROPERTY, ERR.UNKNOWN_PROPERTY);
  }
  const o = objects.get(`${objectId.type}:${objectId.instance}`);
  if (!o) throw fail(EC.OBJECT, ERR.UNKNOWN_OBJECT);
  switch (prop) {
    case P.OBJECT_IDENTIFIER: return [{ type: T.OBJECTID, value: { type: o.type, instance: o.instance } }];
    case P.OBJECT_NAME: return [{ type: T.CHARSTRING, value: o.name }];
    case P.OBJECT_TYPE: return [{ type: T.ENUMERATED, value: o.type }];
    case P.PRESENT_VALUE: return [pvData(o, presentValue(o))];
    case P.OUT_OF_SERVICE: return [{ type: T.BOOLEAN, value: o.outOfService }];
    case P.EVENT_STATE: return [{ type: T.ENUMERATED, value: 0 }];
    case P.STATUS_FLAGS: {
      // in-alarm, fault, overridden, out-of-service: the first bit is the
      // highest of the byte.
      let bits = 0;
      if (o.reliability) bits |= 1 << 1;
      if (o.outOfService) bits |= 1 << 3;
      return [{ type: T.BITSTRING, value: { bitsUsed: 4, value: [bits] } }];
    }
    case P.RELIABILITY:
      if (o.reliability === undefined) break;
      return [{ type: T.ENUMERATED, value: o.reliability }];
    case P.UNITS:
      if (o.units === undefined) break;
      return [{ type: T.ENUMERATED, value: o.units }];
    case P.NUMBER_OF_STATES:
      if (!o.states) break;
      return [{ type: T.UNSIGNED, value: o.states }];
    case P.RELINQUISH_DEFAULT:
      if (!o.priority) break;
      return [pvData(o, o.relinquish)];
    case P.PRIORITY_ARRAY:
      if (!o.priority) break;
      return o.priority.map((v) => pvData(o, v));
  }
  throw fail(EC.PROPERTY, ERR.UNKNOWN_PROPERTY);
}

function write(objectId, prop, values, priority) {
  const o = objects.get(`${objectId.type}:${objectId.instance}`);
  if (!o) throw fail(EC.OBJECT, ERR.UNKNOWN_OBJECT);
  if (prop === P.OUT_OF_SERVICE) {
    if (values[0].type !== T.BOOLEAN) throw fail(EC.PROPERTY, ERR.INVALID_DATA_TYPE);
    o.outOfService = values[0].value;
    return;
  }
  if (prop !== P.PRESENT_VALUE) throw fail(EC.PROPERTY, ERR.WRITE_ACCESS_DENIED);
  const v = values[0];
  if (!o.priority) {
    // An input's present-value follows the process unless out of service.
    if (!o.outOfService) throw fail(EC.PROPERTY, ERR.WRITE_ACCESS_DENIED);
    if (v.type !== pvData(o, 0).type) throw fail(EC.PROPERTY, ERR.INVALID_DATA_TYPE);
    o.pv = v.value;
    return;
  }
  const slot = (priority || 16) - 1;
  if (v.type === T.NULL) { o.priority[slot] = null; return; }
  if (v.type !== pvData(o, 0).type) throw fail(EC.PROPERTY, ERR.INVALID_DATA_TYPE);
  if (o.type === OT.MSV && (v.value < 1 || v.value > o.states)) throw fail(EC.PROPERTY, ERR.VALUE_OUT_OF_RANGE);
  if ((o.type === OT.BV || o.type === OT.BO) && v.value > 1) throw fail(EC.PROPERTY, ERR.VALUE_OUT_OF_RANGE);
  o.priority[slot] = v.value;
}

const client = new Bacnet({ port: args.port, interface: args.address, broadcastAddress: args.address, apduTimeout: 3000 });
const log = (line) => process.stdout.write(line + '\n');

// answer sends a three-byte Reject (0x60) or server Abort (0x71) PDU,
// which the stack has no call for.
function answer(receiver, pduType, invokeId, reason) {
  const buffer = client._getApduBuffer(receiver);
  buffer.buffer[buffer.offset++] = 0x01; // NPDU version
  buffer.buffer[buffer.offset++] = 0x00; // control: no addresses, normal priority
  buffer.buffer[buffer.offset++] = pduType;
  buffer.buffer[buffer.offset++] = invokeId;
  buffer.buffer[buffer.offset++] = reason;
  client.sendBvlc(receiver, buffer);
}

// element applies a ReadProperty's array index: 0 is the length, i the
// i-th element.
function element(values, prop, index) {
  if (index === undefined || index === ARRAY_ALL) return values;
  if (prop !== P.OBJECT_LIST && prop !== P.PRIORITY_ARRAY) throw fail(EC.PROPERTY, ERR.NOT_AN_ARRAY);
  if (index === 0) return [{ type: T.UNSIGNED, value: values.length }];
  if (index > values.length) throw fail(EC.PROPERTY, ERR.INVALID_ARRAY_INDEX);
  return [values[index - 1]];
}

client.on('whoIs', (msg) => {
  const { lowLimit, highLimit } = msg.payload || {};
  log(`REQ whois ${lowLimit ?? '-'} ${highLimit ?? '-'} from ${msg.header.sender.address}`);
  if (lowLimit !== undefined && (args.device < lowLimit || args.device > highLimit)) return;
  client.iAmResponse(msg.header.sender, args.device, 3, 999);
});

client.on('readProperty', (msg) => {
  const { objectId, property } = msg.payload;
  const index = property.index === ARRAY_ALL ? '' : `[${property.index}]`;
  log(`REQ rp ${objectId.type}:${objectId.instance} ${property.id}${index}`);
  if (args['segment-object-list'] && property.id === P.OBJECT_LIST && index === '') {
    return answer(msg.header.sender, 0x71, msg.invokeId, 4); // segmentation-not-supported
  }
  try {
    client.readPropertyResponse(msg.header.sender, msg.invokeId, objectId, property,
      element(read(objectId, property.id), property.id, property.index));
  } catch (e) {
    if (!e.bacnet) throw e;
    client.errorResponse(msg.header.sender, SERVICE.READ_PROPERTY, msg.invokeId, e.bacnet.errorClass, e.bacnet.errorCode);
  }
});

client.on('readPropertyMultiple', (msg) => {
  const specs = msg.payload.properties;
  log(`REQ rpm ${specs.length} ${specs.map((s) => `${s.objectId.type}:${s.objectId.instance}`).join(',')}`);
  if (args.rpm === 'reject') return answer(msg.header.sender, 0x60, msg.invokeId, 9); // unrecognized-service
  if (args.rpm === 'error') {
    return client.errorResponse(msg.header.sender, SERVICE.READ_PROPERTY_MULTIPLE, msg.invokeId, EC.SERVICES, ERR.REJECT_UNRECOGNIZED_SERVICE);
  }
  const results = specs.map((s) => ({
    objectId: s.objectId,
    values: s.properties.map((p) => {
      try {
        return { property: p, value: read(s.objectId, p.id) };
      } catch (e) {
        if (!e.bacnet) throw e;
        return { property: p, value: [{ value: { type: 'BacnetError', errorClass: e.bacnet.errorClass, errorCode: e.bacnet.errorCode } }] };
      }
    }),
  }));
  client.readPropertyMultipleResponse(msg.header.sender, msg.invokeId, results);
});

client.on('writeProperty', (msg) => {
  const { objectId, value } = msg.payload;
  log(`REQ wp ${objectId.type}:${objectId.instance} ${value.property.id} ${JSON.stringify(value.value.map((v) => v.value))} @${value.priority}`);
  try {
    write(objectId, value.property.id, value.value, value.priority);
    client.simpleAckResponse(msg.header.sender, SERVICE.WRITE_PROPERTY, msg.invokeId);
  } catch (e) {
    if (!e.bacnet) throw e;
    client.errorResponse(msg.header.sender, SERVICE.WRITE_PROPERTY, msg.invokeId, e.bacnet.errorClass, e.bacnet.errorCode);
  }
});

if (args.bbmd) {
  client.on('registerForeignDevice', (msg) => {
    log(`REQ register ${msg.payload.ttl} from ${msg.header.sender.address}`);
    client.resultResponse(msg.header.sender, 0);
  });
}

client.on('error', (err) => { log(`ERROR ${err.message}`); });
client.on('listening', () => log(`READY ${args.address}:${args.port}`));
