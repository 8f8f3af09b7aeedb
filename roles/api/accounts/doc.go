// Package accounts owns the Cloud API's people and their credentials:
// tenants, users and their roles, login sessions (refresh-token families
// with rotation and reuse detection), password resets, user API keys and
// the audit log, with the /auth, /users, /api-keys and /audit routes.
//
// Passwords are argon2id hashes; generated keys and tokens are stored as
// SHA-256 hashes and shown once. Every query that touches a tenant's
// records takes the tenant from the caller's credential, so a record of
// another tenant is "not found", never visible.
package accounts
