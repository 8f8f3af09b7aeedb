package cmd

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/roles/api/token"
)

// maxCLITokenTTL bounds tokens minted on the command line: they are for
// scripts and first steps, and a leaked one should die soon.
const maxCLITokenTTL = 24 * time.Hour

// newTokenCmd mints an access token with the deployment's own signing key.
// It is how an operator (or a demo on all-in-one) reaches the REST API
// before any user exists: whoever can read the key can sign tokens anyway,
// so the command grants nothing the key does not.
func newTokenCmd() *cobra.Command {
	var (
		tenant, role, subject, dataDir string
		ttl                            time.Duration
	)
	c := &cobra.Command{
		Use:   "token --tenant UUID",
		Short: "Issue a REST API access token signed with the configured key",
		Long: `Issue a Cloud API access token for one tenant and print it on stdout.

The token is signed as serve-api signs its own: with ` + config.Label("jwt.secret") + `
or ` + config.Label("jwt.private_key") + `, read from --config and
the environment. When neither is set, the secret that all-in-one generated
in its data directory (--data-dir) is used. Only a holder of the signing key
can do this, and the token is valid for --ttl (at most 24h).`,
		Example: `  TOKEN=$(edgeplat token --tenant 5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1a)
  curl -H "Authorization: Bearer $TOKEN" localhost:3002/api/v1/readings/latest`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			u, err := codec.ParseUUID(tenant)
			if err != nil {
				return &usageError{err: fmt.Errorf("--tenant must be a tenant UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx), got %q", tenant)}
			}
			if role != "admin" && role != "member" {
				return &usageError{err: fmt.Errorf("--role must be admin or member, got %q", role)}
			}
			if strings.TrimSpace(subject) == "" {
				return &usageError{err: errors.New("--subject must not be empty")}
			}
			if ttl <= 0 || ttl > maxCLITokenTTL {
				return &usageError{err: fmt.Errorf("--ttl must be between 1s and %s, got %s", maxCLITokenTTL, ttl)}
			}
			cfg, err := loadConfig(cmd, roleSpec{role: config.RoleAPI})
			if err != nil {
				return err
			}
			if dataDir == "" {
				dataDir = cfg.AllInOne.DataDir
			}
			if err := useDataDirSecret(&cfg.JWT, dataDir); err != nil {
				return err
			}
			cfg.JWT.AccessTokenExpiry = ttl
			svc, err := token.New(cfg.JWT)
			if err != nil {
				return fmt.Errorf("token key: %w", err)
			}
			raw, claims, err := svc.Sign(token.Claims{Subject: subject, Tenant: u.String(), Role: role, Kind: token.Access, Operator: true})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "access token for tenant %s (%s, subject %q, %s), valid until %s\n",
				u, role, subject, svc.Algorithm(), claims.ExpiresAt.UTC().Format(time.RFC3339))
			_, err = fmt.Fprintln(cmd.OutOrStdout(), raw)
			return err
		},
	}
	f := c.Flags()
	f.StringVar(&tenant, "tenant", "", "tenant UUID the token is scoped to (required)")
	f.StringVar(&role, "role", "member", "role in the token: admin or member")
	f.StringVar(&subject, "subject", "edgeplat-cli", "subject (user id) in the token")
	f.DurationVar(&ttl, "ttl", 15*time.Minute, "lifetime of the token (at most 24h)")
	f.StringVar(&dataDir, "data-dir", "", "all-in-one data directory whose generated secret is used when no key is configured (default all_in_one.data_dir)")
	_ = c.MarkFlagRequired("tenant")
	return c
}

// useDataDirSecret fills j from the secret all-in-one keeps in dataDir when
// no key is configured. Unlike ensureJWTSecret it never creates one: a
// token signed with a new secret would be useless to the running server.
func useDataDirSecret(j *config.JWT, dataDir string) error {
	if j.Secret.IsSet() || j.PrivateKey.IsSet() || j.PublicKey != "" {
		return nil
	}
	path := filepath.Join(dataDir, jwtSecretFile)
	s, err := readJWTSecret(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no signing key: set %s or %s as serve-api has them, or point --data-dir at the data directory of an all-in-one that has run (%s does not exist)", config.Label("jwt.secret"), config.Label("jwt.private_key"), path)
	}
	if err != nil {
		return err
	}
	j.Secret = config.Secret(s)
	return nil
}
