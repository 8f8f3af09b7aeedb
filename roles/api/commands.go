package api

import (
	"log/slog"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/roles/api/command"
	"github.com/edgeplat/edgeplat/roles/api/registry"
)

// noticeTargetStates tells an agent, on its command subtree, of every
// committed change of its target state; the agent then pulls it over
// HTTPS at once (docs/control-channel.md, section Target-state notices).
// The notice carries the version only: secrets never cross the broker.
func noticeTargetStates(agents *registry.Store, pub *command.Publisher, log *slog.Logger) {
	agents.OnTargetStateChange(func(ch registry.TargetStateChange) {
		tenant, err := codec.ParseUUID(ch.Tenant)
		if err != nil {
			log.Error("target-state notice not sent: tenant id", "tenant", ch.Tenant, "err", err)
			return
		}
		agent, err := codec.ParseUUID(ch.State.AgentUUID)
		if err != nil {
			log.Error("target-state notice not sent: agent id", "agent", ch.State.AgentUUID, "err", err)
			return
		}
		n := control.TargetStateNotice{Version: ch.State.Version, UpdatedAt: ch.State.UpdatedAt, Cleared: ch.Cleared}
		if err := pub.PublishJSON(tenant, agent, control.CmdTargetState, n); err != nil {
			log.Error("target-state notice not sent", "agent", ch.State.AgentUUID, "err", err)
		}
	})
}

// receiptSender hands the receipt tracker's receipts to the command
// publisher, on the agent's cmd/receipts topic. A receipt lost in the
// pending queue's overflow costs the agent one re-send after its wait.
type receiptSender struct {
	pub *command.Publisher
	log *slog.Logger
}

// Send implements receipts.Sender.
func (s receiptSender) Send(tenant, agent codec.UUID, payload []byte) {
	if err := s.pub.Publish(tenant, agent, control.CmdReceipts, payload); err != nil {
		s.log.Error("delivery receipt not sent", "agent", agent.String(), "err", err)
	}
}
