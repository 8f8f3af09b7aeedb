package cmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/httpx/redislimit"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/core/streamstore/memory"
	redisstore "github.com/edgeplat/edgeplat/core/streamstore/redis"
)

// backends owns the database and the stream store. Their handles are made
// without I/O when the process is composed and handed to the roles'
// constructors (handles); the service opens and migrates the database and
// pings the store before any role starts, and closes both after every role
// has stopped. Owning them here, in the composition root, is what lets
// all-in-one's roles share one SQLite file and one in-process stream store.
//
// The database connects in Start rather than in db.New: a handle that held
// a pool (with its background goroutines) from the start would have to be
// closed on every path where composing the process fails later, before any
// service ran.
type backends struct {
	health *health.Registry
	db     *db.DB
	store  streamstore.Store
	limits *redislimit.Store
}

func newBackends(cfg *config.Config, r *rt.Runtime) (*backends, error) {
	d, err := db.New(cfg.DB, r.Logger)
	if err != nil {
		return nil, err
	}
	b := &backends{health: r.Health, db: d}
	switch cfg.StreamStore.Driver {
	case "memory":
		b.store, err = memory.New(memory.Options{})
	default:
		var rs *redisstore.Store
		rs, err = redisstore.New(redisstore.OptionsFromConfig(cfg.StreamStore))
		if err == nil {
			b.store = rs
			// Replicas share the stream store's Redis, and so their rate limits.
			b.limits = redislimit.NewStore(rs.Scripter(), redislimit.Options{Log: r.Component("ratelimit")})
		}
	}
	if err != nil {
		return nil, fmt.Errorf("stream store: %w", err)
	}
	return b, nil
}

// handles returns what the roles are given; usable once Start has run.
func (b *backends) handles() rt.Backends {
	return rt.Backends{DB: b.db, Streams: b.store, RateLimits: b.limits}
}

func (b *backends) Name() string { return "backends" }

func (b *backends) Start(ctx context.Context) error {
	if err := b.db.Open(ctx); err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	if _, err := b.db.Migrate(ctx); err != nil {
		_ = b.db.Close()
		return fmt.Errorf("migrate database: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := b.store.Ping(pctx); err != nil {
		_ = b.db.Close()
		return fmt.Errorf("stream store: %w", err)
	}
	b.health.Register("db", b.db.Ping)
	b.health.Register("streamstore", b.store.Ping)
	return nil
}

func (b *backends) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

func (b *backends) Stop(context.Context) error {
	return errors.Join(b.store.Close(), b.db.Close())
}

var _ lifecycle.Service = (*backends)(nil)
