package bench

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/influxdata/line-protocol/v2/lineprotocol"

	"github.com/edgeplat/edgeplat/core/codec"
	redisstore "github.com/edgeplat/edgeplat/core/streamstore/redis"
)

// publishLoad is the publishing side of the MQTT benches (pipeline,
// cluster): the agents of one random tenant, their messages encoded before
// the clock starts, and the QoS 1 publishers that send them. Every message
// has a msgId v2_<kid>_<seq> and its own (agent, device, time), so the rows
// it becomes can be counted message by message.
type publishLoad struct {
	publishers, messages, readings int
	format                         string
	rate                           float64 // messages/s over all publishers; 0: as fast as acknowledged

	tenant       string
	kid          string
	agents       []string   // 22-character ids of the publishers' agents
	payloads     [][][]byte // [publisher][message]
	payloadBytes float64    // average encoded size

	published atomic.Int64 // acknowledged by the broker
}

func newPublishLoad(publishers, messages, readings int, format string, rate float64) *publishLoad {
	l := &publishLoad{publishers: publishers, messages: messages, readings: readings, format: format, rate: rate,
		tenant: newTenantID(), kid: randomAlnum(codec.KidLen)}
	for range publishers {
		l.agents = append(l.agents, newTenantID()) // a random UUID in its 22-character form
	}
	return l
}

// total is the number of messages of the load.
func (l *publishLoad) total() int { return l.publishers * l.messages }

// encode builds every publisher's payloads before the clock starts: the
// agents' encoding cost is not the pipeline's.
func (l *publishLoad) encode(progress io.Writer) error {
	t0 := time.Now()
	format := codec.Format(l.format)
	base := time.Now().UTC().Truncate(time.Second).Add(-time.Duration(l.messages/pipelineDevices+1) * time.Second)
	names := make([]string, l.readings)
	units := make([]string, l.readings)
	for r := range names {
		k := benchKinds[r%len(benchKinds)]
		names[r], units[r] = fmt.Sprintf("%s_%d", k.name, r/len(benchKinds)+1), k.unit
	}
	var bytes int64
	var err error
	l.payloads = make([][][]byte, l.publishers)
	for pub := range l.publishers {
		l.payloads[pub] = make([][]byte, l.messages)
		for i := range l.messages {
			ts := base.Add(time.Duration(i/pipelineDevices) * time.Second).UnixMilli()
			dev := fmt.Sprintf("plc-%02d", i%pipelineDevices+1)
			readings := make([]any, l.readings)
			for r := range readings {
				readings[r] = map[string]any{"deviceName": dev, "metric": names[r], "unit": units[r], "quality": "GOOD",
					"timestamp": ts, "value": float64((pub*7919+i*104729+r*31)%100_000) / 100}
			}
			var data []byte
			if l.format == FormatInflux {
				data = l.lines(pub, dev, ts, readings)
			} else if data, err = l.envelope(format, uint64(i+1), ts, readings); err != nil {
				return err
			}
			bytes += int64(len(data))
			l.payloads[pub][i] = data
		}
	}
	l.payloadBytes = float64(bytes) / float64(l.total())
	fmt.Fprintf(progress, "encode: %d messages of %d readings in %s, %.0f bytes each on average (%s)\n",
		l.total(), l.readings, l.format, l.payloadBytes, benchRound(time.Since(t0)))
	return nil
}

func (l *publishLoad) envelope(format codec.Format, seq uint64, ts int64, readings []any) ([]byte, error) {
	id, err := codec.FormatMsgID(l.kid, seq)
	if err != nil {
		panic("BUG: bench msgId: " + err.Error())
	}
	env := map[string]any{"timestamp": ts, "protocol": "modbus", "msgId": id,
		"messages": []any{map[string]any{"readings": readings}}}
	data, err := codec.Encode(env, codec.EncodeOptions{Format: format})
	if err != nil {
		return nil, fmt.Errorf("encode bench message: %w", err)
	}
	return data, nil
}

