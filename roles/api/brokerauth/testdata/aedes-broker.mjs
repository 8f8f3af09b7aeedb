// A real third-party MQTT broker (aedes) whose authentication and
// authorization hooks call edgeplat's /broker-auth callbacks the way the
// brokers we support do, so aedes_test.go can drive the callbacks end to
// end with ordinary MQTT clients.
//
// Environment:
//   EDGEPLAT_AEDES_MODULE  directory of the installed aedes package
//   AUTH_BASE_URL          base URL of the callbacks (http://127.0.0.1:port)
//   AUTH_STYLE             goauth-json | goauth-form | emqx
//   AUTH_SECRET            sent as X-Broker-Auth-Secret when set
//
// goauth-*: mosquitto-go-auth's HTTP backend in response_mode "status",
// params_mode json or form: user check with username, password, clientid;
// before each ACL check a superuser check with username; ACL check with
// username, clientid, topic and acc (2 publish, 4 subscribe). A 2xx answer
// allows, anything else denies.
//
// emqx: EMQX 5's HTTP authenticator and authorizer with JSON bodies
// {username, password, clientid} and {username, clientid, topic, action}.
// Only 200 (with {"result": ...}) and 204 decide; any other status is
// "ignore": the connect is refused (our authenticator is the whole chain),
// and an ACL check falls through to authorization.no_match, "allow" as in
// EMQX's default configuration. is_superuser from the connect skips the
// ACL checks.
//
// Prints "LISTENING <port>" once it accepts connections; exits when stdin
// closes.

import { createServer } from 'node:net'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'

const moduleDir = process.env.EDGEPLAT_AEDES_MODULE
const base = process.env.AUTH_BASE_URL
const style = process.env.AUTH_STYLE || 'goauth-json'
const secret = process.env.AUTH_SECRET || ''
const noMatch = 'allow'

const { Aedes } = await import(pathToFileURL(join(moduleDir, 'aedes.js')).href)

// post calls one callback and returns {decided, allow, superuser}.
async function post (path, fields) {
  const headers = {}
  if (secret) headers['X-Broker-Auth-Secret'] = secret
  let body
  if (style === 'goauth-form') {
    headers['Content-Type'] = 'application/x-www-form-urlencoded'
    body = new URLSearchParams(Object.entries(fields).map(([k, v]) => [k, String(v)])).toString()
  } else {
    headers['Content-Type'] = 'application/json'
    body = JSON.stringify(fields)
  }
  // EMQX's URLs carry ?style=emqx, as docs/broker-auth.md configures them.
  const url = base + path + (style === 'emqx' ? '?style=emqx' : '')
  const res = await fetch(url, { method: 'POST', headers, body, signal: AbortSignal.timeout(5000) })
  const text = await res.text()
  if (style !== 'emqx') {
    return { decided: true, allow: res.status >= 200 && res.status < 300, superuser: false }
  }
  if (res.status === 204) return { decided: true, allow: true, superuser: false }
  if (res.status !== 200) return { decided: false, allow: false, superuser: false }
  const answer = JSON.parse(text)
  if (answer.result === 'ignore') return { decided: false, allow: false, superuser: false }
  return { decided: true, allow: answer.result === 'allow', superuser: answer.is_superuser === true }
}

async function authenticate (client, username, password) {
  client.edgeplatUser = username || ''
  const r = await post('/broker-auth/user', {
    username: username || '',
    password: password ? password.toString('utf8') : '',
    clientid: client.id
  })
  client.edgeplatSuperuser = r.superuser
  return r.decided && r.allow
}

async function authorize (client, topic, action) {
  if (style === 'emqx') {
    if (client.edgeplatSuperuser) return true
    const r = await post('/broker-auth/acl', { username: client.edgeplatUser, clientid: client.id, topic, action })
    return r.decided ? r.allow : noMatch === 'allow'
  }
  const su = await post('/broker-auth/superuser', { username: client.edgeplatUser })
  if (su.allow) return true
  const r = await post('/broker-auth/acl', {
    username: client.edgeplatUser,
    clientid: client.id,
    topic,
    acc: action === 'publish' ? 2 : 4
  })
  return r.allow
}

function refused (returnCode, message) {
  const err = new Error(message)
  err.returnCode = returnCode
  return err
}

const broker = await Aedes.createBroker({
  authenticate (client, username, password, done) {
    authenticate(client, username, password).then(
      ok => ok ? done(null, true) : done(refused(5, 'not authorized'), false),
      err => {
        console.error('user callback failed:', err.message)
        done(refused(3, 'server unavailable'), false)
      })
  },
  authorizePublish (client, packet, done) {
    // A will published after its client is gone has no client to check.
    if (!client) return done(new Error('no client'))
    authorize(client, packet.topic, 'publish').then(
      ok => done(ok ? null : new Error('not authorized')),
      err => done(new Error('acl callback failed: ' + err.message)))
  },
  authorizeSubscribe (client, sub, done) {
    // A null subscription is a refusal: SUBACK 0x80.
    authorize(client, sub.topic, 'subscribe').then(
      ok => done(null, ok ? sub : null),
      () => done(null, null))
  }
})

const server = createServer(broker.handle)
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`LISTENING ${server.address().port}\n`)
})

function shutdown () {
  server.close()
  broker.close(() => process.exit(0))
  setTimeout(() => process.exit(0), 2000).unref()
}
process.stdin.on('end', shutdown)
process.stdin.resume()
process.on('SIGTERM', shutdown)
