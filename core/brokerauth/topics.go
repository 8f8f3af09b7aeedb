package brokerauth

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// CommandLevel is the topic level under an agent's prefix that carries
// cloud-to-agent messages: desired-state updates and job dispatches are
// published under i/{tenant}/a/{agent}/cmd/#. Nothing outside fixes these
// topic names; one fixed subtree lets the ACL give the
// cloud, and only the cloud, the right to write there, and lets a device
// subscribe to exactly its own commands.
const CommandLevel = "cmd"

// maxTopicLen is MQTT's limit on a topic name or filter.
const maxTopicLen = 65535

// Why a check said no. Values are metric label values and DenyEvent reasons,
// so the set is fixed and small.
const (
	ReasonAnonymous      = "anonymous"         // empty username
	ReasonBadIdentifier  = "bad_identifier"    // username or client id fails ValidateIdentifier
	ReasonBadClientID    = "bad_client_id"     // not agent-{uuid} of the key's agent
	ReasonBadCredentials = "bad_credentials"   // unknown or revoked key, wrong password
	ReasonStoreError     = "store_error"       // the store failed, timed out or answered nonsense
	ReasonRevoked        = "revoked"           // the key was revoked while it was being checked
	ReasonUnknownSession = "unknown_session"   // ACL check for a username this process never authenticated
	ReasonInvalidTopic   = "invalid_topic"     // control characters, empty levels, misplaced wildcards
	ReasonForeignTopic   = "foreign_topic"     // outside i/{own tenant}/a/{own agent}/
	ReasonCommandTopic   = "command_topic"     // a device publishing into its cmd subtree
	ReasonNotCommand     = "not_command_topic" // a device subscribing outside its cmd subtree
	ReasonMalformed      = "malformed_request" // a callback the HTTP layer could not read
	ReasonNoRule         = "no_matching_rule"  // a broker user's topic or filter that none of its rules allows
)

// CanPublish reports whether id may publish to topic: service users
// anywhere; a device only under i/{its tenant}/a/{its agent}/, outside the
// command subtree, with no wildcard, empty level or control character; a
// broker user only to topics under i/{its tenant}/ that one of its rules
// allows (users.go).
func (a *Authorizer) CanPublish(id Identity, topic string) bool {
	return publishReason(id, topic) == ""
}

// CanSubscribe reports whether id may subscribe to filter: service users to
// anything; a device only to filters inside i/{its tenant}/a/{its agent}/cmd,
// so no filter it holds can match another agent's or tenant's topic; a
// broker user only to filters under i/{its tenant}/ that one of its rules
// covers entirely (users.go). A
// topic name is a filter without wildcards, so the same rule decides whether
// a message may be delivered to the device.
func (a *Authorizer) CanSubscribe(id Identity, filter string) bool {
	return subscribeReason(id, filter) == ""
}

func publishReason(id Identity, topic string) string {
	if id.Superuser {
		return ""
	}
	if id.IsBrokerUser() {
		return userPublishReason(id, topic)
	}
	if !validTopic(topic) || strings.ContainsAny(topic, "+#") {
		return ReasonInvalidTopic
	}
	rest, reason := underAgent(id, topic)
	if reason != "" {
		return reason
	}
	first, _, _ := strings.Cut(rest, "/")
	if first == CommandLevel {
		return ReasonCommandTopic
	}
	if hasEmptyLevel(rest) {
		return ReasonInvalidTopic
	}
	return ""
}

func subscribeReason(id Identity, filter string) string {
	if id.Superuser {
		return ""
	}
	if id.IsBrokerUser() {
		return userSubscribeReason(id, filter)
	}
	if !validTopic(filter) {
		return ReasonInvalidTopic
	}
	rest, reason := underAgent(id, filter)
	if reason != "" {
		return reason
	}
	first, more, _ := strings.Cut(rest, "/")
	if first != CommandLevel {
		return ReasonNotCommand
	}
	if rest == CommandLevel {
		return ""
	}
	// Past "cmd" each level is literal, "+", or a final "#"; the levels
	// before it were compared byte for byte, so every topic this filter
	// matches lies under i/{tenant}/a/{agent}/cmd.
	for more != "" {
		var level string
		level, more, _ = strings.Cut(more, "/")
		switch {
		case level == "#":
			if more != "" {
				return ReasonInvalidTopic
			}
			return ""
		case level == "+":
		case level == "" || strings.ContainsAny(level, "+#"):
			return ReasonInvalidTopic
		}
	}
	if strings.HasSuffix(rest, "/") {
		return ReasonInvalidTopic
	}
	return ""
}

// underAgent returns what follows "i/{tenant}/a/{agent}/" in s. The prefix is
// compared as bytes: tenant and agent ids are 22 characters of URL-safe
// Base64 with one spelling each, so "+" or any other text in those levels
// never equals them.
func underAgent(id Identity, s string) (string, string) {
	tenant, agent, ok := topicIDs(id)
	if !ok {
		// A device identity without a tenant and agent can own no topic.
		return "", ReasonForeignTopic
	}
	prefix := "i/" + tenant + "/a/" + agent + "/"
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || rest == "" {
		return "", ReasonForeignTopic
	}
	return rest, ""
}

// validTopic reports whether s is a non-empty UTF-8 topic or filter of
// legal length without control characters: MQTT forbids NUL and the rest
// only serve to confuse logs and downstream parsers.
func validTopic(s string) bool {
	if s == "" || len(s) > maxTopicLen || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// hasEmptyLevel reports whether a topic has an empty level: none of the
// platform's topics has one, and "x/" next to "x" only invites mix-ups.
func hasEmptyLevel(s string) bool {
	return s == "" || strings.HasPrefix(s, "/") || strings.HasSuffix(s, "/") || strings.Contains(s, "//")
}