// FormatInflux is the publish format of `bench publish --format influx`:
// InfluxDB line protocol, one line per reading, for collectors such as
// Telegraf that take no edgeplat envelope.
const FormatInflux = "influx"

// lpMeasurement is the measurement of the line protocol load.
const lpMeasurement = "readings"

// lines renders one message's readings as line protocol, one line each:
// tags agent (the publisher's agent as a UUID) and metric (device.metric,
// as edgeplat names the reading's metric_name), the float field value and
// the reading's time in nanoseconds, the parsers' default precision. The
// key a row gets is then the one edgeplat keeps: (agent, metric, time).
func (l *publishLoad) lines(pub int, dev string, ts int64, readings []any) []byte {
	var enc lineprotocol.Encoder
	enc.SetPrecision(lineprotocol.Nanosecond)
	agent := pipelineUUID(l.agents[pub])
	at := time.UnixMilli(ts)
	for _, r := range readings {
		m := r.(map[string]any)
		enc.StartLine(lpMeasurement)
		enc.AddTag("agent", agent)
		enc.AddTag("metric", dev+"."+m["metric"].(string))
		enc.AddField("value", lineprotocol.MustNewValue(m["value"].(float64)))
		enc.EndLine(at)
	}
	if err := enc.Err(); err != nil {
		panic("BUG: bench line protocol: " + err.Error())
	}
	return enc.Bytes()
}

func (l *publishLoad) topic(agent string) string {
	return "i/" + l.tenant + "/a/" + agent + "/endpoints/modbus"
}

// publish sends one publisher's messages at QoS 1 with up to
// pipelineWindow unacknowledged, paced when the load has a rate. It
// returns early, without error, when ctx ends.
func (l *publishLoad) publish(ctx context.Context, c paho.Client, pub int, t0 time.Time) error {
	topic := l.topic(l.agents[pub])
	var interval time.Duration
	if l.rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(l.publishers) / l.rate)
	}
	window := make([]paho.Token, 0, pipelineWindow)
	wait := func(tok paho.Token) error {
		if !tok.WaitTimeout(30 * time.Second) {
			return fmt.Errorf("publisher %d: no PUBACK within 30s", pub)
		}
		if err := tok.Error(); err != nil {
			return fmt.Errorf("publisher %d: %s", pub, benchOneLine(err))
		}
		l.published.Add(1)
		return nil
	}
	for i, payload := range l.payloads[pub] {
		if ctx.Err() != nil {
			return nil
		}
		if interval > 0 {
			if d := time.Until(t0.Add(time.Duration(i) * interval)); d > 0 {
				time.Sleep(d)
			}
		}
		if len(window) == pipelineWindow {
			if err := wait(window[0]); err != nil {
				return err
			}
			window = append(window[:0], window[1:]...)
		}
		window = append(window, c.Publish(topic, 1, false, payload))
	}
	for _, tok := range window {
		if err := wait(tok); err != nil {
			return err
		}
	}
	return nil
}

// agentUUIDs returns the publishers' agents as UUID strings.
func (l *publishLoad) agentUUIDs() []string {
	var out []string
	for _, a := range l.agents {
		out = append(out, pipelineUUID(a))
	}
	return out
}

// deleteDedupKeys removes the msgId de-duplication keys serve-api made for
// the load's messages (as it names them, in key mode), a thousand at a time.
func (l *publishLoad) deleteDedupKeys(ctx context.Context, store *redisstore.Store) error {
	keys := make([]string, 0, 1000)
	flush := func() error {
		if len(keys) == 0 {
			return nil
		}
		_, err := store.Delete(ctx, keys...)
		keys = keys[:0]
		return err
	}
	for _, a := range l.agents {
		for i := range l.messages {
			id, _ := codec.FormatMsgID(l.kid, uint64(i+1))
			keys = append(keys, "tenant:"+l.tenant+":agent:"+a+":msgid:"+id)
			if len(keys) == cap(keys) {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	return flush()
}
