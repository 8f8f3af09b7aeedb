//go:build !unix

package jobs

import (
	"context"
	"errors"
)

// shell is refused where process groups are not available.
func shell(context.Context, string) (outcome, error) {
	return outcome{}, errors.New("the shell handler runs on unix systems only")
}
