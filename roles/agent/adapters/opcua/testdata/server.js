// OPC-UA test server for the adapter's integration tests.
// Usage: node server.js <port> <pkiFolder>
// Prints "READY <port>" once it listens. Namespace 1 holds:
//   ns=1;s=Temperature  Double, changes every 200 ms (20.0, 20.5, 21.0, ...)
//   ns=1;s=Counter      Int32,  fixed 42
//   ns=1;s=Running      Boolean, fixed true
//   ns=1;s=Label        String, fixed "line-1"
//   ns=1;s=Pressure     Float,  fixed 1.5
// all inside the object ns=1;s=Plant (under Objects) and its child
// object ns=1;s=Line1 (Counter, Running, Label live there).
// Users: anonymous, or operator/secret. Client certificates are accepted
// automatically so secure-mode tests need no manual trust step.
"use strict";
const path = require("path");
const {
  OPCUAServer, OPCUACertificateManager, DataType, Variant,
  MessageSecurityMode, SecurityPolicy,
} = require("node-opcua");

const port = parseInt(process.argv[2], 10);
const pki = process.argv[3] || path.join(require("os").tmpdir(), "edgeplat-opcua-pki");

(async () => {
  const serverCertificateManager = new OPCUACertificateManager({
    rootFolder: path.join(pki, "server"),
    automaticallyAcceptUnknownCertificate: true,
  });
  const userCertificateManager = new OPCUACertificateManager({
    rootFolder: path.join(pki, "user"),
    automaticallyAcceptUnknownCertificate: true,
  });
  const server = new OPCUAServer({
    port,
    serverCertificateManager,
    userCertificateManager,
    securityModes: [MessageSecurityMode.None, MessageSecurityMode.Sign, MessageSecurityMode.SignAndEncrypt],
    securityPolicies: [SecurityPolicy.None, SecurityPolicy.Basic256Sha256, SecurityPolicy.Aes128_Sha256_RsaOaep],
    allowAnonymous: true,
    userManager: { isValidUser: (u, p) => u === "operator" && p === "secret" },
    buildInfo: { productName: "edgeplat-test-server" },
  });
  await server.initialize();
  const ns = server.engine.addressSpace.getOwnNamespace();
  const plant = ns.addObject({ organizedBy: server.engine.addressSpace.rootFolder.objects, browseName: "Plant", nodeId: "s=Plant" });
  const line = ns.addObject({ componentOf: plant, browseName: "Line1", nodeId: "s=Line1" });

  let temp = 20.0;
  const temperature = ns.addVariable({
    componentOf: plant, browseName: "Temperature", nodeId: "s=Temperature", dataType: "Double",
    minimumSamplingInterval: 100,
    value: new Variant({ dataType: DataType.Double, value: temp }),
  });
  setInterval(() => {
    temp += 0.5;
    temperature.setValueFromSource(new Variant({ dataType: DataType.Double, value: temp }));
  }, 200);
  ns.addVariable({ componentOf: plant, browseName: "Pressure", nodeId: "s=Pressure", dataType: "Float",
    value: new Variant({ dataType: DataType.Float, value: 1.5 }) });
  ns.addVariable({ componentOf: line, browseName: "Counter", nodeId: "s=Counter", dataType: "Int32",
    value: new Variant({ dataType: DataType.Int32, value: 42 }) });
  ns.addVariable({ componentOf: line, browseName: "Running", nodeId: "s=Running", dataType: "Boolean",
    value: new Variant({ dataType: DataType.Boolean, value: true }) });
  ns.addVariable({ componentOf: line, browseName: "Label", nodeId: "s=Label", dataType: "String",
    value: new Variant({ dataType: DataType.String, value: "line-1" }) });

  await server.start();
  console.log("READY " + port);
  const stop = async () => { try { await server.shutdown(0); } finally { process.exit(0); } };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
})().catch((err) => { console.error(err); process.exit(1); });
