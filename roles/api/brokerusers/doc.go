// Package brokerusers owns broker users: MQTT accounts a tenant's admins
// create for integrations, each with a server-generated password and ACL
// rules confined to the tenant's topic space i/{tenant}/. The store keeps
// them in broker_users and broker_acl and answers the broker's credential
// check for them (AuthenticateBrokerUser; CombinedStore puts it beside the
// device keys behind one brokerauth.Store); the admin routes live under
// /api/v1/broker-auth/. Every change that affects what the broker allows
// goes to Deps.Invalidate at once. See docs/broker-auth.md, section Broker
// users.
package brokerusers
