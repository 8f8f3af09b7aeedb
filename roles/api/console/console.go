// Package console is the cloud console: the web pages serve-api (and so
// all-in-one) serves at /console, on top of the same /api/v1 routes every
// client uses. The files are embedded and served by core/webui; the
// pages, the session handling and how to add a page are in
// docs/web-consoles.md.
package console

import (
	"embed"
	"io/fs"

	"github.com/edgeplat/edgeplat/core/webui"
)

// Prefix is where the console is served.
const Prefix = "/console"

//go:embed files
var files embed.FS

// New builds the console's site.
func New() (*webui.Site, error) {
	sub, err := fs.Sub(files, "files")
	if err != nil {
		return nil, err
	}
	return webui.New(Prefix, sub)
}
