package cmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/roles/api/licence"
)

// newLicenseCmd groups the operator's licence tools: make a signing key,
// sign a licence, check one. The API only ever holds the public key; these
// run wherever the private key is kept.
func newLicenseCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "license",
		Short: "Make licence signing keys, issue and verify licences",
		Long: `Tools for the signed licence the Cloud API enforces (docs/licence.md).

A licence is a JWT signed with an Ed25519 or RSA private key. serve-api
verifies it with the public key in ` + config.Label("licence.public_key") + `
and reads the licence from ` + config.Label("licence.key") + `. Start with keygen,
then issue licences with the private key it wrote.`,
		// NoArgs with a RunE makes a mistyped subcommand an "unknown
		// command" usage error instead of a help page and success.
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	c.AddCommand(newLicenseKeygenCmd(), newLicenseIssueCmd(), newLicenseVerifyCmd())
	return c
}

func newLicenseKeygenCmd() *cobra.Command {
	var out string
	c := &cobra.Command{
		Use:   "keygen --out DIR",
		Short: "Write a new Ed25519 key pair for signing licences",
		Long: `Write a new Ed25519 key pair into --out: ` + licence.PrivateKeyFile + ` (mode 0600) signs
licences and must stay with the operator; ` + licence.PublicKeyFile + ` goes to every API
as ` + config.Label("licence.public_key") + `. Existing key files are never
overwritten: licences signed with a replaced key would stop verifying.`,
		Example: `  edgeplat license keygen --out ./licence-keys`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if strings.TrimSpace(out) == "" {
				return &usageError{err: errors.New("--out must name a directory")}
			}
			priv, pub, err := licence.WriteKeyPair(out)
			if err != nil {
				return fmt.Errorf("--out %s: %w", out, err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "private key: %s (keep it secret: it signs licences)\npublic key:  %s (%s on the API)\n", priv, pub, config.Label("licence.public_key"))
			return err
		},
	}
	c.Flags().StringVar(&out, "out", "", "directory to write the key pair into, created if missing (required)")
	_ = c.MarkFlagRequired("out")
	return c
}

