package query

import (
	"fmt"
	"slices"
	"strings"
)

// Series labels, in the order results are sorted by. A series is the
// samples of one (agent_uuid, metric_name) that agree on all five; a NULL
// column reads as "" and an empty label is left out of results, as in
// PromQL where an empty label and a missing one are the same.
const (
	LabelAgentUUID  = "agent_uuid"
	LabelMetricName = "metric_name"
	LabelDeviceName = "device_name"
	LabelProtocol   = "protocol"
	LabelUnit       = "unit"
	// AttrQuality is a sample attribute: it can be matched, which filters
	// samples, but it does not split series and cannot be grouped by.
	AttrQuality = "quality"
)

// seriesLabels indexes the label arrays used during evaluation.
var seriesLabels = [numLabels]string{LabelAgentUUID, LabelMetricName, LabelDeviceName, LabelProtocol, LabelUnit}

const numLabels = 5

func labelIndex(name string) int {
	for i, l := range seriesLabels {
		if l == name {
			return i
		}
	}
	return -1
}

// SeriesLabels returns the label names a series has, which by and without
// accept.
func SeriesLabels() []string { return slices.Clone(seriesLabels[:]) }

// checkMatchLabel accepts the series labels and quality.
func checkMatchLabel(name string) error {
	switch {
	case labelIndex(name) >= 0 || name == AttrQuality:
		return nil
	case name == "tenant_id":
		return fmt.Errorf("tenant_id cannot be matched: every query is scoped to the caller's tenant")
	}
	return fmt.Errorf("unknown label %q: labels are %s, and quality can be matched", name, strings.Join(seriesLabels[:], ", "))
}

// checkGroupLabel accepts the series labels only.
func checkGroupLabel(name string) error {
	switch {
	case labelIndex(name) >= 0:
		return nil
	case name == AttrQuality:
		return fmt.Errorf("quality is a sample attribute, not a series label: it can be matched but not used in by or without")
	case name == "tenant_id":
		return fmt.Errorf("tenant_id is not a label: every query is scoped to the caller's tenant")
	}
	return fmt.Errorf("unknown label %q: labels are %s", name, strings.Join(seriesLabels[:], ", "))
}
