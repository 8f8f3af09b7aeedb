package codec

import "fmt"

// DictVersion is the newest key-compaction dictionary version; Encode writes
// it into every compacted payload.
const DictVersion = 1

// dictNames is the key-compaction dictionary: the index of a name is its
// compacted key.
//
// APPEND ONLY, FOREVER. Never reorder, remove or rename an entry, and never
// reuse an index. Agents buffer payloads offline for days and replay them, and
// old agents stay in the field for years, so a payload compacted today must
// expand to the same field names on every future cloud release. To add names:
// append them here, add a new version to dictVersionLen covering the longer
// table, bump DictVersion, and extend docs/codec.md and
// testdata/dictionary.json (the test fails until all three agree). Older
// versions stay decodable because every version is a prefix of the next.
var dictNames = [...]string{
	// custom envelope and readings
	0:  "timestamp",
	1:  "protocol",
	2:  "msgId",
	3:  "messages",
	4:  "readings",
	5:  "deviceName",
	6:  "deviceId",
	7:  "metric",
	8:  "value",
	9:  "unit",
	10: "quality",
	11: "qualityCode",
	12: "nodeType",
	// tags, ecp and ml formats
	13: "name",
	14: "tags",
	15: "node",
	16: "group",
	17: "type",
	18: "features",
	19: "dtype",
	20: "error",
	21: "schema",
	// anomaly enrichment
	22: "anomaly_score",
	23: "anomaly_threshold",
	24: "baseline_samples",
	25: "detection_methods",
	26: "predicted_next",
	27: "trend",
	28: "trend_strength",
	29: "forecast_confidence",
	30: "time_to_threshold",
	31: "threshold",
	32: "estimated_seconds",
	33: "confidence",
	// heartbeat
	34: "endpoint",
	35: "state",
	36: "stats",
	37: "messagesReceived",
	38: "messagesPublished",
	39: "bytesReceived",
	40: "bytesPublished",
	41: "reconnectAttempts",
	42: "lastPublishTime",
	43: "lastHeartbeatTime",
	44: "lastConnectedTime",
}

// dictVersionLen[v] is how many entries of dictNames version v covers;
// index 0 is unused because versions start at 1.
var dictVersionLen = [...]int{0, 45}

// dictIndex maps a name to its index. Decoders also use it to intern keys:
// looking up string(b) in a map does not allocate, and a hit returns the
// static name instead of a fresh copy.
var dictIndex = func() map[string]int {
	m := make(map[string]int, len(dictNames))
	for i, n := range dictNames {
		if _, dup := m[n]; dup {
			panic("BUG: codec dictionary repeats " + n)
		}
		m[n] = i
	}
	if dictVersionLen[DictVersion] != len(dictNames) {
		panic("BUG: codec dictionary version table does not cover dictNames")
	}
	return m
}()

// Dictionary returns a copy of the key-compaction dictionary of the given
// version, index i holding the name for key i.
func Dictionary(version int) ([]string, error) {
	d, err := dictionary(version)
	if err != nil {
		return nil, err
	}
	return append([]string(nil), d...), nil
}

func dictionary(version int) ([]string, error) {
	if version < 1 || version >= len(dictVersionLen) {
		return nil, fmt.Errorf("%w: key-compaction dictionary version %d (known: 1..%d)", ErrUnsupported, version, DictVersion)
	}
	return dictNames[:dictVersionLen[version]], nil
}

// internKey returns the dictionary's own copy of a well-known name, so the
// dozens of repeated keys in a batch cost no allocation; other keys are copied.
func internKey(b []byte) string {
	if i, ok := dictIndex[string(b)]; ok {
		return dictNames[i]
	}
	return validString(b)
}
