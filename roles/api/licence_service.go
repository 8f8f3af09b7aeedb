package api

import (
	"context"
	"log/slog"

	"github.com/edgeplat/edgeplat/roles/api/licence"
)

// licenceLoader reads and verifies the licence when the role starts (New
// does no I/O). A missing or bad licence does not stop the API: it runs
// restricted, and says so in the log.
type licenceLoader struct {
	m   *licence.Manager
	log *slog.Logger
}

func (l *licenceLoader) Name() string { return "api-licence" }

func (l *licenceLoader) Start(ctx context.Context) error {
	st := l.m.Load(ctx)
	if st.Valid() {
		l.log.Info("licence valid", "customer", st.Customer, "max_agents", st.MaxAgents, "features", st.Features,
			"expires", st.ExpiresAt, "demo", st.Demo)
	} else {
		l.log.Warn("no valid licence: running restricted (existing agents keep reporting; registrations and premium routes answer 403)",
			"reason", st.Reason, "detail", st.Detail)
	}
	return nil
}

func (l *licenceLoader) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

func (l *licenceLoader) Stop(context.Context) error { return nil }
