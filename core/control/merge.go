package control

import (
	"bytes"
	"encoding/json"
	"slices"
)

// MergeTargetState overlays a fleet member's own document on its fleet's
// template and returns the member's target state (docs/fleets-and-jobs.md,
// section "Merge rules"):
//
//   - a section present in either part is present (managed) in the result;
//   - settings merge group by group and key by key, recursively through
//     objects; the member's value wins, an array or scalar is replaced whole;
//   - endpoints and destinations are matched by name: a member's item
//     replaces the template's item of that name in its place, the member's
//     other items follow the template's;
//   - a member's subscriptions to a destination replace the template's
//     subscriptions to that destination; the rest of both are kept;
//   - apps are matched by appName like endpoints: a member's app replaces
//     the template's app of that name whole;
//   - runState is stopped when either part says stopped.
//
// The parts are not changed. The result may still be invalid as a whole
// (a subscription naming a destination neither part has): re-parse it
// with ParseTargetState before storing or sending it.
func MergeTargetState(template, own TargetStateDoc) TargetStateDoc {
	if template.Empty() {
		return own
	}
	if own.Empty() {
		return template
	}
	out := TargetStateDoc{SchemaVersion: TargetSchemaVersion}
	if template.RunState == RunStopped || own.RunState == RunStopped {
		out.RunState = RunStopped
	} else if template.RunState != "" || own.RunState != "" {
		out.RunState = RunRunning
	}
	out.Settings = mergeSettings(template.Settings, own.Settings)
	out.Endpoints = mergeNamed(template.Endpoints, own.Endpoints, func(e TargetEndpoint) string { return e.Name })
	out.Destinations = mergeNamed(template.Destinations, own.Destinations, func(d TargetDestination) string { return d.Name })
	out.Apps = mergeNamed(template.Apps, own.Apps, func(a TargetApp) string { return a.AppName })
	if template.Subscriptions != nil || own.Subscriptions != nil {
		out.Subscriptions = make([]TargetSubscription, 0, len(template.Subscriptions)+len(own.Subscriptions))
		for _, s := range template.Subscriptions {
			if !slices.ContainsFunc(own.Subscriptions, func(o TargetSubscription) bool { return o.Destination == s.Destination }) {
				out.Subscriptions = append(out.Subscriptions, s)
			}
		}
		out.Subscriptions = append(out.Subscriptions, own.Subscriptions...)
	}
	return out
}

// mergeNamed overlays own on base by name; nil when both are absent.
func mergeNamed[T any](base, own []T, name func(T) string) []T {
	if base == nil && own == nil {
		return nil
	}
	out := make([]T, 0, len(base)+len(own))
	for _, b := range base {
		if i := slices.IndexFunc(own, func(o T) bool { return name(o) == name(b) }); i >= 0 {
			out = append(out, own[i])
			continue
		}
		out = append(out, b)
	}
	for _, o := range own {
		if !slices.ContainsFunc(base, func(b T) bool { return name(b) == name(o) }) {
			out = append(out, o)
		}
	}
	return out
}

// mergeSettings merges settings groups key by key; nil when both are
// absent.
func mergeSettings(base, own map[string]json.RawMessage) map[string]json.RawMessage {
	if base == nil && own == nil {
		return nil
	}
	out := make(map[string]json.RawMessage, len(base)+len(own))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range own {
		if b, ok := out[k]; ok {
			out[k] = mergeJSON(b, v)
			continue
		}
		out[k] = v
	}
	return out
}

// mergeJSON merges two JSON values: objects key by key, recursively;
// anything else is over's value.
func mergeJSON(base, over json.RawMessage) json.RawMessage {
	var bm, om map[string]json.RawMessage
	if !isObject(base) || !isObject(over) || json.Unmarshal(base, &bm) != nil || json.Unmarshal(over, &om) != nil {
		return over
	}
	for k, v := range om {
		if b, ok := bm[k]; ok {
			bm[k] = mergeJSON(b, v)
			continue
		}
		if bm == nil {
			bm = map[string]json.RawMessage{}
		}
		bm[k] = v
	}
	return mustCompact(bm)
}

func isObject(b json.RawMessage) bool {
	return bytes.HasPrefix(bytes.TrimSpace(b), []byte("{"))
}
