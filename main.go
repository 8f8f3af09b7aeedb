// Command edgeplat is the single executable of the edgeplat platform; the
// subcommand picks the role (serve-api, ingest, agent or all-in-one).
package main

import (
	"os"

	"github.com/edgeplat/edgeplat/cmd"
)

func main() { os.Exit(cmd.Execute()) }
