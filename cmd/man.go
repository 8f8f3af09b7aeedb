package cmd

import (
	"fmt"
	"os"
	"time"

	"github.com/edgeplat/edgeplat/core/buildinfo"
	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// newManCmd writes one man page per command, generated from the commands'
// own help so the pages cannot drift from the binary. The packages ship
// them (see docs/packaging.md); it is hidden because operators read the
// pages, they do not make them.
func newManCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:    "man",
		Short:  "Write the man pages (section 1) into a directory",
		Args:   cobra.NoArgs,
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return &usageError{err: fmt.Errorf("--dir is required")}
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("man: create %s: %w", dir, err)
			}
			info := buildinfo.Get()
			date := manDate(info.Date)
			header := &doc.GenManHeader{
				Title:   "EDGEPLAT",
				Section: "1",
				Source:  "edgeplat " + info.Version,
				Manual:  "edgeplat manual",
				Date:    &date,
			}
			root := cmd.Root()
			// The tag carries the generation time, which would make two builds
			// of the same commit differ.
			root.DisableAutoGenTag = true
			if err := doc.GenManTree(root, header, dir); err != nil {
				return fmt.Errorf("man: write pages to %s: %w", dir, err)
			}
			return nil
		},
	}
	c.Flags().StringVar(&dir, "dir", "", "directory to write the pages to (created if missing)")
	return c
}

// manDate dates the pages reproducibly: SOURCE_DATE_EPOCH when the build
// sets it, else the binary's build date, else today.
func manDate(buildDate string) time.Time {
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
		var sec int64
		if _, err := fmt.Sscan(v, &sec); err == nil {
			return time.Unix(sec, 0).UTC()
		}
	}
	if t, err := time.Parse(time.RFC3339, buildDate); err == nil {
		return t.UTC()
	}
	return time.Now().UTC()
}
