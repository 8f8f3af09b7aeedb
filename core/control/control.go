// Package control holds the wire contract of the control channel between
// the cloud and its agents: the MQTT topics of the agent's command subtree
// and of its reports, and the documents sent on them. Both sides import
// it, so the agent and the Cloud API cannot drift apart on a field name.
// docs/control-channel.md describes the same contract for operators.
package control

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/edgeplat/edgeplat/core/codec"
)

// Command names: the topic levels after "cmd/". Only the cloud publishes
// in an agent's command subtree (docs/broker-auth.md).
const (
	// CmdTargetState tells the agent its target state changed; the agent
	// fetches it over HTTPS at once, so secrets never cross the broker.
	CmdTargetState = "target-state"
	// CmdReceipts carries delivery receipts for telemetry the cloud holds.
	CmdReceipts = "receipts"
)

// Report names: the topic levels after the agent prefix that carry the
// agent's own reports, next to its telemetry under "endpoints/".
const (
	ReportState   = "state"
	ReportMetrics = "metrics"
)

// Prefix is the agent's topic prefix "i/{tenant}/a/{agent}", the ids in
// their 22-character topic form (codec.EncodeID).
func Prefix(tenant, agent codec.UUID) string {
	return "i/" + codec.EncodeID(tenant) + "/a/" + codec.EncodeID(agent)
}

// CommandTopic is the topic of one command for the agent whose prefix
// is prefix.
func CommandTopic(prefix, name string) string {
	return strings.TrimSuffix(prefix, "/") + "/cmd/" + name
}

// CommandFilter is the subscription an agent makes for all its commands.
func CommandFilter(prefix string) string {
	return strings.TrimSuffix(prefix, "/") + "/cmd/#"
}

// ReportTopic is the topic of one of the agent's reports.
func ReportTopic(prefix, name string) string {
	return strings.TrimSuffix(prefix, "/") + "/" + name
}

// ParseCommandTopic splits a command topic into the agent's prefix and
// the command name (which may have levels of its own, as jobs will).
func ParseCommandTopic(topic string) (prefix, name string, err error) {
	levels := strings.Split(topic, "/")
	if len(levels) < 6 || levels[0] != "i" || levels[2] != "a" || levels[4] != "cmd" {
		return "", "", fmt.Errorf("not a command topic: %q", clip(topic))
	}
	for _, id := range []string{levels[1], levels[3]} {
		if _, err := codec.DecodeID(id); err != nil {
			return "", "", fmt.Errorf("command topic %q: %w", clip(topic), err)
		}
	}
	name = strings.Join(levels[5:], "/")
	if slices.Contains(levels[5:], "") {
		return "", "", errors.New("command topic has an empty level")
	}
	return strings.Join(levels[:4], "/"), name, nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
