package memory

import (
	"fmt"
	"math"
	"strings"

	"github.com/edgeplat/edgeplat/core/streamstore"
)

// parseBound parses a range bound as XRANGE and XAUTOCLAIM do: "-" and "+"
// for the smallest and largest id, "(id" to exclude id, and an id without
// "-seq" meaning the first (start) or last (end) id of its millisecond. ok
// is false when an exclusive bound leaves nothing (for example "(+").
func parseBound(s string, end bool) (id streamstore.ID, ok bool, err error) {
	switch s {
	case "-":
		return streamstore.MinID, true, nil
	case "+":
		return streamstore.MaxID, true, nil
	}
	exclusive := strings.HasPrefix(s, "(")
	raw := strings.TrimPrefix(s, "(")
	id, err = streamstore.ParseID(raw)
	if err != nil {
		return id, false, fmt.Errorf("invalid range bound %q: %w", s, err)
	}
	if end && !strings.Contains(raw, "-") {
		id.Seq = math.MaxUint64
	}
	if !exclusive {
		return id, true, nil
	}
	if end {
		if id == streamstore.MinID {
			return id, false, nil
		}
		return id.Prev(), true, nil
	}
	if id == streamstore.MaxID {
		return id, false, nil
	}
	return id.Next(), true, nil
}
