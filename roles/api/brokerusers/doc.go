// Package brokerusers owns broker users: MQTT accounts a tenant's admins
// create for integrations (a SCADA system, a dashboard bridge), each with a
// server-generated password and ACL rules confined to the tenant's topic
// space i/{tenant}/ (docs/broker-auth.md, section Broker users).
//
// The store keeps them in the Cloud API's database (broker_users and
// broker_acl) and answers the broker's credential check for them
// (AuthenticateBrokerUser; CombinedStore puts it beside the device keys
// behind one brokerauth.Store). The admin routes, mounted on the
// protected /api/v1 group, are
//
//	GET    /broker-auth/user             list the caller's tenant's broker users
//	GET    /broker-auth/user/:username   one broker user
//	PUT    /broker-auth/user/:username   create (the password is returned once) or update
//	DELETE /broker-auth/user/:username   delete
//	GET    /broker-auth/acl              the tenant's rules, one entry per rule
//
// POST /broker-auth/user, /broker-auth/superuser and /broker-auth/acl are
// the broker's callbacks (roles/api/brokerauth), outside /api/v1.
//
// Passwords are 32 random characters of [A-Za-z0-9], so a salted SHA-256
// protects them as well as a slow hash would while keeping a cold-cache
// connect check cheap. Every change that affects what the broker allows
// (rules, password, deletion) is handed to Deps.Invalidate at once, which
// drops the authorizer's cached answers and the rights of open sessions.
package brokerusers
