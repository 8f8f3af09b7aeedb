package brokerauth

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/edgeplat/edgeplat/core/codec"
)

// Broker users are MQTT accounts a tenant's admins create for integrations
// (a SCADA system, a dashboard bridge). Each has its own password and a list
// of rules, and every topic it may use lies inside its tenant's topic space
// i/{tenant}/ (the 22-character topic form of the tenant UUID):
//
//   - A rule's Pattern is an MQTT topic filter relative to that space:
//     "a/+/endpoints/#" stands for i/{tenant}/a/+/endpoints/#. A pattern
//     cannot name another tenant's topics, whatever it contains.
//   - A broker user publishes to a topic when a rule with Publish matches
//     it, except inside an agent's command subtree i/{tenant}/a/{agent}/cmd,
//     which only the cloud writes.
//   - It subscribes to a filter only when one rule with Subscribe covers
//     the filter: every topic the filter can match is matched by that
//     rule's pattern. Delivery of a message is the same check with the
//     topic as the filter.
//   - $SYS, $share and everything outside i/{tenant}/ are refused.
//   - Its client id is its username, or its username, ':' and any suffix
//     ("scada-plant1:historian"). Usernames cannot contain ':' (the account
//     store refuses them), so a client id belongs to one broker user, and
//     no broker user can take over a device's session ("agent-…") or
//     another account's.

// Limits of a broker user's ACL.
const (
	// MaxRules bounds the rules of one broker user: each check walks them.
	MaxRules = 64
	// MaxPatternLen bounds one rule's pattern, in bytes.
	MaxPatternLen = 512
)

// BrokerUserClientIDSeparator separates a broker user's username from the
// free part of its client id.
const BrokerUserClientIDSeparator = ":"

// reasonBrokerUser labels allowed decisions for broker users in metrics.
const reasonBrokerUser = "broker_user"

// Rule is one ACL rule of a broker user.
type Rule struct {
	// Pattern is an MQTT topic filter relative to the tenant's topic space
	// i/{tenant}/ (see ValidatePattern).
	Pattern string
	// Publish allows publishing to the topics the pattern matches.
	Publish bool
	// Subscribe allows subscribing to filters the pattern covers, and
	// receiving messages on the topics it matches.
	Subscribe bool
}

// ACL is what a broker user may do. An Identity carries a pointer to it,
// which keeps Identity comparable; an ACL is never modified once it is in
// an Identity.
type ACL struct {
	Rules []Rule
}

// ErrInvalidPattern is wrapped by ValidatePattern's errors.
var ErrInvalidPattern = errors.New("invalid ACL pattern")

// ValidatePattern reports whether p may be a rule's pattern: a non-empty
// MQTT topic filter of at most MaxPatternLen bytes, valid UTF-8 without
// control characters, with no empty level, '+' only as a whole level and
// '#' only as the whole last level. The account store checks every pattern
// before storing it, and the Authorizer refuses a store answer that carries
// one that fails.
func ValidatePattern(p string) error {
	if p == "" {
		return fmt.Errorf("%w: empty", ErrInvalidPattern)
	}
	if len(p) > MaxPatternLen {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidPattern, len(p), MaxPatternLen)
	}
	if !utf8.ValidString(p) {
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidPattern)
	}
	if strings.IndexFunc(p, unicode.IsControl) >= 0 {
		return fmt.Errorf("%w: control character", ErrInvalidPattern)
	}
	if !validFilterLevels(p) {
		return fmt.Errorf("%w: %q: levels must be non-empty, '+' a whole level and '#' only the whole last level", ErrInvalidPattern, clip(p, 64))
	}
	return nil
}

// TenantTopicPrefix returns "i/{tenant}/", the topic space of the tenant
// tenantUUID, with the tenant in its 22-character topic form.
func TenantTopicPrefix(tenantUUID string) (string, error) {
	u, err := codec.ParseUUID(tenantUUID)
	if err != nil {
		return "", fmt.Errorf("tenant topic prefix: %w", err)
	}
	return "i/" + codec.EncodeID(u) + "/", nil
}

// IsBrokerUser reports whether id is a broker user's identity.
func (id Identity) IsBrokerUser() bool { return id.ACL != nil }

// brokerUserClientID reports whether clientID is one the broker user
// username may connect with: the username itself, or the username, ':' and
// a suffix. Device client ids are never one, whatever the username.
func brokerUserClientID(username, clientID string) bool {
	if username == "" || strings.HasPrefix(clientID, ClientIDPrefix) {
		return false
	}
	rest, ok := strings.CutPrefix(clientID, username)
	return ok && (rest == "" || strings.HasPrefix(rest, BrokerUserClientIDSeparator))
}

// brokerUserIdentity checks a broker user's identity as the store returned
// it and makes the Identity the Authorizer keeps: its tenant canonical, no
// agent, never a superuser, and its own copy of the rules.
func brokerUserIdentity(username string, id Identity) (Identity, error) {
	tenant, ok := canonicalUUID(id.TenantUUID)
	if !ok {
		return Identity{}, errors.New("store returned a broker user without a valid tenant UUID")
	}
	if id.AgentUUID != "" {
		return Identity{}, errors.New("store returned a broker user with an agent UUID")
	}
	if len(id.ACL.Rules) > MaxRules {
		return Identity{}, fmt.Errorf("store returned a broker user with %d rules, at most %d", len(id.ACL.Rules), MaxRules)
	}
	for _, r := range id.ACL.Rules {
		if err := ValidatePattern(r.Pattern); err != nil {
			return Identity{}, fmt.Errorf("store returned a broker user rule: %w", err)
		}
	}
	return Identity{Username: username, TenantUUID: tenant, ACL: &ACL{Rules: slices.Clone(id.ACL.Rules)}}, nil
}

