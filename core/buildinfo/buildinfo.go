// Package buildinfo holds the version stamp that release builds set with
// -ldflags, so every role reports the same version, commit and build date.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set at link time by the release build:
//
//	-X github.com/edgeplat/edgeplat/core/buildinfo.Version=1.2.3
var (
	Version = "dev"
	Commit  = "unknown"
	Date    = "unknown"
)

// Info is the version stamp in a form that marshals cleanly to JSON.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"date"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns the stamp, falling back to the VCS data the Go toolchain embeds
// so a plain `go build` still names its commit.
func Get() Info {
	info := Info{Version: Version, Commit: Commit, Date: Date, GoVersion: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && info.Commit == "unknown":
				info.Commit = s.Value
			case s.Key == "vcs.time" && info.Date == "unknown":
				info.Date = s.Value
			}
		}
	}
	return info
}

// String renders the stamp on one line for `edgeplat version`.
func (i Info) String() string {
	return fmt.Sprintf("edgeplat %s (commit %s, built %s, %s %s)", i.Version, i.Commit, i.Date, i.GoVersion, i.Platform)
}