func newLicenseIssueCmd() *cobra.Command {
	var (
		keyFile, customer, features, expires string
		maxAgents                            int
		demo                                 bool
	)
	c := &cobra.Command{
		Use:   "issue --key PRIVATE_KEY_FILE --customer NAME --expires DATE|DURATION",
		Short: "Sign a licence and print it",
		Long: `Sign a licence with the private key in --key (Ed25519 or RSA of at least
2048 bits, PEM) and print the JWT on stdout; a summary goes to stderr.

--expires takes a date (2027-12-31: valid through that day, UTC), an RFC 3339
time, or a duration from now (365d, 720h). --features is a comma-separated
list of ` + strings.Join(licence.Features, ", ") + `, or "all".`,
		Example: `  edgeplat license issue --key licence-keys/` + licence.PrivateKeyFile + ` \
    --customer "Acme Plant 3" --max-agents 50 --features export,ai --expires 2027-12-31 > acme.jwt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			now := time.Now()
			if strings.TrimSpace(customer) == "" {
				return &usageError{err: errors.New("--customer must not be empty")}
			}
			if maxAgents < 0 {
				return &usageError{err: fmt.Errorf("--max-agents must be 0 (unlimited) or more, got %d", maxAgents)}
			}
			feats, err := parseFeatures(features)
			if err != nil {
				return &usageError{err: err}
			}
			exp, err := parseExpiry(expires, now)
			if err != nil {
				return &usageError{err: err}
			}
			key, err := os.ReadFile(keyFile)
			if err != nil {
				return &usageError{err: fmt.Errorf("--key: read private key: %w", err)}
			}
			raw, err := licence.Issue(key, licence.Claims{Customer: customer, MaxAgents: maxAgents, Features: feats,
				Demo: demo, IssuedAt: now, ExpiresAt: exp})
			if err != nil {
				return &usageError{err: fmt.Errorf("--key %s: %w", keyFile, err)}
			}
			agents := "unlimited agents"
			if maxAgents > 0 {
				agents = strconv.Itoa(maxAgents) + " agents"
			}
			if len(feats) == 0 {
				feats = []string{"no premium features"}
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "licence for %q: %s, %s, valid until %s\n",
				strings.TrimSpace(customer), agents, strings.Join(feats, ", "), exp.UTC().Format(time.RFC3339))
			_, err = fmt.Fprintln(cmd.OutOrStdout(), raw)
			return err
		},
	}
	f := c.Flags()
	f.StringVar(&keyFile, "key", "", "PEM file of the private key to sign with (required)")
	f.StringVar(&customer, "customer", "", "customer the licence is for (required)")
	f.StringVar(&expires, "expires", "", "expiry: a date (2027-12-31), an RFC 3339 time or a duration (365d) (required)")
	f.IntVar(&maxAgents, "max-agents", 0, "registered agents allowed; 0 for unlimited")
	f.StringVar(&features, "features", "", `premium features, comma-separated: `+strings.Join(licence.Features, ", ")+`, or "all"`)
	f.BoolVar(&demo, "demo", false, "label the licence as a demo")
	for _, name := range []string{"key", "customer", "expires"} {
		_ = c.MarkFlagRequired(name)
	}
	return c
}

func newLicenseVerifyCmd() *cobra.Command {
	var pubKey string
	c := &cobra.Command{
		Use:   "verify --public-key PUBLIC_KEY [LICENCE]",
		Short: "Check a licence as the API would and print its status",
		Long: `Verify a licence with the public key the API would use and print the
status the API would report, as JSON. LICENCE is the JWT or a file holding
it; without it, or with "-", the licence is read from stdin. Exits 1 when
the API would run restricted with this licence.`,
		Example: `  edgeplat license verify --public-key licence-keys/` + licence.PublicKeyFile + ` acme.jwt`,
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			lic := "-"
			if len(args) == 1 {
				lic = args[0]
			}
			if lic == "-" {
				b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), 1<<20))
				if err != nil {
					return fmt.Errorf("read licence from stdin: %w", err)
				}
				lic = strings.TrimSpace(string(b))
				if lic == "" {
					return &usageError{err: errors.New("no licence given: pass the JWT or a file, or pipe it to stdin")}
				}
			}
			st := licence.New(config.Licence{Key: lic, PublicKey: pubKey}, nil).Load(cmd.Context())
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			if err := enc.Encode(st); err != nil {
				return err
			}
			if !st.Valid() {
				return fmt.Errorf("the API would run restricted (%s): %s", st.Reason, st.Message)
			}
			return nil
		},
	}
	c.Flags().StringVar(&pubKey, "public-key", "", "public key PEM file or text, as licence.public_key (required)")
	_ = c.MarkFlagRequired("public-key")
	return c
}

// parseFeatures reads --features: names from licence.Features, or "all";
// sorted and without repeats, as the licence stores them.
func parseFeatures(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		switch {
		case f == "":
		case f == "all":
			out = append(out, licence.Features...)
		case licence.KnownFeature(f):
			out = append(out, f)
		default:
			return nil, fmt.Errorf("--features: unknown feature %q; known: %s, or all", f, strings.Join(licence.Features, ", "))
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// parseExpiry reads --expires. A bare date means through the end of that
// day in UTC, which is what "expires 2027-12-31" says to a person.
func parseExpiry(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	var exp time.Time
	if d, err := time.Parse(time.DateOnly, s); err == nil {
		exp = d.AddDate(0, 0, 1)
	} else if t, err := time.Parse(time.RFC3339, s); err == nil {
		exp = t
	} else if d, ok := parseDays(s); ok {
		exp = now.Add(d)
	} else if d, err := time.ParseDuration(s); err == nil {
		exp = now.Add(d)
	} else {
		return time.Time{}, fmt.Errorf("--expires must be a date (2027-12-31), an RFC 3339 time or a duration (365d, 720h), got %q", s)
	}
	if !exp.After(now) {
		return time.Time{}, fmt.Errorf("--expires %q is not in the future", s)
	}
	return exp, nil
}

// parseDays reads "365d", which time.ParseDuration does not know.
func parseDays(s string) (time.Duration, bool) {
	n, ok := strings.CutSuffix(s, "d")
	if !ok {
		return 0, false
	}
	days, err := strconv.Atoi(n)
	if err != nil || days < 0 || days > 100*366 {
		return 0, false
	}
	return time.Duration(days) * 24 * time.Hour, true
}
