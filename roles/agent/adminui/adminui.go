// Package adminui is the agent's admin UI at /admin: a single page of
// plain ES modules embedded in the binary and served by core/webui,
// backed by the agent's own local API (docs/agent.md). Its pages, the
// login and first-run setup, and how to add a page are in
// docs/web-consoles.md, section "Agent admin UI".
package adminui

import (
	"embed"
	"fmt"
	"io/fs"

	"github.com/edgeplat/edgeplat/core/webui"
)

// Prefix is where the agent serves the UI.
const Prefix = "/admin"

//go:embed files
var files embed.FS

// New builds the UI from the embedded files.
func New() (*webui.Site, error) {
	sub, err := fs.Sub(files, "files")
	if err != nil {
		return nil, fmt.Errorf("admin ui files: %w", err)
	}
	site, err := webui.New(Prefix, sub)
	if err != nil {
		return nil, fmt.Errorf("admin ui: %w", err)
	}
	return site, nil
}
