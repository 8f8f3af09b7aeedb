package export

import (
	"os"
	"path/filepath"
	"time"

	"github.com/edgeplat/edgeplat/config"
)

// Settings are the export's configuration (docs/configuration.md).
type Settings struct {
	// Dir holds the background exports' files, one folder per tenant.
	// API replicas must share it: a job is written by whichever replica
	// takes it and downloaded from whichever the client reaches.
	Dir string
	// LinkTTL is how long a download link works after it is handed out.
	LinkTTL time.Duration
	// Retention is how long a finished job and its file are kept.
	Retention time.Duration
}

// Defaults of Settings' zero fields.
const (
	DefaultLinkTTL   = time.Hour
	DefaultRetention = 24 * time.Hour
)

// SettingsFrom reads the api.export_* settings; an empty directory is
// edgeplat-export in the system's temporary directory.
func SettingsFrom(c config.API) Settings {
	return Settings{Dir: c.ExportDir, LinkTTL: c.ExportLinkTTL, Retention: c.ExportRetention}.withDefaults()
}

func (s Settings) withDefaults() Settings {
	if s.Dir == "" {
		s.Dir = filepath.Join(os.TempDir(), "edgeplat-export")
	}
	if s.LinkTTL <= 0 {
		s.LinkTTL = DefaultLinkTTL
	}
	if s.Retention <= 0 {
		s.Retention = DefaultRetention
	}
	return s
}
