package api

import (
	"context"
	"log/slog"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
	"github.com/edgeplat/edgeplat/roles/api/licence"
	"github.com/edgeplat/edgeplat/roles/api/registry"
	"github.com/edgeplat/edgeplat/roles/api/token"
)

// access is the Cloud API's access layer: accounts, the agent registry and
// the licence, with the authenticator that reads credentials. New and the
// tests mount it the same way.
type access struct {
	cfg      *config.Config
	tokens   *token.Service
	accounts *accounts.Store
	agents   *registry.Store
	licence  *licence.Manager
	auth     *authenticator
	log      *slog.Logger
	r        *rt.Runtime
}

func newAccess(cfg *config.Config, r *rt.Runtime, tokens *token.Service) *access {
	dbf := func() *db.DB { return r.DB } // opened after the roles are built
	a := &access{
		cfg:      cfg,
		tokens:   tokens,
		accounts: accounts.NewStore(dbf),
		agents:   registry.NewStore(dbf),
		licence:  licence.New(cfg.Licence, r.Component("api-licence")),
		log:      r.Component("api-access"),
		r:        r,
	}
	a.auth = &authenticator{tokens: tokens, accounts: a.accounts, log: a.log}
	return a
}

// audit records e with the request's client address. A lost audit write is
// logged, not answered: what it describes has already happened.
func (a *access) audit(c *gin.Context, e accounts.Event) {
	e.IP = c.ClientIP()
	if err := a.accounts.Record(c.Request.Context(), e); err != nil {
		a.log.Error("audit event lost", "kind", e.Kind, "err", err)
	}
}

// mount adds the access routes: public ones (they create a session or
// carry their own credential) and protected ones (behind auth.require).
func (a *access) mount(public, protected *gin.RouterGroup) {
	accounts.Register(public, protected, accounts.Deps{
		Store:      a.accounts,
		Tokens:     a.tokens,
		Caller:     caller,
		WriteError: WriteError,
		ClientIP:   func(c *gin.Context) string { return c.ClientIP() },
		Mailer:     newMailer(a.cfg.Auth),
		PublicURL:  a.cfg.Auth.PublicURL,
		ResetTTL:   a.cfg.Auth.ResetTokenExpiry,
		Log:        a.r.Component("api-accounts"),
	})
	brokerURL := a.cfg.BrokerAuth.BrokerURL
	if brokerURL == "" {
		brokerURL = a.cfg.MQTT.BrokerURL
	}
	registry.Register(public, protected, registry.Deps{
		Store:      a.agents,
		Caller:     caller,
		WriteError: WriteError,
		Audit:      a.audit,
		Admit:      a.licence.CheckRegistration,
		BrokerURL:  brokerURL,
		Log:        a.r.Component("api-registry"),
	})
	a.licence.Routes(protected, func(ctx context.Context) (licence.Usage, error) {
		n, err := a.agents.CountAgents(ctx)
		return licence.Usage{Agents: n}, err
	}, requireAdmin, WriteError)
}
