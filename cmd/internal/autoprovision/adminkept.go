package autoprovision

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
)

// adminKept is why the configured all-in-one admin credentials do not
// apply to a data directory that has an admin already, or "" when they
// do apply: no admin exists yet, or they are the existing admin's. The
// variables only create the first admin, and a newcomer who sets them on
// a second start would otherwise be left wondering why the login fails.
// The accounts store looks the admin up, so the e-mail is normalised and
// the password checked as a login would.
func adminKept(ctx context.Context, st *accounts.Store, email, password string) (string, error) {
	has, err := st.HasAdmin(ctx)
	if err != nil || !has {
		return "", err
	}
	u, err := st.UserByEmail(ctx, email)
	switch {
	case errors.Is(err, accounts.ErrNotFound) || err == nil && u.Role != accounts.RoleAdmin:
		return fmt.Sprintf("no admin of this data directory has the e-mail %s", email), nil
	case err != nil:
		return "", fmt.Errorf("find admin: %w", err)
	case password != "" && !u.PasswordMatches(password):
		return fmt.Sprintf("the password is not that of the existing admin %s", email), nil
	}
	return "", nil
}

// warnAdminKept logs one warning when the operator set the admin
// credentials and the data directory's existing admin keeps its own.
func warnAdminKept(ctx context.Context, log *slog.Logger, cfg *config.Config, d *db.DB) {
	emailSet := cfg.SourceOf("all_in_one.admin_email").Layer != "default"
	passwordSet := cfg.SourceOf("all_in_one.admin_password").Layer != "default"
	if !emailSet && !passwordSet {
		return
	}
	st := accounts.NewStore(d)
	reason, err := adminKept(ctx, st, cfg.AllInOne.AdminEmail, cfg.AllInOne.AdminPassword.Reveal())
	if err != nil {
		log.Debug("cannot compare the configured admin with the existing one", "err", err)
		return
	}
	if reason == "" {
		return
	}
	dir := cfg.AllInOne.DataDir
	log.Warn(config.EnvNames("all_in_one.admin_email")+" and "+config.EnvNames("all_in_one.admin_password")+" only create the first admin; this data directory has one, and it is kept",
		"reason", reason, "data_dir", dir,
		"start_fresh", "stop all-in-one and remove "+dir+", or start with --data-dir elsewhere",
		"keep_data", "log in as the existing admin and use POST /api/v1/auth/change-password or /auth/password/reset (docs/access.md)")
}
