package cmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/core/streamstore/memory"
	redisstore "github.com/edgeplat/edgeplat/core/streamstore/redis"
)

// backends opens the database (and migrates it) and the stream store before
// any role starts, hands them to the roles through the Runtime, and closes
// them after every role has stopped. Owning them here, in the composition
// root, is what lets all-in-one's roles share one SQLite file and one
// in-process stream store.
type backends struct {
	rt    *rt.Runtime
	db    *db.DB
	store streamstore.Store
}

func newBackends(cfg *config.Config, r *rt.Runtime) (*backends, error) {
	d, err := db.New(cfg.DB, r.Logger)
	if err != nil {
		return nil, err
	}
	var store streamstore.Store
	switch cfg.StreamStore.Driver {
	case "memory":
		store, err = memory.New(memory.Options{})
	default:
		store, err = redisstore.New(redisstore.OptionsFromConfig(cfg.StreamStore))
	}
	if err != nil {
		return nil, fmt.Errorf("stream store: %w", err)
	}
	return &backends{rt: r, db: d, store: store}, nil
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
	b.rt.DB, b.rt.Streams = b.db, b.store
	b.rt.Health.Register("db", b.db.Ping)
	b.rt.Health.Register("streamstore", b.store.Ping)
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
