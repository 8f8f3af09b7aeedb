package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// newHealthcheckCmd probes a role's GET /health from inside its container.
// The image is distroless (no shell, curl or wget), so Docker's
// HEALTHCHECK needs the binary itself to do the request (docs/packaging.md).
func newHealthcheckCmd() *cobra.Command {
	var urls []string
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "healthcheck",
		Short: "Probe a role's /health on this host; exit 0 when healthy",
		Long: `Probe GET /health of the role running on this host and exit 0 when it
answers 2xx, 1 otherwise: the HEALTHCHECK of the container image.

Without --url it tries http://127.0.0.1:$PORT/health when PORT is set,
else serve-api's port 3002, then ingest's 3003; the first that accepts the
connection decides, so one command fits every role of the image.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(urls) == 0 {
				urls = defaultHealthURLs(os.Getenv("PORT"))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			url, err := probeHealth(ctx, &http.Client{}, urls)
			if err != nil {
				return &exitError{code: exitFailure, err: reportHealth(cmd.ErrOrStderr(), err)}
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "healthy: %s\n", url)
			return err
		},
	}
	c.Flags().StringSliceVar(&urls, "url", nil, "health URL to probe (repeatable; the first that accepts the connection decides)")
	c.Flags().DurationVar(&timeout, "timeout", 4*time.Second, "give up after this long")
	return c
}

// reportHealth prints err once, since exitError makes Execute print nothing.
func reportHealth(w io.Writer, err error) error {
	fmt.Fprintf(w, "edgeplat healthcheck: %s\n", err)
	return err
}

// defaultHealthURLs: PORT is the role's port for both serve-api and ingest
// (config keys api.port and ingest.port); without it the defaults.
func defaultHealthURLs(port string) []string {
	if port = strings.TrimSpace(port); port != "" {
		return []string{"http://127.0.0.1:" + port + "/health"}
	}
	return []string{"http://127.0.0.1:3002/health", "http://127.0.0.1:3003/health"}
}

// errNotListening marks a URL whose port refused the connection, so the
// next candidate is tried.
var errNotListening = errors.New("not listening")

// probeHealth returns the URL that answered 2xx. A URL whose port refuses
// the connection passes to the next; any other answer decides.
func probeHealth(ctx context.Context, client *http.Client, urls []string) (string, error) {
	var errs []error
	for _, u := range urls {
		err := probeOne(ctx, client, u)
		if err == nil {
			return u, nil
		}
		if !errors.Is(err, errNotListening) {
			return "", err
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return "", errors.New("no URL to probe")
	}
	return "", errors.Join(errs...)
}

func probeOne(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("probe %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("probe %s: %w", url, errNotListening)
		}
		return fmt.Errorf("probe %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("probe %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
