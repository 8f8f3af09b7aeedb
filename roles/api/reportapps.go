package api

import (
	"fmt"

	"github.com/edgeplat/edgeplat/core/codec"
)

// maxAppsBytes bounds the apps section (control.AppsState) of a stored
// state report. The whole report may take maxReportBytes; without a bound
// of its own, an agent running many apps with large environments would
// crowd out the rest of its report, or push it over the limit where the
// cloud would keep nothing at all.
const maxAppsBytes = 64 << 10

// boundApps shrinks the apps section of a decoded state report in place
// until it fits maxAppsBytes (docs/agents-api.md, current-state): first
// every service's config goes (the cloud holds the target it came from;
// state, status and error are what an operator reads from a report), the
// section then saying "configsOmitted": true; then apps are dropped from
// the end, "appsTotal" saying how many the agent reported. A report
// without an apps section, or one of another shape, is left as it is.
func boundApps(report map[string]any) error {
	section, ok := report["apps"].(map[string]any)
	if !ok {
		return nil
	}
	size, err := jsonSize(section)
	if err != nil || size <= maxAppsBytes {
		return err
	}
	apps, _ := section["apps"].([]any)
	for _, a := range apps {
		app, _ := a.(map[string]any)
		services, _ := app["services"].([]any)
		for _, s := range services {
			if svc, ok := s.(map[string]any); ok {
				delete(svc, "config")
			}
		}
	}
	section["configsOmitted"] = true
	if size, err = jsonSize(section); err != nil || size <= maxAppsBytes {
		return err
	}
	section["apps"] = []any{}
	section["appsTotal"] = len(apps)
	// What is left besides the list (runtime, flags), plus a comma per app.
	used, err := jsonSize(section)
	if err != nil {
		return err
	}
	kept := 0
	for _, a := range apps {
		n, err := jsonSize(a)
		if err != nil {
			return err
		}
		if used+n+1 > maxAppsBytes {
			break
		}
		used += n + 1
		kept++
	}
	section["apps"] = apps[:kept]
	return nil
}

func jsonSize(v any) (int, error) {
	b, err := codec.AppendJSON(nil, v)
	if err != nil {
		return 0, fmt.Errorf("encode apps: %w", err)
	}
	return len(b), nil
}
