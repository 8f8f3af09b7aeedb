package brokerauth

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/edgeplat/edgeplat/core/codec"
)

// Identity is who an MQTT client authenticated as.
type Identity struct {
	// Username is the MQTT username: a device's API key, the name of a
	// service user, or the name of a broker user.
	Username string
	// TenantUUID and AgentUUID are canonical (lowercase, hyphenated) UUIDs
	// of the device's tenant and agent; both are empty for service users.
	// A broker user has its tenant and no agent.
	TenantUUID string
	AgentUUID  string
	// Superuser is true for service users, which may use every topic.
	Superuser bool
	// ACL is set for broker users only (see users.go): the rules their
	// topics are checked against. A pointer keeps Identity comparable.
	ACL *ACL
}

// ClientIDPrefix starts every device's MQTT client id: a device connects as
// "agent-{uuid}" with its canonical agent UUID (docs/broker-auth.md).
const ClientIDPrefix = "agent-"

// AgentClientID returns the only client id the agent agentUUID may use.
func AgentClientID(agentUUID string) string { return ClientIDPrefix + agentUUID }

// MaxIdentifierLen bounds usernames and client ids. MQTT allows 65535 bytes;
// ours are API keys and "agent-{uuid}", far shorter, and every byte of an
// identifier is held in caches and written to logs.
const MaxIdentifierLen = 256

// ErrInvalidIdentifier is wrapped by ValidateIdentifier's errors.
var ErrInvalidIdentifier = errors.New("invalid MQTT identifier")

// ValidateIdentifier reports whether s may be an MQTT username or client id.
// The account store calls it before issuing a key, and the broker checks
// refuse identifiers it rejects, so no credential can ever carry:
//
//   - '+', '#' or '/': brokers substitute usernames and client ids into ACL
//     patterns (mosquitto's %u and %c, EMQX's ${username} and ${clientid}),
//     where a wildcard or an extra level would widen the pattern;
//   - '$': topics that start with it are the broker's own ($SYS, $share);
//   - control characters (NUL included) or invalid UTF-8: MQTT forbids NUL
//     and discourages the others in strings, and they forge log lines.
func ValidateIdentifier(s string) error {
	if s == "" {
		return fmt.Errorf("%w: empty", ErrInvalidIdentifier)
	}
	if len(s) > MaxIdentifierLen {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidIdentifier, len(s), MaxIdentifierLen)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidIdentifier)
	}
	for i, r := range s {
		switch {
		case r == '+' || r == '#' || r == '/' || r == '$':
			return fmt.Errorf("%w: %q at byte %d", ErrInvalidIdentifier, r, i)
		case unicode.IsControl(r):
			return fmt.Errorf("%w: control character %U at byte %d", ErrInvalidIdentifier, r, i)
		}
	}
	return nil
}

// agentFromClientID returns the agent UUID in a device client id. Only the
// canonical spelling counts: "agent-{UUID in capitals}" would be a second
// client id for one agent, and brokers compare client ids byte by byte
// (session takeover, per-client ACL patterns).
func agentFromClientID(clientID string) (string, bool) {
	rest, ok := strings.CutPrefix(clientID, ClientIDPrefix)
	if !ok {
		return "", false
	}
	u, ok := canonicalUUID(rest)
	if !ok || u != rest {
		return "", false
	}
	return u, true
}

// canonicalUUID parses a hyphenated UUID in either case and returns its
// canonical spelling.
func canonicalUUID(s string) (string, bool) {
	u, err := codec.ParseUUID(s)
	if err != nil {
		return "", false
	}
	return u.String(), true
}

// topicIDs returns the 22-character topic forms of id's tenant and agent.
func topicIDs(id Identity) (tenant, agent string, ok bool) {
	t, err := codec.ParseUUID(id.TenantUUID)
	if err != nil {
		return "", "", false
	}
	a, err := codec.ParseUUID(id.AgentUUID)
	if err != nil {
		return "", "", false
	}
	return codec.EncodeID(t), codec.EncodeID(a), true
}
