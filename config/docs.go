package config

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/profiles"
)

// WriteMarkdown renders the key table as docs/configuration.md. A test keeps
// the committed file equal to this output, so the reference cannot drift
// from the code.
func WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString(`# Configuration reference

<!-- Generated from config/keys.go by "go test ./config -run TestConfigurationDoc -update". Do not edit. -->

Every setting has a dotted key (the path in the YAML file given with
` + "`--config`" + `), an environment variable, and a built-in default.
Precedence, low to high: built-in default < ingestion profile < config file <
environment < command-line flag. Long-standing settings keep their bare
environment names (` + "`DB_HOST`, `JWT_SECRET`" + `), and the broker client's
settings take the same ` + "`MQTT_`" + ` form (` + "`MQTT_USERNAME`, `MQTT_PASSWORD`" + `,
with their former ` + "`EDGEPLAT_MQTT_`" + ` names still read); the others read
` + "`EDGEPLAT_<KEY>`" + `. Unknown keys in the file, malformed values and out-of-range
values stop start-up with one line per problem naming key, variable and value,
for example:

    edgeplat serve-api: invalid configuration: db.port (DB_PORT) must be 1..65535, got 70000

Environment variables that look meant for edgeplat but are not read are
reported at start as warnings: an unknown ` + "`EDGEPLAT_`" + ` variable, a near-miss
of a setting's name (` + "`DB_HOTS`: did you mean `DB_HOST`?" + `), or ` + "`PORT`" + ` under
all-in-one, which serves several ports and takes them from flags.

` + "`edgeplat <role> --print-config`" + ` prints the effective configuration with
secrets masked and the layer each value came from.

Each role reads only its sections:

| Role | Sections |
|---|---|
`)
	for _, role := range Roles() {
		fmt.Fprintf(&b, "| `%s` | %s |\n", role, "`"+strings.Join(roleSections[role], "`, `")+"`")
	}
	section := ""
	for _, k := range Keys {
		if s := k.section(); s != section {
			section = s
			fmt.Fprintf(&b, "\n## `%s`\n\n| Key | Environment | Type | Default | Description |\n|---|---|---|---|---|\n", s)
		}
		env := "`" + k.Env + "`"
		for _, a := range k.Aliases {
			env += ", `" + a + "`"
		}
		if len(k.EnvRoles) > 0 {
			env += " (" + strings.Join(k.EnvRoles, ", ") + " only)"
		}
		doc := k.Doc
		if k.Secret {
			doc += " Secret: masked in output."
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", k.Name, env, k.Kind, renderDefault(k), doc)
	}

	b.WriteString(`
## Removed settings

These settings had no effect and were removed. A variable or config-file key
that still sets one is ignored with a warning at start; it does not stop the
process.

| Key | Environment | Why |
|---|---|---|
`)
	for _, r := range Retired {
		fmt.Fprintf(&b, "| `%s` | `%s` | %s. |\n", r.Name, r.Env, upperFirst(r.Reason))
	}

	b.WriteString(`
## Ingestion profiles

` + "`INGESTION_PROFILE`" + ` (key ` + "`ingest.profile`" + `) applies one of these sets of
values over the built-in defaults of the ingest and all-in-one roles; ` + "`none`" + `
keeps the built-in defaults. Any variable set explicitly still wins.
serve-api reads no profile, yet it is the role that refuses appends to a
full stream: in a deployment with separate roles, give serve-api the same
` + "`STREAMSTORE_INGESTION_STREAM_MAXLEN`" + ` as the profile of the ingest role
(otherwise it uses its default, 10000).

`)
	names := profiles.Names()
	b.WriteString("| Key |")
	for _, n := range names {
		fmt.Fprintf(&b, " %s |", n)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(names)) + "\n")
	sets := make([]map[string]any, len(names))
	for i, n := range names {
		p, err := profiles.Get(n)
		if err != nil {
			return err
		}
		sets[i] = p
	}
	for _, k := range Keys {
		used := false
		for _, p := range sets {
			if _, ok := p[k.Name]; ok {
				used = true
			}
		}
		if !used {
			continue
		}
		fmt.Fprintf(&b, "| `%s` (`%s`) |", k.Name, k.Env)
		for _, p := range sets {
			if v, ok := p[k.Name]; ok {
				fmt.Fprintf(&b, " %v |", v)
			} else {
				b.WriteString(" - |")
			}
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func renderDefault(k Key) string {
	show := func(v any) string {
		switch x := v.(type) {
		case string:
			if x == "" {
				return "(empty)"
			}
			return "`" + x + "`"
		case time.Duration:
			return "`" + x.String() + "`"
		default:
			return fmt.Sprintf("`%v`", x)
		}
	}
	out := show(k.Default)
	for _, role := range Roles() {
		if d, ok := k.RoleDefaults[role]; ok {
			out += fmt.Sprintf("; %s: %s", role, show(d))
		}
	}
	return out
}
