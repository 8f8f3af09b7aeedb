package config

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// WritePrintable writes the effective configuration of the role as YAML,
// secrets masked, each value annotated with the layer it came from.
func (c *Config) WritePrintable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# edgeplat %s: effective configuration (secrets masked)\n", c.Role)
	printed := map[string]bool{}
	for _, section := range roleSections[c.Role] {
		fmt.Fprintf(&b, "%s:\n", section)
		for _, k := range Keys {
			if k.section() != section {
				continue
			}
			rest := strings.TrimPrefix(k.Name, section+".")
			indent := "  "
			if i := strings.LastIndexByte(rest, '.'); i >= 0 {
				group := rest[:i]
				if !printed[section+"."+group] {
					fmt.Fprintf(&b, "  %s:\n", group)
					printed[section+"."+group] = true
				}
				rest, indent = rest[i+1:], "    "
			}
			fmt.Fprintf(&b, "%s%s: %s  # %s\n", indent, rest, c.render(k), c.sources[k.Name])
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (c *Config) render(k Key) string {
	val := c.values[k.Name]
	if k.Secret {
		if s, _ := val.(string); s != "" {
			return strconv.Quote(redacted)
		}
		return `""`
	}
	switch x := val.(type) {
	case string:
		return strconv.Quote(x)
	case time.Duration:
		return strconv.Quote(x.String())
	default:
		return fmt.Sprint(x)
	}
}
