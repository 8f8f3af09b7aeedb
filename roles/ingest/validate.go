package ingest

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// maxMetricNameBytes bounds metric_name (<deviceName>.<reading name>).
// PostgreSQL refuses a primary-key entry over 2,704 bytes ("index row size
// exceeds maximum", SQLSTATE 54000), an error that is neither a data error
// nor an outage; refusing names over 2 KiB here keeps such a reading out of
// the batch, where it would fail every row with it.
const maxMetricNameBytes = 2048

// checkMessage splits a decoded message into what can be written and what
// cannot, before anything reaches the database, so that one bad entry never
// fails a batch insert (and never sets off a search for it under the
// batch's deadline). A fault of the message as a whole (agent, device) is
// returned as an error; faulty readings are removed from m and returned
// with their reason, and the message's other readings go on.
func checkMessage(m *telemetry.Message) (bad []rejected, err error) {
	if _, err := telemetry.ParseAgentUUID(m.AgentUUID); err != nil {
		return nil, fmt.Errorf("%w: agentUuid: %v", telemetry.ErrInvalid, err)
	}
	if strings.TrimSpace(m.DeviceName) == "" {
		return nil, fmt.Errorf("%w: deviceName is empty", telemetry.ErrInvalid)
	}
	// PostgreSQL's text type cannot hold NUL.
	if strings.IndexByte(m.DeviceName, 0) >= 0 {
		return nil, fmt.Errorf("%w: deviceName contains a NUL byte", telemetry.ErrInvalid)
	}
	if strings.IndexByte(m.Protocol, 0) >= 0 {
		return nil, fmt.Errorf("%w: protocol contains a NUL byte", telemetry.ErrInvalid)
	}
	if len(m.Readings) == 0 {
		return nil, fmt.Errorf("%w: no readings", telemetry.ErrInvalid)
	}
	// Most messages are valid: scan first, and copy the readings only for
	// one that has a fault, so a valid message costs no allocation.
	first := -1
	for i := range m.Readings {
		if readingFault(m.DeviceName, &m.Readings[i]) != "" {
			first = i
			break
		}
	}
	if first < 0 {
		return nil, nil
	}
	good := make([]telemetry.Reading, first, len(m.Readings)-1)
	copy(good, m.Readings[:first])
	for i := first; i < len(m.Readings); i++ {
		r := &m.Readings[i]
		if reason := readingFault(m.DeviceName, r); reason != "" {
			bad = append(bad, rejected{index: i, reading: *r, reason: reason})
			continue
		}
		good = append(good, *r)
	}
	if len(good) == 0 {
		return nil, fmt.Errorf("%w: no valid reading; first: %s", telemetry.ErrInvalid, bad[0].reason)
	}
	m.Readings = good
	return bad, nil
}

// rejected is one reading left out of its message.
type rejected struct {
	index   int
	reading telemetry.Reading
	reason  string
}

// readingFault says why r cannot be stored, or "" when it can. A value is
// always finite: the decoder accepts only JSON numbers within float64's
// range.
func readingFault(device string, r *telemetry.Reading) string {
	switch {
	case strings.TrimSpace(r.Name) == "":
		return "reading has no name"
	case strings.IndexByte(r.Name, 0) >= 0:
		return fmt.Sprintf("reading name %q contains a NUL byte", clip(r.Name))
	case len(device)+1+len(r.Name) > maxMetricNameBytes:
		return fmt.Sprintf("metric name of %d bytes exceeds %d", len(device)+1+len(r.Name), maxMetricNameBytes)
	case strings.IndexByte(r.Unit, 0) >= 0:
		return fmt.Sprintf("unit of reading %q contains a NUL byte", clip(r.Name))
	case strings.IndexByte(r.Quality, 0) >= 0:
		return fmt.Sprintf("quality of reading %q contains a NUL byte", clip(r.Name))
	}
	return ""
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// decodeEntries splits entries into messages and dead letters. A message
// without a timestamp gets its entry's time now, so a copy that goes through
// the spool keeps it. Readings refused inside an otherwise valid message
// travel with it (parsed.rejects) and are dead-lettered once its valid
// readings are written. The messages and their readings live in buf until
// it is reset.
func decodeEntries(entries []streamstore.Entry, buf *batchBuf) ([]parsed, []deadLetter) {
	buf.clean = false
	msgs := buf.msgs[:0]
	var dead []deadLetter
	for _, en := range entries {
		data, ok := en.Values[telemetry.StreamField]
		if !ok {
			dead = append(dead, deadLetter{id: en.ID, payload: fmt.Sprint(en.Values), reason: "entry has no data field"})
			continue
		}
		m, err := buf.arena.Decode(data)
		if err != nil {
			dead = append(dead, deadLetter{id: en.ID, payload: data, reason: err.Error()})
			continue
		}
		bad, err := checkMessage(&m)
		if err != nil {
			dead = append(dead, deadLetter{id: en.ID, payload: data, reason: err.Error()})
			continue
		}
		if m.Timestamp == nil {
			t, err := streamstore.IDTime(en.ID)
			if err != nil {
				t = time.Now()
			}
			m.Timestamp = telemetry.TimestampOf(t)
		}
		p := parsed{id: en.ID, payload: data, msg: m}
		if len(bad) > 0 {
			p.rejects = rejectedLetter(en.ID, m, bad)
		}
		msgs = append(msgs, p)
	}
	buf.msgs = msgs
	return msgs, dead
}

// rejectedLetter is the dead letter of a message's refused readings: the
// message with only those readings, so that a replay after a fix writes
// exactly what was left out, and the reasons.
func rejectedLetter(id string, m telemetry.Message, bad []rejected) *deadLetter {
	part := m
	part.Readings = make([]telemetry.Reading, len(bad))
	reasons := make([]string, len(bad))
	for i, b := range bad {
		part.Readings[i] = b.reading
		reasons[i] = fmt.Sprintf("reading %d: %s", b.index, b.reason)
	}
	// Cannot fail: the message was decoded from JSON, so every value is
	// finite.
	data, _ := json.Marshal(part)
	return &deadLetter{id: id, payload: string(data),
		reason: fmt.Sprintf("%d of %d readings invalid, the others were written: %s",
			len(bad), len(bad)+len(m.Readings), strings.Join(reasons, "; "))}
}
