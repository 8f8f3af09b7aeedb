package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os/signal"
	"sync"
	"syscall"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/edgeplat/edgeplat/core/codec"
)

// PublishOptions are the flags of `edgeplat bench publish`.
type PublishOptions struct {
	Publishers, Messages, Readings int
	Format                         string
	Rate                           float64
	JSON                           bool
	Timeout                        time.Duration
}

func (o PublishOptions) validate() error {
	if o.Format != FormatInflux {
		if _, err := codec.ParseFormat(o.Format); err != nil {
			return fmt.Errorf("--format: %w (or %s)", err, FormatInflux)
		}
	}
	if o.Timeout <= 0 {
		return fmt.Errorf("--timeout must be positive, got %s", o.Timeout)
	}
	return validateLoad(o.Publishers, o.Messages, o.Readings, o.Rate)
}

// PublishReport is what `bench publish` measured; --json prints it as is.
// The start and end instants are wall-clock Unix nanoseconds, so a script
// that watches the consumer can time first publish -> last row on the same
// clock.
type PublishReport struct {
	Publishers         int     `json:"publishers"`
	MessagesPerPub     int     `json:"messagesPerPublisher"`
	ReadingsPerMessage int     `json:"readingsPerMessage"`
	Format             string  `json:"format"`
	PayloadBytes       float64 `json:"payloadBytesAvg"`
	TargetRate         float64 `json:"targetRate"`
	Broker             string  `json:"broker"`
	Tenant             string  `json:"tenant"`
	TopicFilter        string  `json:"topicFilter"`

	Messages       int     `json:"messages"`
	Published      int64   `json:"published"` // acknowledged by the broker (PUBACK)
	StartUnixNano  int64   `json:"startUnixNano"`
	EndUnixNano    int64   `json:"endUnixNano"` // last PUBACK
	PublishSeconds float64 `json:"publishSeconds"`
	PublishRate    float64 `json:"publishMessagesPerSec"`
	CPUSeconds     float64 `json:"cpuSeconds"` // this process while publishing
	PeakRSSMB      float64 `json:"peakRssMb"`
}

// RunPublish runs `edgeplat bench publish`: the publishing side of
// bench pipeline alone, for measuring another consumer of the same load.
func RunPublish(ctx context.Context, o PublishOptions, env Env) error {
	if err := o.validate(); err != nil {
		return &UsageError{err}
	}
	apiCfg, err := pipelineAPIConfig(env)
	if err != nil {
		return err
	}
	if env.PrintConfig {
		return apiCfg.WritePrintable(env.Stdout)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	l := newPublishLoad(o.Publishers, o.Messages, o.Readings, o.Format, o.Rate)
	if err := l.encode(env.Stderr); err != nil {
		return err
	}
	rep := PublishReport{Publishers: o.Publishers, MessagesPerPub: o.Messages, ReadingsPerMessage: o.Readings,
		Format: o.Format, PayloadBytes: l.payloadBytes, TargetRate: o.Rate, Broker: apiCfg.MQTT.BrokerURL,
		Tenant: l.tenant, TopicFilter: "i/" + l.tenant + "/a/+/endpoints/modbus", Messages: l.total()}

	clients := make([]paho.Client, o.Publishers)
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.Disconnect(100)
			}
		}
	}()
	for i := range clients {
		c, err := pipelineConnect(apiCfg.MQTT, fmt.Sprintf("edgeplat-bench-pub-%s-%d", randomHex(4), i), true)
		if err != nil {
			return err
		}
		clients[i] = c
	}

	pubCtx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	resetPeakRSS()
	cpu0 := cpuTime()
	errs := make([]error, len(clients))
	t0 := time.Now()
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() { errs[i] = l.publish(pubCtx, c, i, t0) })
	}
	pt := newBenchTicker(env.Stderr, "publish")
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(benchPollEvery)
	defer tick.Stop()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-tick.C:
			pt.maybe(func() string {
				return fmt.Sprintf("%d/%d published (%s msg/s)", l.published.Load(), l.total(),
					benchHuman(float64(l.published.Load())/time.Since(t0).Seconds()))
			})
		}
	}
	end := time.Now()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	// publish returns early, without error, when its context ends.
	if n := l.published.Load(); n < int64(l.total()) {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted: %d of %d messages acknowledged: %w", n, l.total(), ctx.Err())
		}
		return fmt.Errorf("not finished after --timeout %s: %d of %d messages acknowledged", o.Timeout, n, l.total())
	}
	rep.Published = l.published.Load()
	rep.StartUnixNano, rep.EndUnixNano = t0.UnixNano(), end.UnixNano()
	rep.PublishSeconds = end.Sub(t0).Seconds()
	rep.PublishRate = float64(rep.Published) / rep.PublishSeconds
	rep.CPUSeconds = (cpuTime() - cpu0).Seconds()
	rep.PeakRSSMB = float64(peakRSS()) / (1 << 20)
	pt.done(fmt.Sprintf("%d messages acknowledged in %s: %s messages/s", rep.Published, benchRound(end.Sub(t0)), benchHuman(rep.PublishRate)))

	if o.JSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	rep.write(env)
	return nil
}

func (rep PublishReport) write(env Env) {
	w := env.Stdout
	fmt.Fprintf(w, "%d publishers x %d messages x %d readings = %d readings, %s (%.0f bytes/message), rate %s\n",
		rep.Publishers, rep.MessagesPerPub, rep.ReadingsPerMessage, rep.Messages*rep.ReadingsPerMessage, rep.Format,
		rep.PayloadBytes, pipelineRate(rep.TargetRate))
	fmt.Fprintf(w, "broker %s, topics %s\n", rep.Broker, rep.TopicFilter)
	fmt.Fprintf(w, "published:      %d messages acknowledged in %.2fs: %.0f messages/s, %.0f readings/s\n",
		rep.Published, rep.PublishSeconds, rep.PublishRate, rep.PublishRate*float64(rep.ReadingsPerMessage))
	fmt.Fprintf(w, "process:        %.1f CPU s (%.0f µs a message), peak RSS %.0f MB\n",
		rep.CPUSeconds, rep.CPUSeconds/float64(max(1, rep.Published))*1e6, rep.PeakRSSMB)
}