// internUser returns id with the ACL pointer of the identity the table
// holds for its username when tenant and rules are the same. Sessions of
// the embedded broker keep the identity they connected with, and a broker
// user's checks require its ACL pointer to still be the table's (see
// userSessionReason): a store answer that changed nothing must not cut
// them off. The caller holds a.mu.
func (a *Authorizer) internUser(id Identity) Identity {
	cur, ok := a.ids.byName[id.Username]
	if !ok {
		return id
	}
	old := cur.Value.(Identity)
	if old.ACL != nil && old.TenantUUID == id.TenantUUID && slices.Equal(old.ACL.Rules, id.ACL.Rules) {
		id.ACL = old.ACL
	}
	return id
}

// userSessionReason refuses a broker user's identity that is no longer the
// current one: its username was invalidated (deleted, password reset, rules
// changed) or a later login brought other rules, so the identity the
// embedded broker kept for an open session no longer applies. Devices keep
// their session's identity; a broker user's rights are the admin's to take
// back at once. The caller must not hold a.mu.
func (a *Authorizer) userSessionReason(id Identity) string {
	a.mu.Lock()
	cur, ok := a.ids.get(id.Username)
	a.mu.Unlock()
	switch {
	case !ok:
		return ReasonUnknownSession
	case cur.ACL != id.ACL:
		return ReasonRevoked
	}
	return ""
}

// allow counts an allowed decision.
func (a *Authorizer) allow(check Check, id Identity) {
	if id.IsBrokerUser() {
		a.metrics.decisions.WithLabelValues(string(check), "allow", reasonBrokerUser).Inc()
		return
	}
	a.metrics.allow(check, id)
}

func userPublishReason(id Identity, topic string) string {
	if !validTopic(topic) || strings.ContainsAny(topic, "+#") {
		return ReasonInvalidTopic
	}
	rest, reason := underTenant(id, topic)
	if reason != "" {
		return reason
	}
	if hasEmptyLevel(rest) {
		return ReasonInvalidTopic
	}
	if isCommandTopic(rest) {
		return ReasonCommandTopic
	}
	for _, r := range id.ACL.Rules {
		if r.Publish && covers(r.Pattern, rest) {
			return ""
		}
	}
	return ReasonNoRule
}

func userSubscribeReason(id Identity, filter string) string {
	if !validTopic(filter) {
		return ReasonInvalidTopic
	}
	rest, reason := underTenant(id, filter)
	if reason != "" {
		return reason
	}
	if !validFilterLevels(rest) {
		return ReasonInvalidTopic
	}
	for _, r := range id.ACL.Rules {
		if r.Subscribe && covers(r.Pattern, rest) {
			return ""
		}
	}
	return ReasonNoRule
}

// underTenant returns what follows "i/{tenant}/" in s. As in underAgent the
// prefix is compared as bytes, so no wildcard reaches another tenant.
func underTenant(id Identity, s string) (string, string) {
	prefix, err := TenantTopicPrefix(id.TenantUUID)
	if err != nil {
		return "", ReasonForeignTopic
	}
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || rest == "" {
		return "", ReasonForeignTopic
	}
	return rest, ""
}

// isCommandTopic reports whether rest (a topic below i/{tenant}/) lies in
// an agent's command subtree a/{agent}/cmd.
func isCommandTopic(rest string) bool {
	levels := strings.SplitN(rest, "/", 4)
	return len(levels) >= 3 && levels[0] == "a" && levels[2] == CommandLevel
}

// validFilterLevels reports whether f is a filter without empty levels
// whose wildcards are whole levels, '#' only last.
func validFilterLevels(f string) bool {
	if hasEmptyLevel(f) {
		return false
	}
	for rest := f; rest != ""; {
		var level string
		level, rest, _ = strings.Cut(rest, "/")
		switch {
		case level == "#":
			if rest != "" {
				return false
			}
		case level == "+":
		case strings.ContainsAny(level, "+#"):
			return false
		}
	}
	return true
}

// covers reports whether every topic the filter f matches is matched by the
// pattern p. Both are valid filters (validFilterLevels); a topic name is a
// filter without wildcards, so covers also decides whether p matches a
// topic. It compares level by level:
//
//   - a '#' in p matches its parent level and everything below, so once the
//     levels before it cover f's, p covers f;
//   - otherwise f must have a level there, and not '#' (which would match
//     topics of every length and any level, which p's next level limits);
//   - a '+' in p covers any one level of f, '+' included; a literal in p
//     covers only the same literal;
//   - when p ends without '#', its topics have exactly its levels, so f
//     must end there too.
func covers(p, f string) bool {
	for {
		pl, pRest, pMore := strings.Cut(p, "/")
		if pl == "#" {
			return true
		}
		fl, fRest, fMore := strings.Cut(f, "/")
		if fl == "#" {
			return false
		}
		if pl != "+" && pl != fl {
			return false
		}
		switch {
		case !pMore && !fMore:
			return true
		case !pMore:
			// p ends here; f has more levels.
			return false
		case !fMore:
			// f ends here; p has more levels, of which only a lone "#"
			// still matches f's topics (as their parent).
			return pRest == "#"
		}
		p, f = pRest, fRest
	}
}
