package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/roles/agent/httpapi"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// apiError makes the store's errors the API's: ErrNotFound, ErrDuplicate
// and ErrLastSuperuser keep their meaning for the routes.
func apiError(err error) error {
	for _, m := range []struct{ from, to error }{
		{store.ErrNotFound, httpapi.ErrNotFound},
		{store.ErrDuplicate, httpapi.ErrDuplicate},
		{store.ErrLastSuperuser, httpapi.ErrLastSuperuser},
	} {
		if errors.Is(err, m.from) {
			return fmt.Errorf("%w: %w", m.to, err)
		}
	}
	return err
}

// adminStore is httpapi.AdminStore on the agent's store.
type adminStore struct{ st *storeRef }

func toAPI(u store.AdminUser) httpapi.AdminUser {
	return httpapi.AdminUser{Username: u.Username, PasswordHash: u.PasswordHash, Active: u.Active, Superuser: u.Superuser}
}

func fromAPI(u httpapi.AdminUser) store.AdminUser {
	return store.AdminUser{Username: u.Username, PasswordHash: u.PasswordHash, Active: u.Active, Superuser: u.Superuser}
}

// with runs fn on the open store and translates its error.
func with[T any](r *storeRef, fn func(*store.Store) (T, error)) (T, error) {
	st, err := r.Open()
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := fn(st)
	return v, apiError(err)
}

func (a adminStore) Admin(ctx context.Context, username string) (httpapi.AdminUser, error) {
	return with(a.st, func(st *store.Store) (httpapi.AdminUser, error) {
		u, err := st.Admins().Get(ctx, username)
		return toAPI(u), err
	})
}

func (a adminStore) Admins(ctx context.Context) ([]httpapi.AdminUser, error) {
	return with(a.st, func(st *store.Store) ([]httpapi.AdminUser, error) {
		us, err := st.Admins().List(ctx)
		out := make([]httpapi.AdminUser, len(us))
		for i, u := range us {
			out[i] = toAPI(u)
		}
		return out, err
	})
}

func (a adminStore) CreateAdmin(ctx context.Context, u httpapi.AdminUser) error {
	_, err := with(a.st, func(st *store.Store) (struct{}, error) { return struct{}{}, st.Admins().Create(ctx, fromAPI(u)) })
	return err
}

func (a adminStore) CreateFirstAdmin(ctx context.Context, u httpapi.AdminUser) (bool, error) {
	return with(a.st, func(st *store.Store) (bool, error) { return st.Admins().CreateFirst(ctx, fromAPI(u)) })
}

func (a adminStore) UpdateAdmin(ctx context.Context, username string, p httpapi.AdminPatch) (httpapi.AdminUser, error) {
	return with(a.st, func(st *store.Store) (httpapi.AdminUser, error) {
		u, err := st.Admins().Update(ctx, username, store.AdminPatch{Active: p.Active, Superuser: p.Superuser, PasswordHash: p.PasswordHash})
		return toAPI(u), err
	})
}

func (a adminStore) DeleteAdmin(ctx context.Context, username string) error {
	_, err := with(a.st, func(st *store.Store) (struct{}, error) { return struct{}{}, st.Admins().Delete(ctx, username) })
	return err
}

func (a adminStore) CreateSession(ctx context.Context, idHash, username string, expires time.Time) error {
	_, err := with(a.st, func(st *store.Store) (struct{}, error) {
		return struct{}{}, st.Admins().CreateSession(ctx, idHash, username, expires)
	})
	return err
}

func (a adminStore) SessionUser(ctx context.Context, idHash string, now time.Time) (httpapi.AdminUser, error) {
	return with(a.st, func(st *store.Store) (httpapi.AdminUser, error) {
		u, err := st.Admins().SessionUser(ctx, idHash, now)
		return toAPI(u), err
	})
}

func (a adminStore) DeleteSession(ctx context.Context, idHash string) error {
	_, err := with(a.st, func(st *store.Store) (struct{}, error) { return struct{}{}, st.Admins().DeleteSession(ctx, idHash) })
	return err
}

func (a adminStore) PurgeSessions(ctx context.Context, now time.Time) (int64, error) {
	return with(a.st, func(st *store.Store) (int64, error) { return st.Admins().PurgeSessions(ctx, now) })
}

// bootstrapAdmin creates the first admin from AGENT_ADMIN_USERNAME and
// AGENT_ADMIN_PASSWORD when no admin exists. There is never a default
// password: without them the first admin comes from POST /v1/auth/setup.
func bootstrapAdmin(ctx context.Context, st *store.Store, cfg config.Agent, log *slog.Logger) error {
	if cfg.AdminUsername == "" {
		return nil
	}
	if err := httpapi.ValidUsername(cfg.AdminUsername); err != nil {
		return errors.New(config.Label("agent.admin_username") + ": " + strings.TrimPrefix(err.Error(), "username: "))
	}
	h, err := httpapi.HashPassword(cfg.AdminPassword.Reveal())
	if err != nil {
		return err
	}
	created, err := st.Admins().CreateFirst(ctx, store.AdminUser{Username: cfg.AdminUsername, PasswordHash: h})
	if err != nil {
		return err
	}
	if created {
		log.Info("first admin user created from "+config.EnvNames("agent.admin_username"), "username", cfg.AdminUsername)
	}
	return nil
}
