package extdash

import (
	"encoding/json"
	"fmt"
)

// AlertRule is a Grafana-managed alert rule as the routes answer it.
type AlertRule struct {
	UID       string            `json:"uid"`
	Title     string            `json:"title"`
	FolderUID string            `json:"folderUid"`
	RuleGroup string            `json:"ruleGroup"`
	Condition string            `json:"condition"`
	For       string            `json:"for,omitempty"`
	Paused    bool              `json:"paused"`
	Labels    map[string]string `json:"labels"`
	Updated   string            `json:"updated,omitempty"`
	// Threshold is the rule's one-value threshold; nil when its condition
	// is something else (a range, a math expression, a classic condition
	// of several parts), which the update refuses.
	Threshold *Threshold `json:"threshold"`
}

// Threshold is where a rule's threshold is and what it is.
type Threshold struct {
	// RefID names the query of the rule's data the threshold is in.
	RefID string `json:"refId"`
	// Kind is the expression type: threshold or classic_conditions.
	Kind string `json:"kind"`
	// Op is Grafana's evaluator type: gt, lt, gte, lte, eq, ne.
	Op    string  `json:"op"`
	Value float64 `json:"value"`
}

// decodedRule is a rule with the document Grafana sent, which a PUT
// sends back whole.
type decodedRule struct {
	AlertRule
	doc map[string]json.RawMessage
	// dataIdx is the index in data of the threshold's query.
	dataIdx int
}

// wire is the part of Grafana's ProvisionedAlertRule this package reads.
type wire struct {
	UID       string            `json:"uid"`
	Title     string            `json:"title"`
	FolderUID string            `json:"folderUID"`
	RuleGroup string            `json:"ruleGroup"`
	Condition string            `json:"condition"`
	For       string            `json:"for"`
	IsPaused  bool              `json:"isPaused"`
	Labels    map[string]string `json:"labels"`
	Updated   string            `json:"updated"`
	Data      []struct {
		RefID         string          `json:"refId"`
		DatasourceUID string          `json:"datasourceUid"`
		Model         json.RawMessage `json:"model"`
	} `json:"data"`
}

// model is the part of an expression's model that holds a threshold.
type model struct {
	Type       string `json:"type"`
	Conditions []struct {
		Evaluator struct {
			Type   string    `json:"type"`
			Params []float64 `json:"params"`
		} `json:"evaluator"`
	} `json:"conditions"`
}

// oneValue are the evaluator types of one threshold value; the range
// types (within_range, outside_range) have two and are not changed.
var oneValue = map[string]bool{"gt": true, "lt": true, "gte": true, "lte": true, "eq": true, "ne": true}

// DecodeAlertRule reads one ProvisionedAlertRule and finds its
// threshold: the expression (datasource "__expr__") its condition names,
// of type threshold or classic_conditions, with one condition of one
// value.
func DecodeAlertRule(body []byte) (decodedRule, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil || doc == nil {
		return decodedRule{}, fmt.Errorf("%w: alert rule is not a JSON object", ErrUpstream)
	}
	var w wire
	if err := json.Unmarshal(body, &w); err != nil {
		return decodedRule{}, fmt.Errorf("%w: alert rule: %v", ErrUpstream, err)
	}
	if w.UID == "" {
		return decodedRule{}, fmt.Errorf("%w: alert rule without a uid", ErrUpstream)
	}
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	r := decodedRule{AlertRule: AlertRule{UID: w.UID, Title: w.Title, FolderUID: w.FolderUID, RuleGroup: w.RuleGroup,
		Condition: w.Condition, For: w.For, Paused: w.IsPaused, Labels: w.Labels, Updated: w.Updated}, doc: doc, dataIdx: -1}
	for i, d := range w.Data {
		if d.RefID != w.Condition || d.DatasourceUID != "__expr__" {
			continue
		}
		var m model
		if json.Unmarshal(d.Model, &m) != nil || (m.Type != "threshold" && m.Type != "classic_conditions") || len(m.Conditions) != 1 {
			break
		}
		ev := m.Conditions[0].Evaluator
		if !oneValue[ev.Type] || len(ev.Params) < 1 {
			break
		}
		r.Threshold = &Threshold{RefID: d.RefID, Kind: m.Type, Op: ev.Type, Value: ev.Params[0]}
		r.dataIdx = i
		break
	}
	return r, nil
}

// withThreshold returns the rule's document with the threshold set to
// value and everything else as it came.
func (r decodedRule) withThreshold(value float64) ([]byte, error) {
	if r.Threshold == nil {
		return nil, fmt.Errorf("%w: alert rule %s", ErrNoThreshold, r.UID)
	}
	var data []map[string]json.RawMessage
	if err := json.Unmarshal(r.doc["data"], &data); err != nil || r.dataIdx >= len(data) {
		return nil, fmt.Errorf("%w: alert rule %s data: %v", ErrUpstream, r.UID, err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data[r.dataIdx]["model"], &m); err != nil {
		return nil, fmt.Errorf("%w: alert rule %s model: %v", ErrUpstream, r.UID, err)
	}
	var conds []map[string]json.RawMessage
	if err := json.Unmarshal(m["conditions"], &conds); err != nil || len(conds) != 1 {
		return nil, fmt.Errorf("%w: alert rule %s conditions", ErrUpstream, r.UID)
	}
	var ev map[string]json.RawMessage
	if err := json.Unmarshal(conds[0]["evaluator"], &ev); err != nil {
		return nil, fmt.Errorf("%w: alert rule %s evaluator", ErrUpstream, r.UID)
	}
	var params []json.RawMessage
	if err := json.Unmarshal(ev["params"], &params); err != nil || len(params) < 1 {
		return nil, fmt.Errorf("%w: alert rule %s evaluator params", ErrUpstream, r.UID)
	}
	var err error
	set := func(dst *json.RawMessage, v any) {
		if err == nil {
			*dst, err = json.Marshal(v)
		}
	}
	set(&params[0], value)
	var p json.RawMessage
	set(&p, params)
	ev["params"] = p
	var e json.RawMessage
	set(&e, ev)
	conds[0]["evaluator"] = e
	var cs json.RawMessage
	set(&cs, conds)
	m["conditions"] = cs
	var mm json.RawMessage
	set(&mm, m)
	data[r.dataIdx]["model"] = mm
	doc := make(map[string]json.RawMessage, len(r.doc))
	for k, v := range r.doc {
		doc[k] = v
	}
	var dd json.RawMessage
	set(&dd, data)
	doc["data"] = dd
	if err != nil {
		return nil, fmt.Errorf("encode alert rule %s: %w", r.UID, err)
	}
	return json.Marshal(doc)
}
